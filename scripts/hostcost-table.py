#!/usr/bin/env python3
"""hostcost-table.py LOG [NAME...]: the table of scripts/gpu-hostcost-ab.sh's
log: per build, size and mode (the path forced, or auto), the per-call host
time medians of every round and rank (USERCOST lines; each counted once,
the test prints them twice), their median, and each build's median over
the first build's with a permutation test of that difference (p: the share
of 20000 random splits of the pooled values whose medians differ at least
as much; small p: the difference is not the rounds' noise). Standard
library only."""
import random
import re
import statistics
import sys

LINE = re.compile(r"USERCOST all_gather (\d+) bytes in-place via (\S+)(?: \((\S+)\))?: median ([\d.]+) us, p90 ([\d.]+) us per call \(rank (\d+)\)")
ROUND = re.compile(r"^### round (\d+) (\S+):")


def parse(path):
    vals = {}  # (build, bytes, mode) -> [median per round and rank]
    seen = set()
    build, rnd = None, None
    with open(path, errors="replace") as f:
        for line in f:
            m = ROUND.match(line)
            if m:
                rnd, build = m.group(1), m.group(2)
                continue
            m = LINE.search(line)
            if not m or build is None:
                continue
            size, via, mode, med, _, rank = m.groups()
            mode = mode or via  # builds before the forced/auto split name only the path
            key = (build, int(size), mode, rank, rnd)
            if key in seen:
                continue
            seen.add(key)
            vals.setdefault((build, int(size), mode), []).append(float(med))
    return vals


def perm_p(a, b, n=20000, seed=1):
    rng = random.Random(seed)
    obs = abs(statistics.median(b) - statistics.median(a))
    pool = a + b
    hits = 0
    for _ in range(n):
        rng.shuffle(pool)
        if abs(statistics.median(pool[len(a):]) - statistics.median(pool[:len(a)])) >= obs:
            hits += 1
    return hits / n


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    vals = parse(sys.argv[1])
    builds = sys.argv[2:] or sorted({k[0] for k in vals})
    ref = builds[0]
    print(f"{'build':>6} {'bytes':>8} {'mode':>12} {'n':>3} {'median':>7} {'min':>6} {'max':>6} {'/' + ref:>7} {'p':>6}")
    for (b, size, mode) in sorted(vals, key=lambda k: (k[1], k[2], builds.index(k[0]) if k[0] in builds else 99)):
        v = vals[(b, size, mode)]
        # the reference: the first build at the same size, same mode, else its only mode (older builds)
        r = vals.get((ref, size, mode)) or next((x for (rb, rs, _), x in vals.items() if rb == ref and rs == size), None)
        ratio = p = ""
        if r and b != ref:
            ratio = f"{statistics.median(v) / statistics.median(r):.3f}"
            p = f"{perm_p(list(r), list(v)):.3f}"
        print(f"{b:>6} {size:>8} {mode:>12} {len(v):>3} {statistics.median(v):7.2f} {min(v):6.2f} {max(v):6.2f} {ratio:>7} {p:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
