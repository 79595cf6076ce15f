"""An SGLang-style tensor-parallel layer on symmem: a row-parallel linear
layer whose partial output lives in symmetric memory and is all-reduced
there, so symmem takes its direct path (kernel, copy engines or NCCL
windows) instead of staging.

    symmem launch -n 2 python3 examples/python/tp_layer.py
    torchrun --nproc-per-node 2 examples/python/tp_layer.py   (with torchrun support in symmem.init)

Ranks may share one GPU with SYMMEM_SHARE_DEVICE=1."""

import os

import torch

import symmem


def main():
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(0 if os.environ.get("SYMMEM_SHARE_DEVICE") == "1" else local)
    w = symmem.init()
    n, me = w.size, w.rank
    tokens, hidden, inter = 64, 1024, 4096
    # Same seed everywhere: every rank can build the full layer for the check.
    g = torch.Generator(device="cuda").manual_seed(1234)
    x = torch.randn(tokens, inter, device="cuda", dtype=torch.bfloat16, generator=g)
    weight = torch.randn(inter, hidden, device="cuda", dtype=torch.bfloat16, generator=g) / inter ** 0.5
    shard = inter // n
    x_part, w_part = x[:, me * shard:(me + 1) * shard], weight[me * shard:(me + 1) * shard]

    # The output buffer comes from symmem's pool (a MemPool), as SGLang's
    # use_symmetric_memory(tp_group) does around its layers.
    with symmem.use_symmetric_memory():
        y = torch.empty(tokens, hidden, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        torch.matmul(x_part, w_part, out=y)
        path = symmem.all_reduce(y)  # on the current stream
    torch.cuda.synchronize()
    ref = (x.float() @ weight.float())
    err = float((y.float() - ref).abs().max() / ref.abs().max())
    print(f"rank {me}/{n}: row-parallel linear {tokens}x{inter} @ {inter}x{hidden}: all_reduce via {path} "
          f"({w.group.last_path().reason}); max rel err vs the full layer {err:.4f}")
    del y
    w.close()
    if err > 2e-2:
        raise SystemExit(f"rank {me}: error {err} too large")


if __name__ == "__main__":
    main()
