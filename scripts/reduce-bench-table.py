#!/usr/bin/env python3
"""Summarise `go test -bench 'BenchmarkReduce$' -count N ./reduce` output.

Reads the benchmark lines on stdin and prints, per dtype and op, the best of
the N runs (the build machine is shared: contention only slows a run down)
and the median, in GB/s of memory traffic (3 bytes moved per element byte:
Into reads dst and src and writes dst), for the vector kernels (vec) and the
pure-Go loops (go), and vec's ratio to float32 vec of the same op.
"""
import collections
import re
import statistics
import sys

runs = collections.defaultdict(list)
for line in sys.stdin:
    m = re.match(r"Benchmark(\S+?)(-\d+)?\s+\d+\s+[\d.]+ ns/op\s+([\d.]+) MB/s", line)
    if m:
        runs[m.group(1)].append(float(m.group(3)) / 1000)

def get(dt, op, impl):
    v = runs.get(f"Reduce/{dt}/{op}/impl={impl}")
    return (max(v), statistics.median(v)) if v else (None, None)

if "Copy" in runs:
    print(f"copy (read+write): best {max(runs['Copy']):.1f} GB/s, median {statistics.median(runs['Copy']):.1f}")
print(f"{'dtype':<9} {'op':<4} {'vec best':>9} {'vec med':>8} {'go best':>8} {'vec/go':>7} {'vs f32':>7}")
for dt in ("float32", "float64", "bfloat16", "float16", "int32", "int64", "int8", "uint8"):
    for op in ("sum", "min", "max"):
        vb, vm = get(dt, op, "vec")
        gb, _ = get(dt, op, "go")
        fb, _ = get("float32", op, "vec")
        if vb is None:
            continue
        print(f"{dt:<9} {op:<4} {vb:>9.1f} {vm:>8.1f} {gb or 0:>8.1f} {vb / gb if gb else 0:>6.1f}x {vb / fb if fb else 0:>6.0%}")
