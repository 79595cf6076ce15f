"""The package's torch path end to end on the CPU backend, for a before/after
of one tree against another on a machine without torch or a GPU:
python/tests/faketorch.py tensors over real pool memory of a world of one,
the world group marked cuda so calls take the torch path (the CPU backend
ignores the stream), the real library call. Rows interleaved (the tree's
python/bench/hostcost.py), microseconds per call, best and median of 7
rounds.

    TREE=/path/to/tree; SYMMEM_LIBRARY=$TREE/.build/libsymmem.so PYTHONPATH=$TREE/python \\
      $TREE/.build/symmem launch -n 1 --no-prefix python3 torch_path_cpu.py $TREE [calls per round]
"""

import ctypes
import functools
import os
import sys

tree = sys.argv[1]
sys.path[:0] = [os.path.join(tree, "python", "bench"), os.path.join(tree, "python", "tests")]
import faketorch  # noqa: E402
from hostcost import interleaved, noop_copy  # noqa: E402

torch = faketorch.install()
import symmem  # noqa: E402
from symmem import _lib, _ops  # noqa: E402

N = int(sys.argv[2]) if len(sys.argv) > 2 else 20000


def main():
    w = symmem.init(backend="cpu")
    buf, out = symmem.empty_buffer(1024, "float32"), symmem.empty_buffer(1024, "float32")
    a, o = _ops.describe(buf, True)[0], _ops.describe(out, True)[0]
    g = w.group
    g.cuda, g.device = True, 0  # take the torch path; the CPU backend ignores the stream
    t, to = torch.Tensor(a, 1024, torch.float32), torch.Tensor(o, 1024, torch.float32)
    if symmem.all_reduce(t, output=to).algo != "direct":
        raise SystemExit("the call did not run")
    if _ops._T is not torch.Tensor:
        raise SystemExit("the torch path is not taken")
    six = _lib.lib.symmem_collective
    six.restype, six.argtypes = ctypes.c_int, [ctypes.c_void_p] * 6
    call = 2 | 7 << 8
    noop = noop_copy(_ops, "all_reduce")
    rows = [("package symmem.all_reduce(t, output=o), torch path", lambda: symmem.all_reduce(t, output=to)),
            ("package Python work (library call a no-op)", lambda: noop(t, output=to)),
            ("ctypes symmem_collective(6 args), args ready", functools.partial(six, g.handle, call, a, o, 1024, 1)),
            ("ctypes floor: symmem_abi_version()", _lib.lib.symmem_abi_version)]
    if _lib.ABI_VERSION >= 3:
        rows.append(("builtin symmem_collective (the package's), args ready",
                     functools.partial(_lib.collective, g.handle, call, a, o, 1024, 1)))
    res = interleaved(rows, N)
    print(f"tree {tree}, ABI {_lib.ABI_VERSION}, Python {sys.version.split()[0]}; {N} calls per round")
    for name, best, med in res:
        print(f"COST {name:52s} {best:8.3f} {med:8.3f}")
    w.close()


if __name__ == "__main__":
    main()
