"""Host cost of a Python collective call against the layers under it, in
one process (run by scripts/python-cost.sh under `symmem launch -n 1`, CPU
backend, 1024 float32 in pool memory, out of place: the 1-rank in-place
one-shot plan is refused by package plan today):

  ctypes floor   lib.symmem_abi_version(): a ctypes call into an exported Go function
  C ABI          lib.symmem_all_reduce(...) with the arguments prepared once
  Python API     symmem.all_reduce(buf, output=out) on memoryviews of pool memory

Prints one line per row: name, microseconds per call (best of 5 runs)."""

import sys
import time

import symmem
from symmem import _lib

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000


def best(f):
    for _ in range(N // 10):
        f()
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(N):
            f()
        runs.append((time.perf_counter() - t0) / N * 1e6)
    return min(runs)


def main():
    w = symmem.init(backend="cpu")
    buf = symmem.empty_buffer(1024, "float32")
    out = symmem.empty_buffer(1024, "float32")
    lib, g = _lib.lib, w.group.handle
    a, o = symmem._ops.describe(buf, True)[0], symmem._ops.describe(out, True)[0]

    def abi():
        if lib.symmem_all_reduce(g, a, o, 1024, 7, 0, None, None) < 0:
            raise _lib.error(-9)
    rows = [
        ("ctypes floor (symmem_abi_version)", lambda: lib.symmem_abi_version()),
        ("C ABI symmem_all_reduce (ctypes, args ready)", abi),
        ("symmem.all_reduce(memoryview in pool)", lambda: symmem.all_reduce(buf, output=out)),
        ("symmem.all_reduce(memoryview, algo='direct')", lambda: symmem.all_reduce(buf, output=out, algo="direct")),
    ]
    for name, f in rows:
        print(f"{name:48s} {best(f):8.3f} us", flush=True)
    w.close()


if __name__ == "__main__":
    main()
