import ctypes, functools, os, sys
sys.path[:0] = ["/work/wt13/python/bench", "/tmp/ext"]
from hostcost import interleaved
import symmem
from symmem import _lib, _ops
import fastcall
w = symmem.init(backend="cpu")
buf, out = symmem.empty_buffer(1024, "float32"), symmem.empty_buffer(1024, "float32")
a, o = _ops.describe(buf, True)[0], _ops.describe(out, True)[0]
g = w.group.handle
six = _lib.lib.symmem_collective
six.restype, six.argtypes = ctypes.c_int, [ctypes.c_void_p] * 6
call = 2 | 7 << 8
coll, pack = _lib.collective, _lib.pack
fc = fastcall.collective
assert fc(g, call, a, o, 1024, 1) >= 0
rows = [("ctypes floor", _lib.lib.symmem_abi_version),
        ("ctypes 6 c_void_p args ready (partial)", functools.partial(six, g, call, a, o, 1024, 1)),
        ("ctypes 6 c_void_p (lambda)", lambda: six(g, call, a, o, 1024, 1)),
        ("ctypes packed(pack(...)) (lambda)", lambda: coll(pack(g, call, a, o, 1024, 1))),
        ("extension FASTCALL 6 ints (partial)", functools.partial(fc, g, call, a, o, 1024, 1)),
        ("extension FASTCALL 6 ints (lambda)", lambda: fc(g, call, a, o, 1024, 1)),
        ]
for name, best, med in interleaved(rows, int(sys.argv[1]) if len(sys.argv) > 1 else 20000):
    print(f"COST {name:45s} {best:8.3f} {med:8.3f}")
w.close()
