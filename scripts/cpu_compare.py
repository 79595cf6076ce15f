#!/usr/bin/env python3
"""CPU collectives: Open MPI (mpi4py, shared memory) vs symmem's CPU backend.

Two modes, both driven by scripts/cpu-compare.sh:

  mpirun -np 2 python3 cpu_compare.py mpi --min 1M --max 256M --out mpi.jsonl
      all-reduce (sum) and all-gather busbw of MPI_FLOAT buffers, one JSON
      line per (op, size) written by rank 0.
  python3 cpu_compare.py table --mpi mpi.jsonl --symmem f32.json bf16.json ...
      one table: symmem busbw per dtype next to MPI float32 busbw, and ratios.

MPI has no bfloat16/float16 type: the 16-bit symmem rows are compared with
MPI float32 at the same number of bytes (the same memory traffic), which
the table says in its header.

Conventions (as nccl-tests and `symmem bench`): size is the bytes of the full
tensor (all-gather: the output); algbw = size / time; busbw = algbw *
2(n-1)/n for all-reduce and algbw * (n-1)/n for all-gather; time is the
slowest rank's average per call.
"""
import argparse
import json
import sys
import time


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper().rstrip("B")
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def sizes(lo, hi, factor):
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def run_mpi(args):
    from mpi4py import MPI  # only the mpi mode needs it

    comm = MPI.COMM_WORLD
    n, rank = comm.Get_size(), comm.Get_rank()
    out = open(args.out, "w") if rank == 0 and args.out != "-" else sys.stdout
    for op in ("all_reduce", "all_gather"):
        for size in sizes(parse_size(args.min), parse_size(args.max), args.factor):
            if size % (4 * n):
                continue
            if op == "all_reduce":
                send, recv = bytearray(size), bytearray(size)
                call = lambda: comm.Allreduce([send, MPI.FLOAT], [recv, MPI.FLOAT], op=MPI.SUM)
                factor = 2 * (n - 1) / n
            else:
                send, recv = bytearray(size // n), bytearray(size)
                call = lambda: comm.Allgather([send, MPI.FLOAT], [recv, MPI.FLOAT])
                factor = (n - 1) / n
            for _ in range(args.warmup):
                call()
            # Iterations: as many as fit in the budget, judged from one call.
            comm.Barrier()
            t0 = MPI.Wtime()
            call()
            one = comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)
            iters = max(args.min_iters, min(args.max_iters, int(args.budget / max(one, 1e-9))))
            comm.Barrier()
            t0 = MPI.Wtime()
            for _ in range(iters):
                call()
            dt = comm.allreduce((MPI.Wtime() - t0) / iters, op=MPI.MAX)
            if rank == 0:
                algbw = size / dt / 1e9
                row = {"op": op, "bytes": size, "type": "float32", "time_us": dt * 1e6,
                       "algbw": algbw, "busbw": algbw * factor, "iters": iters, "ranks": n,
                       "mpi": MPI.Get_library_version().splitlines()[0]}
                print(json.dumps(row), file=out, flush=True)


# A row whose timed calls took less than this in all is flagged: a few
# calls, where one slow one (a futex sleep, a page fault) decides the
# average, too little to trust.
MIN_TIMED_S = 0.05


def too_short(m):
    return m.get("iters", 0) * m.get("time_us", 0) / 1e6 < MIN_TIMED_S


def load_symmem(path):
    """Rows of one `symmem bench -json` file: {(op, bytes): busbw}, dtype,
    the rows timed too briefly (too_short).

    The only place that knows symmem's JSON shape (bench.Report): results[]
    with op, bytes, type and out_of_place.busbw and .iters (in-place when
    absent).
    """
    with open(path) as f:
        rep = json.load(f)
    rows, short = {}, []
    for r in rep["results"]:
        m = r.get("out_of_place") or r.get("in_place")
        if m and not m.get("refused"):
            rows[(r["op"], int(r["bytes"]))] = float(m["busbw"])
            if too_short(m):
                short.append(f"{r['op']} {int(r['bytes']) >> 20}M: {m.get('iters')} calls")
    return rows, rep.get("dtype", "?"), short


def table(args):
    mpi, few = {}, []
    with open(args.mpi) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                mpi[(r["op"], int(r["bytes"]))] = float(r["busbw"])
                if too_short(r):
                    few.append(f"MPI {r['op']} {int(r['bytes']) >> 20}M: {r.get('iters')} calls")
    loaded = [load_symmem(p) for p in args.symmem]
    runs = [(rows, dt) for rows, dt, _ in loaded]
    for _, dt, brief in loaded:
        few += [f"symmem {dt} {w}" for w in brief]
    short = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}
    dts = [short.get(dt, dt) for _, dt in runs]
    f32 = next((rows for rows, dt in runs if dt == "float32"), None)
    print("# busbw GB/s, 2 ranks on one host; MPI = Open MPI float32 (no 16-bit types in MPI:")
    print("# 16-bit symmem rows are compared with MPI float32 of the same bytes);")
    print("# xMPI = symmem / MPI; bf16/f32, f16/f32 = symmem busbw of that dtype / symmem float32")
    print("# (goal >= 1/1.3 = 0.77: 16-bit all-reduce within 1.3x of float32's time per byte)")
    head = f"{'op':<11}{'size':>6}{'MPI':>8}" + "".join(f"{d:>10}{'xMPI':>7}" for d in dts)
    if f32:
        head += "".join(f"{d + '/f32':>10}" for d in dts if d != "f32")
    print(head)
    worst = {}
    for op in ("all_reduce", "all_gather"):
        for size in sorted({b for (o, b) in mpi if o == op}):
            m = mpi[(op, size)]
            line = f"{op:<11}{size >> 20:>5}M{m:>8.2f}"
            for rows, dt in runs:
                v = rows.get((op, size))
                if v is None:
                    line += f"{'-':>10}{'-':>7}"
                    continue
                line += f"{v:>10.2f}{v / m:>6.1f}x"
                worst[(op, dt)] = min(worst.get((op, dt), 1e9), v / m)
            if f32:
                for rows, dt in runs:
                    if dt != "float32":
                        v, b = rows.get((op, size)), f32.get((op, size))
                        line += f"{v / b:>10.2f}" if v and b else f"{'-':>10}"
            print(line)
    print("# smallest symmem/MPI ratio per op and dtype (goal: >= 5x at every size >= 1 MiB):")
    for (op, dt), r in sorted(worst.items()):
        print(f"#   {op:<11} {dt:<9} {r:.1f}x")
    if few:
        print(f"# WARNING: rows whose timed calls took under {MIN_TIMED_S} s in all (too little to trust):")
        for w in few:
            print(f"#   {w}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    m = sub.add_parser("mpi", help="measure Open MPI (run under mpirun)")
    m.add_argument("--min", default="1M")
    m.add_argument("--max", default="256M")
    m.add_argument("--factor", type=int, default=2)
    m.add_argument("--warmup", type=int, default=3)
    m.add_argument("--budget", type=float, default=0.5, help="seconds of timed calls per size")
    m.add_argument("--min-iters", type=int, default=3)
    m.add_argument("--max-iters", type=int, default=1000)
    m.add_argument("--out", default="-", help="JSON lines file (rank 0), - for stdout")
    t = sub.add_parser("table", help="print the comparison table")
    t.add_argument("--mpi", required=True)
    t.add_argument("--symmem", nargs="+", required=True, help="symmem bench -json files")
    args = p.parse_args()
    if args.mode == "mpi":
        run_mpi(args)
    else:
        table(args)


if __name__ == "__main__":
    main()
