"""End-to-end FSDP2 training step: a Llama-shaped transformer with random
weights and random tokens (no downloads), fully_shard per block, under
torchrun; its all-gathers and reduce-scatters on NCCL (torch.distributed,
--comm nccl) or on symmem (symmem.fsdp.apply, --comm symmem). Issue 26
item 2; the seed's claim is +15% tokens/s.

    torchrun --standalone --nproc-per-node 2 bench/e2e/fsdp_train.py --comm nccl
    torchrun --standalone --nproc-per-node 2 bench/e2e/fsdp_train.py --comm symmem
    torchrun --standalone --nproc-per-node 2 bench/e2e/fsdp_train.py --comm local

--comm local is the ceiling, not a competitor: FSDP's collectives replaced by
copies on the rank itself (the all-gather repeats this rank's shard in every
slot, the reduce-scatter keeps this rank's chunk), so the step has FSDP's
compute and memory traffic and no communication between GPUs. Its time is
what no collective library can beat: NCCL's step minus it is all a faster
comm could save (its losses are not the model's: the weights differ).

Rank 0 prints one JSON line last: the configuration, the median step time
and tokens/s over the timed steps, and every step's loss (the same seed
gives the same weights and batches under both --comm values: all-gathers
copy, so the losses are bit-equal until the reduce-scatters' summation
order differs; scripts/gpu-e2e.sh compares them).

The model: token embedding, L blocks of (RMSNorm, causal self-attention
through scaled_dot_product_attention with q/k/v/o projections, RMSNorm,
SwiGLU MLP), a final RMSNorm and an output projection; bfloat16 compute
(MixedPrecisionPolicy: bf16 parameters, float32 gradient reduction), AdamW.
No rotary embedding: it moves no data between ranks and changes no
collective. The default size (dim 4096, 16 blocks: ~3.5B parameters, seq
4096, batch 1 per rank) fills 2 and 4 H100s; --preset small checks the
script in seconds.

Runs: results/gpu-2026-11-26c.md, gpu-2026-11-26d.md, gpu-2026-11-26f.md
(--comm local not run yet).
"""

import argparse
import json
import math
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

PRESETS = {
    "default": dict(dim=4096, layers=16, heads=32, vocab=32000, seq=4096, batch=1),
    "small": dict(dim=512, layers=4, heads=8, vocab=4096, seq=512, batch=2),
}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps).to(x.dtype) * self.weight


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        hidden = 256 * math.ceil(int(8 * dim / 3) / 256)  # Llama's SwiGLU width
        self.attn_norm, self.mlp_norm = RMSNorm(dim), RMSNorm(dim)
        self.qkv, self.o = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.gate_up, self.down = nn.Linear(dim, 2 * hidden, bias=False), nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, d))
        g, u = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)


class Model(nn.Module):
    def __init__(self, dim, layers, heads, vocab):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm, self.out = RMSNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for blk in self.blocks:
            x = blk(x)
        return self.out(self.norm(x))


def batch(step, rank, cfg, device):
    """Random tokens, the same for a (step, rank) under every --comm."""
    g = torch.Generator(device=device).manual_seed(100003 * step + rank)
    t = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"] + 1), device=device, generator=g)
    return t[:, :-1], t[:, 1:]


def apply_local(model):
    """--comm local: every FSDP module's all-gather and reduce-scatter
    replaced by copies on this rank (FSDP2's custom collectives, as
    symmem.fsdp sets them). Returns how many modules it set."""
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.fsdp._fully_shard._fsdp_api import AllGather, ReduceScatter

    class Done:
        def wait(self, timeout=None):
            return True

        def is_completed(self):
            return True

    class LocalAllGather(AllGather):
        def allocate(self, size, *, dtype, device):
            return torch.empty(size, dtype=dtype, device=device)

        def __call__(self, output_tensor, input_tensor, group, async_op=False):
            n = output_tensor.numel() // input_tensor.numel()
            output_tensor.view(n, -1).copy_(input_tensor.reshape(1, -1).expand(n, -1))
            return Done() if async_op else None

    class LocalReduceScatter(ReduceScatter):
        def allocate(self, size, *, dtype, device):
            return torch.empty(size, dtype=dtype, device=device)

        def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
            n = input_tensor.numel() // output_tensor.numel()
            output_tensor.view(-1).copy_(input_tensor.view(n, -1)[dist.get_rank(group)])
            return Done() if async_op else None

    mods = [m for m in model.modules() if isinstance(m, FSDPModule)]
    for m in mods:
        m.set_custom_all_gather(LocalAllGather())
        m.set_custom_reduce_scatter(LocalReduceScatter())
    return len(mods)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--comm", choices=["nccl", "symmem", "local"], required=True,
                    help="local: no communication between GPUs, the ceiling (see the module doc)")
    ap.add_argument("--algo", default=None,
                    help="symmem: a path instead of auto's choice, for both collectives (PATH) or one "
                         "(all_gather=PATH, reduce_scatter=PATH, comma-separated)")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="default")
    for k in PRESETS["default"]:
        ap.add_argument("--" + k, type=int, default=None)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    cfg = dict(PRESETS[args.preset])
    cfg.update({k: getattr(args, k) for k in cfg if getattr(args, k) is not None})

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=device)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(args.seed)
    model = Model(cfg["dim"], cfg["layers"], cfg["heads"], cfg["vocab"]).to(device)
    params = sum(p.numel() for p in model.parameters())
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for blk in model.blocks:
        fully_shard(blk, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    modules = 0
    if args.comm == "symmem":
        import symmem.fsdp
        algo = args.algo
        if algo and "=" in algo:  # per collective: all_gather=ce
            algo = dict(kv.split("=", 1) for kv in algo.split(","))
        modules = symmem.fsdp.apply(model, algo=algo)
    elif args.comm == "local":
        modules = apply_local(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    losses, times = [], []
    tokens = cfg["batch"] * cfg["seq"] * world
    for step in range(args.warmup + args.steps):
        x, y = batch(step, rank, cfg, device)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, cfg["vocab"]), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        l = loss.detach().clone()
        dist.all_reduce(l)  # the mean loss over the ranks (outside the timed step)
        losses.append(float(l) / world)
        if step >= args.warmup:
            times.append(dt)

    # The step time of the job is the slowest rank's.
    t = torch.tensor(times, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    times = t.tolist()
    med = statistics.median(times)
    if rank == 0:
        print(json.dumps({
            "bench": "fsdp_train", "comm": args.comm, "algo": args.algo or "auto", "world": world,
            "config": cfg, "params": params, "custom_modules": modules,
            "step_ms_median": med * 1e3, "step_ms": [x * 1e3 for x in times], "tokens_per_s": tokens / med,
            "losses": losses, "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "gpu": torch.cuda.get_device_name(device),
        }), flush=True)
    del model, opt
    dist.destroy_process_group()
    if args.comm == "symmem":
        import symmem
        symmem.close()


if __name__ == "__main__":
    main()
