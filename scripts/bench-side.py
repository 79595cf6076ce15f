#!/usr/bin/env python3
"""bench-side.py [--ref ALGO] [--place out|in|both] FILE.json...: side-by-side
tables from `symmem bench -J` reports of one run with several --algo (one
file per dtype or graph mode): per file, op, dtype and placement, the time per call (us) of every path at
each size, then the reference path's time over the fastest other path's
(ref/best: below 1.00 the reference is faster) and over NCCL window's and
plain NCCL's. Standard library only."""
import argparse
import json
import sys


def rows(files):
    for f in files:
        with open(f) as fh:
            d = json.load(fh)
        for r in d["results"]:
            yield f, r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ref", default="ll")
    ap.add_argument("--place", default="out", choices=["out", "in", "both"])
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    places = {"out": ["out_of_place"], "in": ["in_place"], "both": ["out_of_place", "in_place"]}[a.place]
    tables = {}  # (file, op, type, place) -> {bytes: {algo: time}}
    for f, r in rows(a.files):
        for pl in places:
            m = r.get(pl)
            if not m or not m.get("time_us"):
                continue
            algo = r["algo"]
            key = (f, r["op"], r["type"], pl)
            cell = tables.setdefault(key, {}).setdefault(r["bytes"], {})
            cell[algo] = (m["time_us"], m.get("wrong", 0), m.get("path", ""))
    for (f, op, typ, pl), by in sorted(tables.items()):
        algos = sorted({al for c in by.values() for al in c}, key=lambda s: (s != a.ref, s))
        print(f"--- {f}: {op} {typ} {pl.replace('_', '-')} (us per call; {a.ref}/best = {a.ref} over the fastest other path)")
        hdr = f"{'bytes':>10} " + " ".join(f"{al:>11}" for al in algos) + f" {a.ref + '/best':>10} {a.ref + '/win':>8} {a.ref + '/nccl':>9}"
        print(hdr)
        for b in sorted(by):
            c = by[b]
            cols = []
            for al in algos:
                if al in c:
                    t, wrong, _ = c[al]
                    cols.append(f"{t:11.2f}" if not wrong else f"{'WRONG' + str(wrong):>11}")
                else:
                    cols.append(f"{'-':>11}")
            ref = c.get(a.ref)
            if ref and ref[1]:
                ref = None  # wrong results have no ratio
            others = [v[0] for al, v in c.items() if al not in (a.ref, "auto") and not v[1]]
            ratio = lambda x: f"{ref[0] / x:.2f}" if ref and x else "-"
            best = min(others) if others else None
            win = c.get("nccl-window", (None,))[0]
            nc = c.get("nccl", (None,))[0]
            print(f"{b:>10} " + " ".join(cols) + f" {ratio(best):>10} {ratio(win):>8} {ratio(nc):>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
