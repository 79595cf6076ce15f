"""ab-table.py LOG NAME...: the A/B table of gpu-ab.sh's log.

Per benchmark row (op, algorithm, bytes, from the `# <op>, algo <algo>`
section each bench prints, so one bench of several ops or algorithms gives
a row for each): rank 0's out-of-place time per call (in-place with
AB_PLACE=in) of every round for each build, and the ratio of the builds'
median times against the first build (above 1: slower). Times, not busbw: busbw
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
    rows, cur, section = {}, None, None
    for line in open(log):
        m = re.match(r"### round (\d+) (\S+): bench (.*)", line)
        if m:
            cur, section = (int(m.group(1)), m.group(3).strip(), m.group(2)), None
            continue
        if not line.startswith("[rank 0]") or cur is None:
            continue
        body = line[len("[rank 0]"):]
        m = re.match(r"\s*# (\w+), algo (\S+)\s*$", body)
        if m:
            section = (m.group(1), m.group(2))
            continue
        f = body.split()
        # nccl-tests row: size count type redop root, then time algbw busbw
        # #wrong out of place and again in place (absent with --inplace no)
        if len(f) < COL + 4 or not f[0].isdigit():
            continue
        try:
            t = float(f[COL])
        except ValueError:  # n/a: the row failed or was refused; its reason is in the log
            continue
        if section is None:  # no section line: the bench's own flags name it
            op, algo = re.search(r"--ops (\S+)", cur[1]), re.search(r"--algo (\S+)", cur[1])
            section = (op.group(1) if op else cur[1], algo.group(1) if algo else "-")
        graph = " -G" if re.search(r"(^|\s)(-G|--cudagraph)[ =]?[1-9]", cur[1]) else ""
        rows.setdefault((section[0] + graph, section[1], int(f[0])), {}).setdefault(cur[2], {})[cur[0]] = t
    base = names[0]
    print("op | algo | bytes | " + " | ".join(f"us {n} (rounds)" for n in names) + " | " +
          " | ".join(f"{n}/{base} time" for n in names[1:]))
    for (op, algo, size), v in sorted(rows.items()):
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
        print(f"{op} | {algo} | {size} | " +
              " | ".join(cells) + " | " + " | ".join(ratios))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or ["A", "B"])
