"""Host cost of a Python collective call, layer by layer, in one process
(run by scripts/python-cost.sh under `symmem launch -n 1`; CPU backend,
1024 float32 in pool memory, out of place: the 1-rank in-place one-shot
plan is refused by package plan today). The layers under it are measured
beside it by the same script: the Go call (BenchmarkGoAllReduce), the ABI's
Go side (BenchmarkABIAllReduce), the exported function called from C
(cmd/libsymmem/testdata/abi_cost.c).

Rows, each "COST <name> <best> <median>" in microseconds per call over 7
rounds (timed in batches of 200 calls, as the C and Go benchmarks are):

  ctypes floor        lib.symmem_abi_version(): a ctypes call into an exported Go function
  ctypes all_reduce   lib.symmem_all_reduce(...), the NCCL-shaped export, arguments ready
  ctypes collective   symmem_collective(...), the package's binding, arguments ready
  package             symmem.all_reduce(buf, output=out) on memoryviews of pool memory
  Python work         the same with the library call replaced by a no-op,
                      and one of its buffer descriptions
"""

import functools
import sys
import time

import symmem
from symmem import _lib

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
BATCH, ROUNDS = 200, 7


def cost(f, drain=None):
    """Best and median microseconds per call of f() over ROUNDS rounds of N
    calls, timed in batches of BATCH with drain() untimed between them."""
    for _ in range(BATCH):
        f()
    batch = range(BATCH)
    rounds = []
    for _ in range(ROUNDS):
        total, done = 0.0, 0
        while done < N:
            t0 = time.perf_counter()
            for _ in batch:
                f()
            total += time.perf_counter() - t0
            done += BATCH
            if drain is not None:
                drain()
        rounds.append(total / done * 1e6)
    rounds.sort()
    return rounds[0], rounds[ROUNDS // 2]


def main():
    w = symmem.init(backend="cpu")
    buf = symmem.empty_buffer(1024, "float32")
    out = symmem.empty_buffer(1024, "float32")
    lib, g = _lib.lib, w.group.handle
    a, o = symmem._ops.describe(buf, True)[0], symmem._ops.describe(out, True)[0]
    # An older package (before symmem_collective) runs the other rows, for
    # before/after comparisons with this same script.
    coll = getattr(_lib, "collective", None)
    call = 2 | 7 << 8  # all-reduce, float32, sum, auto
    # functools.partial: the rows time the ctypes call, not a Python wrapper
    # around it; each is checked once before and after its timing.
    rows = [
        ("ctypes floor: symmem_abi_version()", lib.symmem_abi_version, lambda r: r == _lib.ABI_VERSION),
        ("ctypes symmem_all_reduce(8 args), args ready",
         functools.partial(lib.symmem_all_reduce, g, a, o, 1024, 7, 0, None, None), lambda r: r >= 0),
        ("ctypes symmem_collective(6 args), args ready",
         coll and functools.partial(coll, g, call, a, o, 1024, None), lambda r: r >= 0),
        ("symmem.all_reduce(memoryview, output=)", lambda: symmem.all_reduce(buf, output=out), lambda r: r.algo),
        ("symmem.all_reduce(..., algo='direct')", lambda: symmem.all_reduce(buf, output=out, algo="direct"),
         lambda r: r.algo),
    ]
    print(f"COST host us/call from Python {sys.version.split()[0]}: cpu backend, 1024 float32 out of place, "
          f"world of 1, best and median of {ROUNDS} rounds of {N} calls (batches of {BATCH})", flush=True)
    for name, f, ok in rows:
        if f is None:
            continue
        if not ok(f()):
            raise SystemExit(f"{name}: failed: {_lib.lib.symmem_last_error().decode()}")
        best, med = cost(f)
        if not ok(f()):
            raise SystemExit(f"{name}: failed after timing: {_lib.lib.symmem_last_error().decode()}")
        print(f"COST {name:52s} {best:8.3f} {med:8.3f}", flush=True)
    print(f"COST path {w.group.last_path()}")
    # The package's Python work alone: the library call replaced by a no-op
    # (an older package calls lib.symmem_all_reduce through its module).
    ops = symmem._ops
    if hasattr(ops, "_collective"):
        real, ops._collective = ops._collective, lambda *args: 0
    else:
        real, ops.lib = ops.lib, type("NoOp", (), {"symmem_all_reduce": staticmethod(lambda *args: 0)})
    best, med = cost(lambda: symmem.all_reduce(buf, output=out))
    print(f"COST {'symmem.all_reduce Python work (library call a no-op)':52s} {best:8.3f} {med:8.3f}", flush=True)
    best, med = cost(functools.partial(ops.describe, buf, True))
    print(f"COST {'of it: describe one memoryview (_ops.describe)':52s} {best:8.3f} {med:8.3f}", flush=True)
    if hasattr(ops, "_collective"):
        ops._collective = real
    else:
        ops.lib = real
    w.close()


if __name__ == "__main__":
    main()
