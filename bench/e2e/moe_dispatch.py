"""MoE dispatch and combine: the all-to-alls of an expert-parallel layer.
T tokens of H bf16 per rank, each routed to its top-K of E experts (random
routing from --seed), the experts split evenly over the ranks. Dispatch
sends one row per (token, expert) pair to the expert's rank, rows sorted by
expert (Megatron's all-to-all dispatcher); combine sends them back (the
reverse all-to-all). No expert compute: the benchmark times the
communication, and combine must return dispatch's input bit for bit.

    symmem launch -n 2 --share-device python3 bench/e2e/moe_dispatch.py --smoke
    torchrun --standalone --nproc-per-node 2 bench/e2e/moe_dispatch.py

Variants (--variants, all by default; a variant that cannot run says why):

  nccl            torch.distributed.all_to_all_single on NCCL: the token
                  counts exchanged first (an all-to-all of size int64),
                  read to the host, then the tokens; one GPU per rank
                  (skipped where ranks share a GPU: NCCL refuses that)
  symmem:ALGO     symmem.all_to_all_single on symmetric tensors, the same
                  steps (host split sizes), ALGO forced (auto: none forced),
                  for each of --algos
  symmem-dev:ALGO symmem.all_to_all_vdev: the counts stay on the GPU (no
                  host sync), so a step can be captured in a CUDA graph
  torch-vdev      torch.ops.symm_mem.all_to_all_vdev on torch's NVSHMEM
                  backend (skipped when the op or NVSHMEM is missing, or
                  ranks share a GPU)

Eager: a step (dispatch + combine) per iteration, timed with CUDA events;
graph: the step captured once and replayed (device-splits variants only).
Times: the median over --rounds of the mean per step over --iters, the
slowest rank's. Each variant's outputs (dispatch's received rows, combine's
rows) are compared bit for bit with NCCL's where NCCL ran, else with a
reference every rank builds alone (it regenerates every rank's tokens and
routing from the seed). Rank 0 prints a table (variant, eager ms, graph ms,
eager time / NCCL's, or / the first symmem variant's without NCCL, the
check) and a JSON line. The routing logic (route, plan, expected_rows) needs
no torch: python/tests/test_moe_dispatch.py tests it.
"""

import argparse
import json
import os
import random
import statistics


def experts_per_rank(experts, ranks):
    if experts % ranks:
        raise ValueError(f"moe_dispatch: {experts} experts do not split evenly over {ranks} ranks")
    return experts // ranks


def route(seed, rank, tokens, experts, topk):
    """Each token's topk distinct experts on rank: the same on every rank
    for (seed, rank), so ranks rebuild each other's routing."""
    if not 0 < topk <= experts:
        raise ValueError(f"moe_dispatch: top-{topk} of {experts} experts")
    rng = random.Random(seed * 1000003 + rank)
    return [rng.sample(range(experts), topk) for _ in range(tokens)]


def plan(routing, experts, ranks):
    """Dispatch order of one rank's routing: rows (the token of each row
    sent, sorted by expert, tokens in order within an expert: so grouped by
    owning rank) and send (rows to each rank)."""
    per = experts_per_rank(experts, ranks)
    pairs = sorted((e, t) for t, es in enumerate(routing) for e in es)
    send = [0] * ranks
    for e, _ in pairs:
        send[e // per] += 1
    return [t for _, t in pairs], send


def recv_counts(plans, rank):
    """Rows rank receives from each rank."""
    return [send[rank] for _, send in plans]


def expected_rows(plans, rank):
    """(source rank, token) of each row dispatch delivers to rank: source
    i's block for rank, in rank order, each in i's send order."""
    out = []
    for i, (rows, send) in enumerate(plans):
        start = sum(send[:rank])
        out += [(i, t) for t in rows[start:start + send[rank]]]
    return out


def capacity(plans):
    """The most rows any rank receives: the size of the symmetric receive
    buffers, which must be the same on every rank."""
    return max(sum(recv_counts(plans, r)) for r in range(len(plans)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=7168)
    ap.add_argument("--experts", type=int, default=256)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--algos", default="auto,ce,kernel,nccl", help="symmem paths, comma-separated (auto: none forced)")
    ap.add_argument("--variants", default="nccl,symmem,symmem-dev,torch-vdev")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--smoke", action="store_true", help="256 tokens x 512, 3 iterations, 1 round: seconds")
    args = ap.parse_args()
    if args.smoke:
        args.tokens, args.hidden, args.iters, args.rounds = 256, 512, 3, 1

    import torch
    import torch.distributed as dist

    import symmem

    # Ranks share a GPU under `symmem launch --share-device` (MPS): no NCCL
    # there, so torch.distributed runs on gloo alone (timings, barriers).
    shared = os.environ.get("SYMMEM_SHARE_DEVICE") == "1"
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(0 if shared else local)
    dist.init_process_group("gloo" if shared else "cpu:gloo,cuda:nccl")
    me, n = dist.get_rank(), dist.get_world_size()
    symmem.init(backend="cuda")
    T, H, K, E = args.tokens, args.hidden, args.topk, args.experts
    bf16, i64 = torch.bfloat16, torch.int64

    plans = [plan(route(args.seed, r, T, E, K), E, n) for r in range(n)]
    send, recv = plans[me][1], recv_counts(plans, me)
    rows, cap = T * K, capacity(plans)

    def tokens(r):
        g = torch.Generator(device="cuda").manual_seed(args.seed * 7919 + r)
        return torch.randn(T, H, generator=g, device="cuda").to(bf16)

    inp = tokens(me)[torch.tensor(plans[me][0], device="cuda")]  # dispatch's input: my rows in send order
    # The reference: the rows dispatch delivers here, from every rank's tokens.
    got = expected_rows(plans, me)
    ref_d = torch.cat([tokens(i)[torch.tensor([t for s, t in got if s == i], dtype=torch.long, device="cuda")]
                       for i in range(n)])
    nrecv = sum(recv)

    def cpu_barrier():
        dist.all_reduce(torch.zeros(1))  # gloo on every setup; NCCL's barrier would want a GPU per rank

    def timed(fn):
        times = []
        for _ in range(args.rounds):
            cpu_barrier()
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(args.iters):
                fn()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b) / args.iters)
        t = torch.tensor(times)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # a step takes its slowest rank's time
        return statistics.median(t.tolist())

    def graph_of(fn):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm up on the capture stream, as torch asks
            fn()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            fn()
        return g

    class Skip(Exception):
        """A variant this setup cannot run, with the reason."""

    # Variants: build() returns (step, outputs, graphable); outputs() gives
    # (dispatch's received rows, combine's rows) after a step. Host-splits
    # variants exchange the counts first and read them on the host (a sync,
    # as in every host-splits dispatcher).
    def build_nccl():
        counts_in, counts_out = torch.tensor(send, dtype=i64, device="cuda"), torch.empty(n, dtype=i64, device="cuda")
        d_out, c_out = torch.empty(nrecv, H, dtype=bf16, device="cuda"), torch.empty(rows, H, dtype=bf16, device="cuda")

        def step():
            dist.all_to_all_single(counts_out, counts_in)
            r = counts_out.tolist()
            dist.all_to_all_single(d_out, inp, r, send)
            dist.all_to_all_single(c_out, d_out, send, r)
        return step, lambda: (d_out, c_out), False

    def build_symmem(algo):
        counts_in, counts_out = symmem.empty(n, i64), symmem.empty(n, i64)
        counts_in.copy_(torch.tensor(send, dtype=i64))
        src, d_out, c_out = symmem.empty((rows, H), bf16), symmem.empty((cap, H), bf16), symmem.empty((rows, H), bf16)
        src.copy_(inp)

        def a2a(out, x, osz=None, isz=None):
            symmem.all_to_all_single(out, x, osz, isz, algo=algo)

        def step():
            a2a(counts_out, counts_in)
            r = counts_out.tolist()
            a2a(d_out, src, r, send)
            a2a(c_out, d_out, send, r)
        return step, lambda: (d_out[:nrecv], c_out), False

    def build_symmem_dev(algo):
        src, d_out, c_out = symmem.empty((rows, H), bf16), symmem.empty((cap, H), bf16), symmem.empty((rows, H), bf16)
        src.copy_(inp)
        splits, so = symmem.empty(n, i64), symmem.empty(2 * n, i64)  # counts in elements
        c_splits, c_so = symmem.empty(n, i64), symmem.empty(2 * n, i64)
        splits.copy_(torch.tensor(send, dtype=i64) * H)

        def step():
            symmem.all_to_all_vdev(src, d_out, splits, so, algo=algo)
            c_splits.copy_(so[:n])  # what came from rank i goes back to it
            symmem.all_to_all_vdev(d_out, c_out, c_splits, c_so, algo=algo)
        return step, lambda: (d_out[:nrecv], c_out), True

    def build_torch_vdev():
        if shared:
            raise Skip("ranks share a GPU (torch's NVSHMEM backend wants one GPU per rank)")
        import torch.distributed._symmetric_memory as symm_mem
        if not hasattr(torch.ops.symm_mem, "all_to_all_vdev"):
            raise Skip(f"torch {torch.__version__} has no torch.ops.symm_mem.all_to_all_vdev")
        if not (hasattr(symm_mem, "is_nvshmem_available") and symm_mem.is_nvshmem_available()):
            raise Skip("torch's NVSHMEM backend is not available (libnvshmem_host.so.3)")
        # NVSHMEM's symmetric heap (1 GB by default, sized when it starts, at
        # the first allocation) must hold the three token buffers.
        need = (2 * rows + cap) * H * 2
        os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", str(need + need // 4 + (64 << 20)))
        symm_mem.set_backend("NVSHMEM")
        group = dist.group.WORLD.group_name

        def mk(*shape, dtype=bf16):
            t = symm_mem.empty(*shape, dtype=dtype, device="cuda")
            symm_mem.rendezvous(t, group)
            return t
        src, d_out, c_out = mk(rows * H), mk(cap * H), mk(rows * H)
        splits, so, c_splits, c_so = mk(n, dtype=i64), mk(2, n, dtype=i64), mk(n, dtype=i64), mk(2, n, dtype=i64)
        src.copy_(inp.reshape(-1))
        splits.copy_(torch.tensor(send, dtype=i64) * H)
        op = torch.ops.symm_mem.all_to_all_vdev

        def step():
            op(src, d_out, splits, so, group)
            c_splits.copy_(so[0])
            op(d_out, c_out, c_splits, c_so, group)
        return step, lambda: (d_out[:nrecv * H].view(nrecv, H), c_out.view(rows, H)), True

    wanted = args.variants.split(",")
    unknown = set(wanted) - {"nccl", "symmem", "symmem-dev", "torch-vdev"}
    if unknown:
        raise SystemExit(f"moe_dispatch: unknown variants {sorted(unknown)} (want nccl, symmem, symmem-dev, torch-vdev)")
    algos = args.algos.split(",")
    builders = []
    if "nccl" in wanted:
        builders.append(("nccl", build_nccl))
    for kind, b in (("symmem", build_symmem), ("symmem-dev", build_symmem_dev)):
        if kind in wanted:
            builders += [(f"{kind}:{a}", lambda a=a, b=b: b(None if a == "auto" else a)) for a in algos]
    if "torch-vdev" in wanted:
        builders.append(("torch-vdev", build_torch_vdev))

    def same(a, b):
        return a.shape == b.shape and torch.equal(a.view(torch.int16), b.view(torch.int16))

    def run(name, build, want):
        """One variant's row, and its checked outputs (clones: the variant's
        buffers go with this call)."""
        row = {"variant": name, "eager_ms": None, "graph_ms": None, "check": "-", "note": ""}
        if name == "nccl" and shared:
            row["note"] = "skipped: ranks share a GPU (NCCL needs one GPU per rank)"
            return row, None
        try:
            step, outputs, graphable = build()
            step()  # warm up, and the outputs to check
            torch.cuda.synchronize()
            if name.startswith("symmem"):
                symmem.world().synchronize()  # the kernel path reports GPU-side count checks here
        except Skip as e:
            row["note"] = f"skipped: {e}"
            return row, None
        except symmem.SymmemError as e:  # a path that does not serve this call: the same on every rank
            row["note"] = f"refused: {type(e).__name__}: {str(e)[:160]}"
            torch.cuda.synchronize()
            return row, None
        except RuntimeError as e:  # torch's NVSHMEM backend failing to start here: report it, run the rest
            if name != "torch-vdev":
                raise
            row["note"] = f"failed: {str(e)[:160]}"
            return row, None
        d, c = (t.clone() for t in outputs())
        ok = same(d, ref_d) and same(c, inp)
        if want is not None:
            ok = ok and same(d, want[0]) and same(c, want[1])
        if name.startswith("symmem"):
            row["note"] = f"path {symmem.world().group.last_path()!r}"
        row["eager_ms"] = timed(step)
        if graphable:
            try:
                g = graph_of(step)
                for t in outputs():
                    t.zero_()
                g.replay()
                torch.cuda.synchronize()
                gd, gc = outputs()
                ok = ok and same(gd, d) and same(gc, c)
                row["graph_ms"] = timed(g.replay)
            except Exception as e:  # noqa: BLE001 - a capture the path refuses: report it, time the rest
                row["note"] += f"; graph: {type(e).__name__}: {str(e)[:120]}"
                torch.cuda.synchronize()
        flag = torch.tensor([int(ok)])
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        row["check"] = "ok" if flag.item() else "mismatch"
        return row, (d, c) if flag.item() else None

    results, want = [], None
    for name, build in builders:
        row, outs = run(name, build, want)
        results.append(row)
        if name == "nccl" and outs is not None:
            want = outs  # the others are compared with NCCL's outputs too
        torch.cuda.synchronize()

    if me == 0:
        timed_rows = [r for r in results if r["eager_ms"] is not None]
        base = next((r for r in timed_rows if r["variant"] == "nccl"), timed_rows[0] if timed_rows else None)
        print(f"moe_dispatch: {n} ranks{' sharing a GPU' if shared else ''}, {T} tokens x {H} bf16, top-{K} of {E} "
              f"experts, {rows} rows sent per rank, {cap} received at most; dispatch + combine per step, "
              f"median of {args.rounds} rounds x {args.iters} iterations, slowest rank; "
              f"ratio: eager time / {base['variant'] if base else '-'}'s")
        print(f"{'variant':20s} {'eager ms':>9s} {'graph ms':>9s} {'ratio':>6s}  {'check':8s} note")
        for r in results:
            e = f"{r['eager_ms']:.3f}" if r["eager_ms"] is not None else "-"
            gr = f"{r['graph_ms']:.3f}" if r["graph_ms"] is not None else "-"
            ratio = f"{r['eager_ms'] / base['eager_ms']:.2f}" if r["eager_ms"] is not None else "-"
            print(f"{r['variant']:20s} {e:>9s} {gr:>9s} {ratio:>6s}  {r['check']:8s} {r['note']}")
        print(json.dumps({"bench": "moe_dispatch", "world": n, "shared_gpu": shared, "tokens": T, "hidden": H,
                          "experts": E, "topk": K, "rows": rows, "capacity": cap, "iters": args.iters,
                          "rounds": args.rounds, "results": results, "torch": torch.__version__,
                          "gpu": torch.cuda.get_device_name()}), flush=True)
    bad = any(r["check"] == "mismatch" for r in results)
    symmem.close()
    dist.destroy_process_group()
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
