"""An FSDP-style stack of layers on symmem: each rank keeps a flat shard of
every layer's weight in symmetric memory; before a layer runs, its full
weight is all-gathered into a symmetric buffer on a communication stream,
while the previous layer's GEMM runs on the compute stream (the all-gather
of layer i+1 overlaps the GEMM of layer i; events order the two).

    symmem launch -n 2 python3 examples/python/fsdp_layer.py
    torchrun --nproc-per-node 2 examples/python/fsdp_layer.py   (with torchrun support in symmem.init)

Ranks may share one GPU with SYMMEM_SHARE_DEVICE=1."""

import os

import torch

import symmem


def main():
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(0 if os.environ.get("SYMMEM_SHARE_DEVICE") == "1" else local)
    w = symmem.init()
    n, me = w.size, w.rank
    layers, dim, tokens = 4, 2048, 256
    g = torch.Generator(device="cuda").manual_seed(4321)
    full = [torch.randn(dim, dim, device="cuda", dtype=torch.bfloat16, generator=g) / dim ** 0.5 for _ in range(layers)]
    x = torch.randn(tokens, dim, device="cuda", dtype=torch.bfloat16, generator=g)
    per = dim * dim // n

    # Shards and two gather buffers (double buffering), all symmetric.
    with symmem.use_symmetric_memory():
        shards = [torch.empty(per, device="cuda", dtype=torch.bfloat16) for _ in range(layers)]
        gathered = [torch.empty(dim * dim, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
    for s, f in zip(shards, full):
        s.copy_(f.reshape(-1)[me * per:(me + 1) * per])

    compute, comm = torch.cuda.current_stream(), torch.cuda.Stream()
    ready = [torch.cuda.Event() for _ in range(layers)]
    free = [torch.cuda.Event() for _ in range(2)]
    paths = []

    def gather(i):
        with torch.cuda.stream(comm):
            if i >= 2:
                comm.wait_event(free[i % 2])  # layer i-2 finished with this buffer
            paths.append(symmem.all_gather_into_tensor(gathered[i % 2], shards[i]))
            ready[i].record(comm)

    torch.cuda.synchronize()
    gather(0)
    h = x
    for i in range(layers):
        if i + 1 < layers:
            gather(i + 1)  # overlaps this layer's GEMM
        compute.wait_event(ready[i])
        h = torch.relu(h @ gathered[i % 2].view(dim, dim))
        free[i % 2].record(compute)
    torch.cuda.synchronize()

    ref = x.float()
    for f in full:
        ref = torch.relu(ref @ f.float())
    err = float((h.float() - ref).abs().max() / ref.abs().max())
    print(f"rank {me}/{n}: {layers} layers of {dim}x{dim}, weights all-gathered on a side stream via "
          f"{sorted({str(p) for p in paths})}; max rel err vs unsharded {err:.4f}")
    del shards, gathered
    w.close()
    if err > 5e-2:
        raise SystemExit(f"rank {me}: error {err} too large")


if __name__ == "__main__":
    main()
