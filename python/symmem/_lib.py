"""ctypes bindings of libsymmem.so (the C ABI in include/symmem.h) and the
exceptions that carry its errors."""

import ctypes
import os

LIBRARY_ENV = "SYMMEM_LIBRARY"


class SymmemError(RuntimeError):
    """A symmem call failed; the message is symmem's, code its symmem_status."""

    code = -9

    def __init__(self, message, code=None):
        super().__init__(message)
        if code is not None:
            self.code = code


class InvalidArgumentError(SymmemError, ValueError):
    code = -1


class NotSupportedError(SymmemError):
    code = -2


class NotMemberError(SymmemError):
    code = -3


class MismatchError(SymmemError):
    """Ranks called a collective, group or scope operation with different arguments."""

    code = -4


class ClosedError(SymmemError):
    code = -5


class SymmemTimeoutError(SymmemError, TimeoutError):
    code = -6


class PeerError(SymmemError):
    """A peer rank exited, closed or failed."""

    code = -7


class BadHandleError(SymmemError):
    code = -8


class NoMemoryError(SymmemError, MemoryError):
    """The memory asked for does not fit in what is left (host memory on the cpu
    backend, free device memory on cuda): free some or ask for less."""

    code = -10


_BY_CODE = {c.code: c for c in (InvalidArgumentError, NotSupportedError, NotMemberError, MismatchError,
                                ClosedError, SymmemTimeoutError, PeerError, BadHandleError, NoMemoryError)}

_BUILD = "go build -buildmode=c-shared -o python/symmem/libsymmem.so ./cmd/libsymmem"


def _find():
    p = os.environ.get(LIBRARY_ENV)
    if p:
        return p
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.path.join(here, "libsymmem.so"),
                 os.path.join(here, "..", "..", ".build", "libsymmem.so")):
        if os.path.exists(cand):
            return os.path.abspath(cand)
    raise ImportError(f"symmem: libsymmem.so not found next to the package or in .build/: build it with "
                      f"`{_BUILD}` (in the repository root) or set {LIBRARY_ENV} to its path")


path = _find()
lib = ctypes.CDLL(path)
# The same library through PyDLL, whose calls keep the GIL: for
# symmem_sync_env, which reads the environment os.environ writes to.
_gil = ctypes.PyDLL(path)
_gil.symmem_sync_env.restype = None
_gil.symmem_sync_env.argtypes = []
sync_env = _gil.symmem_sync_env

u64, i32, i64, sz = ctypes.c_uint64, ctypes.c_int, ctypes.c_int64, ctypes.c_size_t
vp, cp = ctypes.c_void_p, ctypes.c_char_p
pu64 = ctypes.POINTER(u64)

_SIGS = {
    "symmem_last_error": (cp, []),
    "symmem_abi_version": (i32, []),
    "symmem_init": (i32, [cp, i64, i32, pu64]),
    "symmem_init_explicit": (i32, [i32, i32, i32, i32, cp, i32, cp, cp, cp, i64, i32, pu64]),
    "symmem_world_close": (i32, [u64]),
    "symmem_world_rank": (i32, [u64]),
    "symmem_world_size": (i32, [u64]),
    "symmem_world_backend": (i32, [u64, cp, sz]),
    "symmem_world_device": (i32, [u64, ctypes.POINTER(i32)]),
    "symmem_synchronize": (i32, [u64]),
    "symmem_world_group": (i32, [u64, pu64]),
    "symmem_group_new": (i32, [u64, cp, ctypes.POINTER(i32), i32, pu64]),
    "symmem_group_close": (i32, [u64]),
    "symmem_group_rank": (i32, [u64]),
    "symmem_group_size": (i32, [u64]),
    "symmem_scope_open": (i32, [u64, pu64]),
    "symmem_scope_end": (i32, [u64]),
    "symmem_alloc": (i32, [u64, sz, ctypes.POINTER(vp)]),
    "symmem_free": (i32, [u64, vp, vp]),
    "symmem_is_symmetric": (i32, [u64, vp, sz]),
    "symmem_all_gather": (i32, [u64, vp, vp, sz, i32, vp, cp]),
    "symmem_reduce_scatter": (i32, [u64, vp, vp, sz, i32, i32, vp, cp]),
    "symmem_all_reduce": (i32, [u64, vp, vp, sz, i32, i32, vp, cp]),
    "symmem_broadcast": (i32, [u64, vp, sz, i32, i32, vp, cp]),
    "symmem_all_to_all_v": (i32, [u64, vp, vp, sz, sz, ctypes.POINTER(i64), ctypes.POINTER(i64), i32, vp, cp]),
    "symmem_all_to_all_vdev": (i32, [u64, vp, vp, sz, sz, vp, vp, i32, vp, cp]),
    "symmem_group_last_path": (i32, [u64, cp, sz]),
    "symmem_explain": (i32, [u64, i32, sz, i32, cp, sz]),
    "symmem_doctor": (i32, [u64, cp, sz]),
    "symmem_py_bind": (i32, [ctypes.POINTER(vp), i32]),
}
for _name, (_res, _args) in _SIGS.items():
    _f = getattr(lib, _name)
    _f.restype, _f.argtypes = _res, _args


ABI_VERSION = 4
if lib.symmem_abi_version() != ABI_VERSION:
    raise ImportError(f"symmem: {path} has ABI version {lib.symmem_abi_version()}, this package needs "
                      f"{ABI_VERSION}: rebuild it with `{_BUILD}`")

# The collectives' hot path, symmem_collective(group, call, in, out, count,
# stream), as a builtin function rather than a ctypes function: a ctypes
# call converts each argument through argtypes (an object each) and
# prepares the call every time; a builtin made from the library's
# METH_FASTCALL function symmem_py_collective (cmd/libsymmem/pycall.c) takes
# the six ints as they are. Into the real library, CPU backend: 1.2 us a
# call with six c_void_p argtypes, 0.72 this way, 0.60 from C
# (results/python-cost-2026-11-24.md). The library reaches Python's C API
# through the addresses bound here (stable ABI functions, from
# ctypes.pythonapi), so it needs no Python headers or symbols.


class _MethodDef(ctypes.Structure):  # PyMethodDef
    _fields_ = [("ml_name", cp), ("ml_meth", vp), ("ml_flags", i32), ("ml_doc", cp)]


_METH_FASTCALL = 0x80


def _builtin():
    api = ctypes.pythonapi
    fns = [ctypes.cast(getattr(api, n), vp).value for n in (
        "PyLong_AsUnsignedLongLong", "PyErr_Occurred", "PyLong_FromLong", "PyEval_SaveThread",
        "PyEval_RestoreThread", "PyErr_SetString")] + [vp.in_dll(api, "PyExc_TypeError").value]
    if lib.symmem_py_bind((vp * len(fns))(*fns), len(fns)) != 0:
        raise ImportError(f"symmem: {path} refused Python's C API functions (symmem_py_bind)")
    d = _MethodDef(b"symmem_collective", ctypes.cast(lib.symmem_py_collective, vp), _METH_FASTCALL,
                   b"symmem_collective(group, call, in, out, count, stream) -> status")
    new = api.PyCFunction_NewEx
    new.restype, new.argtypes = ctypes.py_object, [ctypes.POINTER(_MethodDef), vp, vp]
    return new(ctypes.byref(d), None, None), d  # no self, no module


# _method_def: the PyMethodDef the builtin points to, alive as long as it.
collective, _method_def = _builtin()


def error(status):
    """The exception for a negative status, with this thread's last error text."""
    msg = lib.symmem_last_error().decode(errors="replace") or f"symmem status {status}"
    return _BY_CODE.get(status, SymmemError)(msg, status)


def check(status):
    if status < 0:
        raise error(status)
    return status


def text(fn, *args):
    """Calls a snprintf-like report function and returns its text."""
    cap = 4096
    while True:
        buf = ctypes.create_string_buffer(cap)
        n = check(fn(*args, buf, cap))
        if n < cap:
            return buf.value.decode()
        cap = n + 1
