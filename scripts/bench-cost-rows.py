"""Reads `go test -bench` output (several -count runs) on stdin and prints
one "COST <benchmark> <best> <median>" row per benchmark in microseconds per
op, the format of abi_cost.c and the Python cost rows, with allocations."""

import re
import sys

runs, allocs, said = {}, {}, set()
for line in sys.stdin:
    m = re.match(r"(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+(\d+) B/op\s+(\d+) allocs/op)?", line)
    if m:
        runs.setdefault(m[1], []).append(float(m[2]) / 1000)
        if m[3] is not None:
            allocs[m[1]] = f"  ({m[3]} B/op, {m[4]} allocs/op)"
    elif line.lstrip().startswith(("cost_test.go", "--- SKIP", "--- FAIL", "FAIL", "panic")) and line not in said:
        said.add(line)  # each path or skip reason once
        print(line.rstrip())
for name, v in runs.items():
    v.sort()
    print(f"COST Go {name:49s} {v[0]:8.3f} {v[len(v) // 2]:8.3f}{allocs.get(name, '')}")
