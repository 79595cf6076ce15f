"""PyTorch FSDP2 (fully_shard) with its all-gathers and reduce-scatters on
symmem: the training script is ordinary FSDP2 code plus one line,
symmem.fsdp.apply(model), after fully_shard (torch >= 2.11).

    torchrun --nproc-per-node 2 examples/python/fsdp2_symmem.py [--bf16] [--steps N] [--algo A]
    symmem launch -n 2 python3 examples/python/fsdp2_symmem.py

It trains a small residual MLP stack for a few SGD steps and checks every
rank's parameter shards against the same steps run unsharded on one rank's
full copy (same initial weights, every rank's batches, the mean of their
losses): FSDP averages the gradients over the ranks, so the updates must
match (float32: 1e-3 relative; --bf16, bfloat16 parameters and float32
reduction: 5e-2). Ranks may share one GPU with SYMMEM_SHARE_DEVICE=1
(torch.distributed then runs gloo, which FSDP here only uses to set up:
every all-gather and reduce-scatter is symmem's)."""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

import symmem
import symmem.fsdp


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(x)))


def make_model(dim, layers, seed):
    torch.manual_seed(seed)
    return nn.Sequential(*[Block(dim) for _ in range(layers)]).cuda()


def batch(step, rank, tokens, dim):
    g = torch.Generator(device="cuda").manual_seed(1000 * step + rank)
    return (torch.randn(tokens, dim, device="cuda", generator=g),
            torch.randn(tokens, dim, device="cuda", generator=g))


def probe():
    """Counts symmem.fsdp's collective calls by op and current stream (FSDP
    calls them on its own all-gather / reduce-scatter streams)."""
    from symmem import _ops
    seen = {}
    for name in ("all_gather_into_tensor", "reduce_scatter_tensor"):
        def wrap(*a, _f=getattr(_ops, name), _name=name, **kw):
            s = seen.setdefault(_name, {})
            h = torch.cuda.current_stream().cuda_stream
            s[h] = s.get(h, 0) + 1
            return _f(*a, **kw)
        setattr(_ops, name, wrap)
    return seen


def algo_arg(s):
    """--algo as symmem.fsdp.apply takes it: a name for both collectives,
    or a dict from "all_gather=ce,reduce_scatter=kernel"."""
    if s is None or "=" not in s:
        return s
    out = {}
    for part in s.split(","):
        k, sep, v = part.partition("=")
        if not sep or not k or not v:
            raise SystemExit(f"--algo {s!r}: want a path name, or op=path pairs joined by commas "
                             f"(all_gather=ce,reduce_scatter=kernel)")
        out[k.strip()] = v.strip()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--bf16", action="store_true", help="bfloat16 parameters, float32 gradient reduction")
    ap.add_argument("--algo", default=None,
                    help="a symmem path instead of auto's choice, for both collectives (kernel), or per "
                         "collective: all_gather=ce,reduce_scatter=kernel (one left out stays auto)")
    ap.add_argument("--probe", action="store_true", help="count symmem's calls and the streams they ran on")
    args = ap.parse_args()

    shared = os.environ.get("SYMMEM_SHARE_DEVICE") == "1"
    torch.cuda.set_device(0 if shared else int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("gloo" if shared else "nccl")  # NCCL refuses two ranks on one GPU
    rank, n = dist.get_rank(), dist.get_world_size()

    model = make_model(args.dim, args.layers, seed=1234)
    ref = make_model(args.dim, args.layers, seed=1234)  # the unsharded reference, same weights
    start = [p.detach().clone() for p in ref.parameters()]
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if args.bf16 \
        else MixedPrecisionPolicy()
    for layer in model:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)

    count = symmem.fsdp.apply(model, algo=algo_arg(args.algo))  # <- the one line: FSDP's collectives on symmem
    seen = probe() if args.probe else None

    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(args.steps):
        x, y = batch(step, rank, args.tokens, args.dim)
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        # The reference: every rank's batch, the mean of their losses.
        ref_loss = sum(torch.nn.functional.mse_loss(ref(a), b) for a, b in
                       (batch(step, r, args.tokens, args.dim) for r in range(n))) / n
        ref_loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
    torch.cuda.synchronize()

    # This rank's shard of each parameter (dim-0 chunk) against the same
    # chunk of the reference: the updates must agree.
    num = den = 0.0
    for p, r, p0 in zip(model.parameters(), ref.parameters(), start):
        local = p.to_local().float()
        if local.numel() == 0:
            continue
        want, before = torch.chunk(r.detach(), n)[rank], torch.chunk(p0, n)[rank]
        num = max(num, float((local - want).abs().max()))
        den = max(den, float((want - before).abs().max()))
    err = num / max(den, 1e-30)
    tol = 5e-2 if args.bf16 else 1e-3
    path = symmem.world().group.last_path()
    if seen is not None:
        default = torch.cuda.default_stream().cuda_stream
        for op, streams in sorted(seen.items()):
            print(f"rank {rank}: {op}: {sum(streams.values())} calls on {len(streams)} stream(s), "
                  f"{streams.get(default, 0)} on the default stream", flush=True)
    print(f"rank {rank}/{n}: {count} FSDP modules on symmem, {args.steps} steps of {args.layers} layers "
          f"({'bf16/fp32' if args.bf16 else 'fp32'}), last path {path}; update rel err vs unsharded {err:.2e} "
          f"(tol {tol:.0e}) {'ok' if err <= tol else 'FAILED'}", flush=True)
    del model, opt
    dist.destroy_process_group()
    symmem.close()
    if err > tol:
        raise SystemExit(f"rank {rank}: error {err} too large")


if __name__ == "__main__":
    main()
