"""The package's Python work per collective on the torch path, without torch
or a GPU, beside a vLLM-style pynccl wrapper's, in one process.

Tensors are python/tests/faketorch.py's (reads are C-level callables, like
torch's but cheaper: torch's reads check for __torch_function__ overrides),
the group a cuda group in name only, and every library call a no-op Python
function (symmem's _collective; the wrapper's ncclAllReduce). So a row is
the Python work around the library call with the floor of a tensor read,
not what torch or the library cost: those come from
`python/tests/gpu_torch.py cost` on the GPU host (scripts/gpu-python.sh).

Rows are timed interleaved: each round times a batch of every row in turn,
so all rows see the same machine load; "best" is a row's fastest round,
"median" its middle one, in microseconds per call.

    PYTHONPATH=python python3 python/bench/torch_path.py [calls per round]

With SYMMEM_BENCH_GENERAL=1 the package rows skip the torch path (the
general path every other argument type takes), for a before/after in one
tree.
"""

import os
import sys
import time
import types

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_here, os.path.join(_here, "..", "tests")]
import faketorch  # noqa: E402
from hostcost import interleaved  # noqa: E402

torch = faketorch.install()

import symmem  # noqa: E402
from symmem import _core, _ops  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
BATCH, ROUNDS, COUNT, SIZE = 200, 7, 1024, 2


def main():
    g = _core.Group.__new__(_core.Group)
    g.world = types.SimpleNamespace(backend="cuda")
    g.handle, g.name, g.ranks, g.rank, g.size, g.cuda, g.is_member = 1, "fake", [0, 1], 0, SIZE, True, True
    g.device = 0
    _core._default_group = g  # as init() sets it
    _core._world = types.SimpleNamespace(handle=1, group=g)  # where a package before the torch path looked
    _ops._collective = lambda *args: 4  # a no-op library call (4: the kernel path's code)
    t, o = torch.Tensor(0x10000, COUNT, torch.float32), torch.Tensor(0x20000, COUNT, torch.float32)
    big, part = torch.Tensor(0x30000, COUNT * SIZE, torch.float32), torch.Tensor(0x40000, COUNT, torch.float32)
    if os.environ.get("SYMMEM_BENCH_GENERAL") == "1":
        _ops.describe(t, False)  # load torch (the fake) as the first tensor does
        _ops._T = None  # no tensor is "a plain torch.Tensor": every call takes the general path
    raw = torch._C._cuda_getCurrentRawStream
    nccl_all_reduce = lambda *args: 0  # noqa: E731 - the wrapper's ctypes call, a no-op
    comm, nccl_dt = 0x99, {torch.float32: 7, torch.bfloat16: 9, torch.float16: 6}

    def pynccl_all_reduce(t_in, t_out):  # the shape of vLLM's PyNcclCommunicator.all_reduce
        r = nccl_all_reduce(t_in.data_ptr(), t_out.data_ptr(), t_in.numel(), nccl_dt[t_in.dtype], 0, comm,
                            raw(t_in.get_device()))
        if r != 0:
            raise RuntimeError(f"NCCL error {r}")

    rows = [
        ("symmem.all_reduce(t, output=o)", lambda: symmem.all_reduce(t, output=o)),
        ("symmem.all_reduce(t, output=o, group=g)", lambda: symmem.all_reduce(t, output=o, group=g)),
        ("symmem.all_reduce(t) in place", lambda: symmem.all_reduce(t)),
        ("symmem.all_gather_into_tensor(big, part)", lambda: symmem.all_gather_into_tensor(big, part)),
        ("symmem.reduce_scatter_tensor(part, big)", lambda: symmem.reduce_scatter_tensor(part, big)),
        ("symmem.broadcast(t, 1)", lambda: symmem.broadcast(t, 1)),
        ("vLLM-style pynccl all_reduce(t, o)", lambda: pynccl_all_reduce(t, o)),
        ("floor: a no-op Python call with 6 arguments", lambda: nccl_all_reduce(1, 2, 3, 4, 5, 6)),
    ]
    res = interleaved(rows, N, BATCH, ROUNDS)
    path = "torch path" if getattr(_ops, "_T", None) is not None else "general path only"
    print(f"COST Python work per call, fake tensors, library calls no-ops ({path}); Python {sys.version.split()[0]}; "
          f"best and median of {ROUNDS} interleaved rounds of {N} calls (batches of {BATCH})")
    for name, best, med in res:
        print(f"COST {name:48s} {best:8.3f} {med:8.3f}")


if __name__ == "__main__":
    main()
