import ctypes, functools, os, sys
sys.path[:0] = ["/work/wt13/python/bench", "/tmp/ext"]
from hostcost import interleaved
import symmem
from symmem import _lib, _ops
import fastcall, fastcall_gil
w = symmem.init(backend="cpu")
buf, out = symmem.empty_buffer(1024, "float32"), symmem.empty_buffer(1024, "float32")
a, o = _ops.describe(buf, True)[0], _ops.describe(out, True)[0]
g = w.group.handle
call = 2 | 7 << 8
pyd = ctypes.PyDLL(_lib.path)
six_gil = pyd.symmem_collective
six_gil.restype, six_gil.argtypes = ctypes.c_int, [ctypes.c_void_p] * 6
six = ctypes.CDLL(_lib.path).symmem_collective
six.restype, six.argtypes = ctypes.c_int, [ctypes.c_void_p] * 6
pk = _lib.pack(g, call, a, o, 1024, 1)
pk_gil = pyd.symmem_collective_packed; pk_gil.restype = ctypes.c_int
rows = [("ctypes CDLL 6 args", functools.partial(six, g, call, a, o, 1024, 1)),
        ("ctypes PyDLL 6 args (GIL held)", functools.partial(six_gil, g, call, a, o, 1024, 1)),
        ("ctypes CDLL packed ready", functools.partial(_lib.collective, pk)),
        ("ctypes PyDLL packed ready (GIL held)", functools.partial(pk_gil, pk)),
        ("ext FASTCALL GIL released", functools.partial(fastcall.collective, g, call, a, o, 1024, 1)),
        ("ext FASTCALL GIL held", functools.partial(fastcall_gil.collective, g, call, a, o, 1024, 1)),
        ("ctypes floor", _lib.lib.symmem_abi_version)]
for name, best, med in interleaved(rows, 20000):
    print(f"COST {name:45s} {best:8.3f} {med:8.3f}")
w.close()
