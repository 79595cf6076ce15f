"""End-to-end tensor-parallel decode step: a Llama-shaped stack of blocks in
tensor parallel (column-parallel q/k/v and gate/up, row-parallel o and down,
one all-reduce after each row-parallel linear: two per block), one decode
step for a batch of B tokens, captured in a CUDA graph and replayed, under
torchrun. Issue 26 item 3; the seed's claim is +4.7% end to end.

    torchrun --standalone --nproc-per-node 2 bench/e2e/tp_decode.py
    torchrun --standalone --nproc-per-node 4 bench/e2e/tp_decode.py --batches 1,8,64

The all-reduce, per --modes (all in one run, alternated per batch size):

  nccl            torch.distributed.all_reduce (NCCL) on an ordinary tensor
  torch-one-shot  torch symmetric memory: torch.ops.symm_mem.one_shot_all_reduce
  torch-two-shot  torch symmetric memory: torch.ops.symm_mem.two_shot_all_reduce_
  symmem          symmem.all_reduce on a symmem tensor (auto; --symmem-algo forces a path)
  symmem:PATH     the same with PATH forced (symmem:ll, symmem:nccl-window, symmem:kernel,
                  symmem:two-shot, ...): several paths side by side in one run
  none            no all-reduce: the ceiling, not a competitor (the step's compute alone;
                  its outputs are wrong and not compared). A mode's time minus none's is
                  what its all-reduces cost the step.

The row-parallel matmuls write straight into the collective's buffer
(torch.mm(out=...)), so no mode pays a copy the others do not. Attention over
a KV cache is replaced by an elementwise mix of q, k and v: it moves no data
between ranks and changes no collective. Every mode gets the same weights
(seeded) and input; the final hidden state of each mode is compared with
NCCL's (bf16 sums in another order differ in the last bits; the check
bounds the relative difference).

Rank 0 prints one JSON line per batch size: time per decode step (median of
--rounds, each the mean over --iters graph replays, slowest rank), per mode,
the ratio of symmem to the best other mode, and the difference check.
Multicast stays off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1:
scripts/gpu-lib.sh sets them).

First runs: results/gpu-2026-11-26d.md (2 and 4 H100, --layers 4).
"""

import argparse
import json
import os
import statistics

import torch
import torch.distributed as dist
import torch.nn.functional as F


def rms(x, eps=1e-5):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype)


class Weights:
    """One rank's shards of L blocks, the same under every mode."""

    def __init__(self, dim, hidden, layers, tp, rank, device, seed):
        g = torch.Generator(device=device).manual_seed(seed + rank)
        mk = lambda rows, cols: (torch.randn(rows, cols, device=device, generator=g) / cols ** 0.5).to(torch.bfloat16)
        self.blocks = [dict(qkv=mk(3 * dim // tp, dim), o=mk(dim, dim // tp),
                            gate_up=mk(2 * hidden // tp, dim), down=mk(dim, hidden // tp)) for _ in range(layers)]


def decode_step(x, w, bufs, allreduce):
    """x: [B, dim] bf16 hidden state; bufs: two [B, dim] tensors the
    all-reduce works on; allreduce(buf) returns the reduced tensor."""
    for blk in w.blocks:
        q, k, v = (rms(x) @ blk["qkv"].t()).chunk(3, dim=-1)
        a = q * torch.sigmoid(k) * v
        torch.mm(a, blk["o"].t(), out=bufs[0])
        x = x + allreduce(bufs[0])
        g, u = (rms(x) @ blk["gate_up"].t()).chunk(2, dim=-1)
        torch.mm(F.silu(g) * u, blk["down"].t(), out=bufs[1])
        x = x + allreduce(bufs[1])
    return x


def make_mode(mode, b, dim, device, group_name, algo):
    """The mode's two buffers and its all-reduce."""
    shape = (b, dim)
    if mode == "none":  # the ceiling: no all-reduce at all (wrong outputs, the step's compute alone)
        return [torch.empty(shape, dtype=torch.bfloat16, device=device) for _ in range(2)], lambda t: t
    if mode == "nccl":
        bufs = [torch.empty(shape, dtype=torch.bfloat16, device=device) for _ in range(2)]

        def ar(t):
            dist.all_reduce(t)
            return t
        return bufs, ar
    if mode in ("torch-one-shot", "torch-two-shot"):
        import torch.distributed._symmetric_memory as symm_mem
        bufs = [symm_mem.empty(*shape, dtype=torch.bfloat16, device=device) for _ in range(2)]
        for t in bufs:
            symm_mem.rendezvous(t, group_name)
        if mode == "torch-one-shot":
            return bufs, lambda t: torch.ops.symm_mem.one_shot_all_reduce(t, "sum", group_name)

        def ar2(t):
            torch.ops.symm_mem.two_shot_all_reduce_(t, "sum", group_name)
            return t
        return bufs, ar2
    if mode == "symmem" or mode.startswith("symmem:"):
        import symmem
        if mode != "symmem":
            algo = mode.split(":", 1)[1]
        bufs = [symmem.empty(shape, torch.bfloat16) for _ in range(2)]

        def ar3(t):
            symmem.all_reduce(t, algo=algo)
            return t
        return bufs, ar3
    raise SystemExit(f"tp_decode: unknown mode {mode!r}")


def time_graph(x0, w, bufs, ar, iters, rounds):
    """Captures one decode step and returns (per-step us per round, output)."""
    static_x = x0.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up outside the capture, as torch asks
        for _ in range(3):
            decode_step(static_x, w, bufs, ar)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = decode_step(static_x, w, bufs, ar)
    times = []
    for _ in range(rounds):
        dist.barrier()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / iters)
    graph.replay()
    torch.cuda.synchronize()
    result = out.clone()
    del graph
    return times, result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dim", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=14336)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--batches", default="1,2,4,8,16,32,64")
    ap.add_argument("--modes", default="nccl,torch-one-shot,torch-two-shot,symmem")
    ap.add_argument("--symmem-algo", default=None, help="a symmem path instead of auto's choice")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=device)
    rank, tp = dist.get_rank(), dist.get_world_size()
    for what, v in (("dim", args.dim), ("hidden", args.hidden)):
        if v % tp:
            raise SystemExit(f"tp_decode: --{what} {v} is not a multiple of the {tp} ranks")
    group_name = dist.group.WORLD.group_name
    modes = args.modes.split(",")
    has_symmem = any(m == "symmem" or m.startswith("symmem:") for m in modes)
    if has_symmem:
        import symmem
        symmem.init()
    w = Weights(args.dim, args.hidden, args.layers, tp, rank, device, args.seed)

    for b in (int(x) for x in args.batches.split(",")):
        g = torch.Generator(device=device).manual_seed(args.seed + 7 * b)
        x0 = torch.randn(b, args.dim, device=device, generator=g).to(torch.bfloat16)
        res, outs, paths, refused = {}, {}, {}, {}
        for mode in modes:
            bufs, ar = make_mode(mode, b, args.dim, device, group_name, args.symmem_algo)
            try:
                times, outs[mode] = time_graph(x0, w, bufs, ar, args.iters, args.rounds)
            except Exception as e:  # a forced symmem path refusing this size: the same on every rank
                if not (mode.startswith("symmem:") and type(e).__name__ == "NotSupportedError"):
                    raise
                refused[mode] = str(e)
                torch.cuda.synchronize()
                del bufs
                continue
            t = torch.tensor(times, device=device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the job's step is its slowest rank's
            res[mode] = statistics.median(t.tolist())
            if mode == "symmem" or mode.startswith("symmem:"):
                import symmem
                paths[mode] = repr(symmem.world().group.last_path())
            del bufs
        ref = outs.get("nccl")
        diff = {m: float(((o.float() - ref.float()).norm() / ref.float().norm()).item())
                for m, o in outs.items() if m != "none"} if ref is not None else {}
        if rank == 0:
            # symmem's modes against the best of the others (NCCL, torch's).
            others = [v for m, v in res.items() if not m.startswith("symmem") and m != "none"]
            vs = {m: min(others) / v for m, v in res.items() if m.startswith("symmem") and others}
            print(json.dumps({
                "bench": "tp_decode", "world": tp, "batch": b, "dim": args.dim, "hidden": args.hidden,
                "layers": args.layers, "allreduce_bytes": b * args.dim * 2, "us_per_step": res,
                "symmem_vs_best_other": vs.get("symmem"), "vs_best_other": vs,
                "rel_diff_vs_nccl": diff, "symmem_path": paths.get("symmem"), "paths": paths, "refused": refused,
                "iters": args.iters, "rounds": args.rounds,
                "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                "gpu": torch.cuda.get_device_name(device),
            }), flush=True)
    dist.destroy_process_group()
    if has_symmem:
        import symmem
        symmem.close()


if __name__ == "__main__":
    main()
