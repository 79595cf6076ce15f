#!/usr/bin/env python3
"""CPU collectives: Open MPI (mpi4py, shared memory) vs symmem's CPU backend.

Three modes, all driven by scripts/cpu-compare.sh:

  mpirun -np 2 python3 cpu_compare.py mpi --min 1M --max 256M --out mpi.jsonl
      all-reduce (sum) and all-gather busbw of MPI_FLOAT buffers, one JSON
      line per (op, size) written by rank 0.
  python3 cpu_compare.py table --mpi mpi.jsonl --symmem f32.json bf16.json ...
      one table: symmem busbw per dtype next to MPI float32 busbw, and ratios.
  python3 cpu_compare.py local [--base base-bench.txt] bench.txt
      the executor variants of BenchmarkLocal (internal/backend/shm, 2 ranks
      in one process) side by side: time per call of every plan and variant,
      and before (one-core executor, one-shot up to 64 KiB) / after (the
      crew, one-shot up to 1 MiB out of place) for the sizes of the goals;
      with --base, the crew variant of another build's run next to this
      one's.
  python3 cpu_compare.py crew crew-bench.txt
      BenchmarkCrew (internal/backend/shm): one stage on the caller alone
      against the crew, us per stage, and the allocations per stage.

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


def parse_go_bench(path):
    """{(op, plan, size, variant): ns per call} from `go test -bench Local`
    lines such as BenchmarkLocal/all_reduce/two-shot/1M/crew-16 N T ns/op.
    With -count > 1 the fastest run is kept."""
    out = {}
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) < 4 or not fields[0].startswith("BenchmarkLocal/") or fields[3] != "ns/op":
                continue
            parts = fields[0].split("/")[1:]
            parts[-1] = parts[-1].rsplit("-", 1)[0]  # the -GOMAXPROCS suffix
            if len(parts) == 3:  # all_gather/<size>/<variant>: one plan
                parts.insert(1, "-")
            op, plan, size, variant = parts
            key = (op, plan, parse_size(size), variant)
            out[key] = min(out.get(key, float("inf")), float(fields[2]))
    return out


def parse_barrier(path):
    """{variant: ns per call} of BenchmarkLocalBarrier (fastest run)."""
    out = {}
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 4 and fields[0].startswith("BenchmarkLocalBarrier/") and fields[3] == "ns/op":
                v = fields[0].split("/")[1].rsplit("-", 1)[0]
                out[v] = min(out.get(v, float("inf")), float(fields[2]))
    return out


def old_plan(op, size):
    """The plan the CPU backend chose before issue 16 (2 ranks)."""
    if op == "all_gather":
        return "-"
    return "one-shot" if size <= 64 << 10 else "two-shot"


def new_plan(op, size):
    """The plan it chooses now (2 ranks; internal/backend/shm oneShot)."""
    if op == "all_gather":
        return "-"
    limit = 64 << 10 if op.endswith("-inplace") else 1 << 20
    return "one-shot" if size <= limit else "two-shot"


def local(args):
    t = parse_go_bench(args.bench)
    if not t:
        sys.exit(f"{args.bench}: no BenchmarkLocal lines")
    variants = [v for v in ("one-core", "sleep", "crew") if any(k[3] == v for k in t)]
    print("# BenchmarkLocal: 2 ranks in one process, float32; us per call (fastest of -count runs)")
    print("# variants: one-core = the executor before issue 16; sleep = pieces shared with helpers that")
    print("# sleep between stages; crew = pieces shared with helpers that poll (the default)")
    print(f"{'op':<20}{'plan':<10}{'size':>6}" + "".join(f"{v:>10}" for v in variants))
    for op, plan, size in sorted({k[:3] for k in t}):
        row = f"{op:<20}{plan:<10}{size >> 10:>5}K"
        for v in variants:
            ns = t.get((op, plan, size, v))
            row += f"{ns / 1e3:>10.1f}" if ns else f"{'-':>10}"
        print(row)
    print("# before (one-core, old plan choice) vs after (crew, new plan choice); busbw GB/s (2 ranks)")
    print(f"{'op':<20}{'size':>6}{'before':>9}{'after':>9}{'speedup':>9}")
    for op, size in sorted({(k[0], k[2]) for k in t}):
        b = t.get((op, old_plan(op, size), size, "one-core"))
        a = t.get((op, new_plan(op, size), size, "crew"))
        if not b or not a:
            continue
        factor = 0.5 if op == "all_gather" else 1.0  # busbw = algbw * (n-1)/n or 2(n-1)/n
        bw = lambda ns: size / ns * factor  # bytes/ns = GB/s
        print(f"{op:<20}{size >> 10:>5}K{bw(b):>9.2f}{bw(a):>9.2f}{b / a:>8.2f}x")
    if args.base:
        tb = parse_go_bench(args.base)
        print(f"# crew variant, base build ({args.base}) vs this build; us per call (fastest run)")
        print(f"{'op':<20}{'plan':<10}{'size':>6}{'base':>10}{'this':>10}{'speedup':>9}")
        for op, plan, size in sorted({k[:3] for k in t}):
            b, a = tb.get((op, plan, size, "crew")), t.get((op, plan, size, "crew"))
            if b and a:
                print(f"{op:<20}{plan:<10}{size >> 10:>5}K{b / 1e3:>10.1f}{a / 1e3:>10.1f}{b / a:>8.2f}x")
        bb = parse_barrier(args.base)
        if bb:
            print("# base build's BenchmarkLocalBarrier, us per call")
            print("  " + "  ".join(f"{v} {ns / 1e3:.2f}" for v, ns in sorted(bb.items(), key=lambda kv: int(kv[0][5:-2]))))
    bar = parse_barrier(args.bench)
    if bar:
        print("# BenchmarkLocalBarrier: two signal rounds (one tiny all-gather), us per call, by how long waits poll")
        print("  " + "  ".join(f"{v} {ns / 1e3:.2f}" for v, ns in sorted(bar.items(), key=lambda kv: int(kv[0][5:-2]))))


def crew(args):
    """BenchmarkCrew lines: BenchmarkCrew/<kind>/<size>/<variant>-P N ns ns/op ... B/op allocs/op."""
    t, allocs = {}, {}
    with open(args.bench) as f:
        for line in f:
            fields = line.split()
            if len(fields) < 4 or not fields[0].startswith("BenchmarkCrew/") or fields[3] != "ns/op":
                continue
            kind, size, variant = fields[0].split("/")[1:]
            variant = variant.rsplit("-", 1)[0]
            key = (kind, size, variant)
            t.setdefault(key, []).append(float(fields[2]))
            if "allocs/op" in fields:
                allocs[key] = fields[fields.index("allocs/op") - 1]
    if not t:
        sys.exit(f"{args.bench}: no BenchmarkCrew lines")
    crews = sorted({k[2] for k in t if k[2] != "inline"})
    print("# BenchmarkCrew: one stage, us per stage (fastest / median of the runs); inline = the caller alone")
    print(f"{'stage':<16}{'inline':>16}" + "".join(f"{c:>16}{'speedup':>9}{'allocs':>7}" for c in crews))
    for kind, size in sorted({k[:2] for k in t}, key=lambda k: (k[0], parse_size(k[1]))):
        i = t.get((kind, size, "inline"))
        if not i:
            continue
        cell = lambda v: f"{min(v) / 1e3:.2f} / {sorted(v)[len(v) // 2] / 1e3:.2f}"
        row = f"{kind + '/' + size:<16}{cell(i):>16}"
        for c in crews:
            v = t.get((kind, size, c))
            row += f"{cell(v):>16}{min(i) / min(v):>8.2f}x{allocs.get((kind, size, c), '-'):>7}" if v else f"{'-':>32}"
        print(row)


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
    lb = sub.add_parser("local", help="tabulate BenchmarkLocal (go test -bench Local output)")
    lb.add_argument("--base", help="BenchmarkLocal output of another build, for its crew column")
    lb.add_argument("bench")
    cb = sub.add_parser("crew", help="tabulate BenchmarkCrew (go test -bench Crew output)")
    cb.add_argument("bench")
    args = p.parse_args()
    if args.mode == "mpi":
        run_mpi(args)
    elif args.mode == "local":
        local(args)
    elif args.mode == "crew":
        crew(args)
    else:
        table(args)


if __name__ == "__main__":
    main()
