"""ab-table.py LOG NAME...: the A/B table of gpu-ab.sh's log.

Per benchmark row (op, algorithm, bytes): rank 0's out-of-place time per
call (in-place with AB_PLACE=in) of every round for each build, and the ratio of the builds' median
times against the first build (above 1: slower). Times, not busbw: busbw
is printed with two decimals, too coarse for small messages. Rows whose
ratio is above 1.03 in every round are marked: a slowdown seen each time,
not one noisy round.
"""
import os
import re
import statistics
import sys

# The time column of a nccl-tests row: out-of-place 5, in-place 9.
COL = 9 if os.environ.get("AB_PLACE") == "in" else 5


def main(log, names):
    rows, cur = {}, None
    for line in open(log):
        m = re.match(r"### round (\d+) (\S+): bench (.*)", line)
        if m:
            cur = (int(m.group(1)), m.group(3).strip(), m.group(2))
            continue
        if not line.startswith("[rank 0]") or cur is None:
            continue
        f = line[len("[rank 0]"):].split()
        if len(f) < 13 or not f[0].isdigit():  # nccl-tests row: size count type redop root time ...
            continue
        try:
            t = float(f[COL])
        except ValueError:  # n/a: the row failed or was refused; its reason is in the log
            continue
        rows.setdefault((cur[1], int(f[0])), {}).setdefault(cur[2], {})[cur[0]] = t
    base = names[0]
    print("op | algo | bytes | " + " | ".join(f"us {n} (rounds)" for n in names) + " | " +
          " | ".join(f"{n}/{base} time" for n in names[1:]))
    for (bench, size), v in sorted(rows.items()):
        op = re.search(r"--ops (\S+)", bench)
        algo = re.search(r"--algo (\S+)", bench)
        cells = [" ".join(f"{t:g}" for _, t in sorted(v.get(n, {}).items())) or "-" for n in names]
        ratios = []
        a = v.get(base, {})
        for n in names[1:]:
            b = v.get(n, {})
            if not a or not b:
                ratios.append("-")
                continue
            r = statistics.median(b.values()) / statistics.median(a.values())
            every = all(b[k] > 1.03 * a[k] for k in b if k in a)
            ratios.append(f"{r:.3f}" + (" slower each round" if every and r > 1.03 else ""))
        print(f"{op.group(1) if op else bench} | {algo.group(1) if algo else '-'} | {size} | " +
              " | ".join(cells) + " | " + " | ".join(ratios))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or ["A", "B"])
