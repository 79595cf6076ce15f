"""What ctypes charges per argument: a no-op C function (built here with cc)
called through ctypes with the argument types of the C ABI's collectives.
Prints one row per signature, microseconds per call (best of 7 x 200000).

    python3 python/bench/ctypes_args.py"""

import ctypes
import os
import struct
import subprocess
import sys
import tempfile
import timeit

STUB = r"""
#include <stddef.h>
#include <stdint.h>
int none(void) { return 0; }
int nccl_shaped(uint64_t g, const void* in, void* out, size_t n, int dtype, int op, void* s, const char* algo) { return 0; }
int six_pointers(void* g, void* call, const void* in, void* out, void* n, void* s) { return 0; }
int one_pointer(void* p) { return 0; }
int packed(const uint64_t* args) { return (int)(args[4] & 1); }
"""


def main():
    with tempfile.TemporaryDirectory() as d:
        src, so = os.path.join(d, "stub.c"), os.path.join(d, "libstub.so")
        with open(src, "w") as f:
            f.write(STUB)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", so, src], check=True)
        lib = ctypes.CDLL(so)
        vp, i32, u64, sz, cp = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_char_p
        a, b = 0x7F0000001000, 0x7F0000002000
        rows = [
            ("none()", "none", [], ()),
            ("one_pointer(c_void_p)", "one_pointer", [vp], (a,)),
            ("six_pointers(6 x c_void_p), symmem_collective's", "six_pointers", [vp] * 6, (1, 2 | 7 << 8, a, b, 1024, None)),
            ("nccl_shaped(u64, 2 ptr, size_t, 2 int, ptr, char*), symmem_all_reduce's", "nccl_shaped",
             [u64, vp, vp, sz, i32, i32, vp, cp], (1, a, b, 1024, 7, 0, None, None)),
            ("nccl_shaped with every integer as c_void_p but the ints", "nccl_shaped",
             [vp, vp, vp, vp, i32, i32, vp, cp], (1, a, b, 1024, 7, 0, None, None)),
        ]
        print(f"ctypes call cost, Python {sys.version.split()[0]} (us per call, best of 7 x 200000)")
        n = 200000
        for name, fn, argtypes, args in rows:
            f = getattr(lib, fn)
            f.restype, f.argtypes = i32, argtypes
            t = min(timeit.repeat(lambda: f(*args), number=n, repeat=7)) / n * 1e6
            print(f"{name:75s} {t:6.3f}")
        # Evaluated for the package (results/python-cost-2026-11-24.md): no
        # argtypes, so ctypes passes a bytes object as a pointer to its data.
        p, pack = lib.packed, struct.Struct("=6Q").pack
        p.restype = i32
        six = (1, 2 | 7 << 8, a, b, 1024, 1)
        ready = pack(*six)
        for name, f in (("packed(bytes), no argtypes, bytes ready", lambda: p(ready)),
                        ("packed(struct pack(6 ints)), no argtypes", lambda: p(pack(*six)))):
            t = min(timeit.repeat(f, number=n, repeat=7)) / n * 1e6
            print(f"{name:75s} {t:6.3f}")

if __name__ == "__main__":
    main()
