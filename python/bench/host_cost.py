"""Host cost of a Python collective call, layer by layer, in one process
(run by scripts/python-cost.sh under `symmem launch -n 1`; CPU backend,
1024 float32 in pool memory, out of place: the 1-rank in-place one-shot
plan is refused by package plan today). The layers under it are measured
beside it by the same script: the Go call (BenchmarkGoAllReduce), the ABI's
Go side (BenchmarkABIAllReduce), the exported function called from C
(cmd/libsymmem/testdata/abi_cost.c).

Rows, each "COST <name> <best> <median>" in microseconds per call over 7
rounds (timed in batches of 200 calls, as the C and Go benchmarks are, and
interleaved: each round times a batch of every row in turn, hostcost.py):

  ctypes floor        lib.symmem_abi_version(): a ctypes call into an exported Go function
  ctypes all_reduce   lib.symmem_all_reduce(...), the NCCL-shaped export, arguments ready
  ctypes collective   symmem_collective(...) with six c_void_p argtypes, arguments
                      ready (the package's binding before ABI version 3)
  builtin             symmem_collective through the package's binding (a
                      builtin function made from symmem_py_collective), args ready
  package             symmem.all_reduce(buf, output=out) on memoryviews of pool memory
  Python work         the same with the library call replaced by a no-op,
                      and one of its buffer descriptions
  diag                Python work and the ctypes call back to back; 3 us of
                      spin alone and before the ctypes call (does host time
                      between calls make the call dearer?)
"""

import ctypes
import functools
import os
import sys
import time

import symmem
from symmem import _lib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostcost import interleaved, noop_copy  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
BATCH, ROUNDS = 200, 7


def spin(ns=3000):
    """Busy host time between calls, with little memory traffic."""
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def main():
    w = symmem.init(backend="cpu")
    buf = symmem.empty_buffer(1024, "float32")
    out = symmem.empty_buffer(1024, "float32")
    lib, g = _lib.lib, w.group.handle
    ops = symmem._ops
    a, o = ops.describe(buf, True)[0], ops.describe(out, True)[0]
    six = lib.symmem_collective
    six.restype, six.argtypes = ctypes.c_int, [ctypes.c_void_p] * 6
    coll = _lib.collective
    call = 2 | 7 << 8  # all-reduce, float32, sum, auto
    noop_ar = noop_copy(ops, "all_reduce")
    if noop_ar(buf, output=out) is not None:
        raise SystemExit("the no-op copy of all_reduce called the library")
    # functools.partial: the rows time the ctypes call, not a Python wrapper
    # around it; each status is checked before the timing and after it.
    checked = [
        ("ctypes floor: symmem_abi_version()", lib.symmem_abi_version, lambda r: r == _lib.ABI_VERSION),
        ("ctypes symmem_all_reduce(8 args), args ready",
         functools.partial(lib.symmem_all_reduce, g, a, o, 1024, 7, 0, None, None), lambda r: r >= 0),
        ("ctypes symmem_collective(6 args), args ready", functools.partial(six, g, call, a, o, 1024, None),
         lambda r: r >= 0),
        ("builtin symmem_collective (the package's), args ready", functools.partial(coll, g, call, a, o, 1024, 0),
         lambda r: r >= 0),
        ("symmem.all_reduce(memoryview, output=)", lambda: symmem.all_reduce(buf, output=out), lambda r: r.algo),
        ("symmem.all_reduce(..., algo='direct')", lambda: symmem.all_reduce(buf, output=out, algo="direct"),
         lambda r: r.algo),
    ]
    for name, f, ok in checked:
        if not ok(f()):
            raise SystemExit(f"{name}: failed: {_lib.lib.symmem_last_error().decode()}")
    coll_ready = checked[3][1]  # the package's call
    rows = [(name, f) for name, f, _ in checked] + [
        ("symmem.all_reduce Python work (library call a no-op)", lambda: noop_ar(buf, output=out)),
        ("of it: describe one memoryview (_ops.describe)", functools.partial(ops.describe, buf, True)),
        ("diag: Python work, then the builtin call", lambda: (noop_ar(buf, output=out), coll_ready())),
        ("diag: 3 us spin alone", spin),
        ("diag: 3 us spin, then the builtin call", lambda: (spin(), coll_ready())),
    ]
    res = interleaved(rows, N, BATCH, ROUNDS)
    for name, f, ok in checked:
        if not ok(f()):
            raise SystemExit(f"{name}: failed after timing: {_lib.lib.symmem_last_error().decode()}")
    print(f"COST host us/call from Python {sys.version.split()[0]}: cpu backend, 1024 float32 out of place, "
          f"world of 1, best and median of {ROUNDS} interleaved rounds of {N} calls (batches of {BATCH})", flush=True)
    for name, best, med in res:
        print(f"COST {name:52s} {best:8.3f} {med:8.3f}", flush=True)
    print(f"COST path {w.group.last_path()}")
    w.close()


if __name__ == "__main__":
    main()
