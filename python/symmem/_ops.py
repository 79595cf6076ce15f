"""Collectives over torch tensors and buffer-protocol objects, NCCL-like.

Each collective has two paths. The torch path (plain torch.Tensor on the
cuda backend, no dtype=) reads each tensor's attributes once, inline, and
checks them (devices are the library's to check); anything it does not accept — a failed check included — goes
to the general path, which handles every argument type through one cached
handler per type and raises the error that names what was wrong. Both end
in one call of symmem_collective(group, call, in, out, count, stream) (the
call word packs kind, dtype, op, algorithm and root) through the library's
builtin entry (_lib.collective) and return a shared Path object."""

import ctypes
import operator
import sys
import weakref

from . import _codes, _core, _lib
from ._lib import InvalidArgumentError, lib

# NCCL dtype values by name, and element sizes.
DTYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5, "float16": 6,
          "float32": 7, "float64": 8, "bfloat16": 9}
_SIZE = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2}
_NAME = {v: k for k, v in DTYPES.items()}
# The dtypes the library runs (not uint32, uint64), for the error hints.
_SUPPORTED = ("int8", "uint8", "int32", "int64", "float16", "float32", "float64", "bfloat16")
# The dtype code of a buffer whose format has no symmem dtype: _RAW plus its
# element size, which dtype= must match.
_RAW = 16
OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
_OP = {**OPS, **{v: v for v in OPS.values()}}
SUM, PROD, MAX, MIN, AVG = 0, 1, 2, 3, 4
# symmem_collective's call word: kind | dtype << 8 | op << 16 | algo << 24 |
# root << 32 (SYMMEM_CALL in include/symmem.h).
AG, RS, AR, BC, A2A = _codes.ALL_GATHER, _codes.REDUCE_SCATTER, _codes.ALL_REDUCE, _codes.BROADCAST, _codes.ALL_TO_ALL
_ALGO = {a: i << 24 for i, a in enumerate(_codes.ALGOS)}
_ALGO_CHOICES = ", ".join(_codes.ALGOS[:-1]) + " or " + _codes.ALGOS[-1]
_RS_OP = {k: RS | v << 16 for k, v in _OP.items()}
_AR_OP = {k: AR | v << 16 for k, v in _OP.items()}
_collective = _lib.collective

# Buffer-protocol formats (without byte-order prefix) by (code, itemsize).
_FMT = {("f", 4): 7, ("d", 8): 8, ("e", 2): 6, ("b", 1): 0, ("B", 1): 1, ("c", 1): 1, ("?", 1): 1}
for _c in "ilqn":
    _FMT[(_c, 4)], _FMT[(_c, 8)] = 2, 4
for _c in "ILQN":
    _FMT[(_c, 4)], _FMT[(_c, 8)] = 3, 5


class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_PYBUF_WRITABLE, _PYBUF_FORMAT, _PYBUF_C_CONTIGUOUS = 0x1, 0x4, 0x38
# Format prefixes of the other byte order than this machine's.
_FOREIGN = ">!" if sys.byteorder == "little" else "<"


def _buffer(x, writable):
    """Address, bytes, dtype code of a C-contiguous buffer-protocol object."""
    v = _PyBuffer()
    try:
        _get_buffer(x, ctypes.byref(v), _PYBUF_C_CONTIGUOUS | _PYBUF_FORMAT | (_PYBUF_WRITABLE if writable else 0))
    except BufferError as e:
        what = "a writable, C-contiguous buffer" if writable else "a C-contiguous buffer"
        raise InvalidArgumentError(f"symmem: {type(x).__name__} is not {what}: {e}") from None
    try:
        fmt = (v.format or b"B").decode()
        if fmt[:1] in _FOREIGN and v.itemsize > 1:
            # The library reduces in native order: these would be summed as garbage.
            raise InvalidArgumentError(f"symmem: {type(x).__name__} has elements of format {fmt!r}, not in this "
                                       f"machine's {sys.byteorder}-endian byte order: convert it to native order "
                                       f"first (numpy: a.astype(a.dtype.newbyteorder('=')); ctypes: the plain type, "
                                       f"not __ctype_be__ or __ctype_le__)")
        dt = _FMT.get((fmt.lstrip("@=<>!"), v.itemsize))
        if dt is None:
            dt = _RAW + v.itemsize  # usable with a dtype= of that element size
        return v.buf or 0, v.len, dt, -1
    finally:
        _release_buffer(ctypes.byref(v))


# Buffer descriptions by object id, for objects that take weak references
# (memoryview, numpy): asking the buffer protocol through ctypes costs ~2 us.
_cache = {}


def _cached_buffer(x, writable):
    e = _cache.get(id(x))
    if e is not None and e[0]() is x:
        d = e[1]
        if d[1] == x.nbytes and not (writable and e[2]):  # x.nbytes raises on a released memoryview
            return d
    d = _buffer(x, writable)
    if not hasattr(type(x), "nbytes"):
        # No size to check a cached entry against (mmap, ctypes arrays; an
        # mmap can also be closed or resized): describe it every time.
        _handlers[type(x)] = _buffer
        return d
    try:
        k = id(x)
        _cache[k] = (weakref.ref(x, lambda _, k=k: _cache.pop(k, None)), d, not writable and _readonly(x))
    except TypeError:
        _handlers[type(x)] = _buffer  # no weak references: describe it every time
    return d


def _readonly(x):
    try:
        return memoryview(x).readonly
    except (TypeError, ValueError):
        return True


def _array(x, writable):
    a, n = x.buffer_info()
    dt = _FMT.get((x.typecode, x.itemsize), _RAW + x.itemsize)
    return a, n * x.itemsize, dt, -1


# Set when the first torch type is seen (_load_torch): torch dtype -> NCCL
# code, the same shifted into the call word, the torch path's tensor type, and
# torch's raw current-stream getter.
_torch_dtypes = None
_TDT = {}
_T = None
_raw_stream = None


def _load_torch():
    global _torch_dtypes, _TDT, _T, _raw_stream
    import torch
    _torch_dtypes = {torch.int8: 0, torch.uint8: 1, torch.int32: 2, torch.int64: 4,
                     torch.float16: 6, torch.float32: 7, torch.float64: 8, torch.bfloat16: 9}
    _TDT = {d: c << 8 for d, c in _torch_dtypes.items()}
    # torch.cuda.current_stream().cuda_stream costs ~9 us a call: the raw
    # getter, where this torch has it.
    _raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or \
        (lambda d: torch.cuda.current_stream(d).cuda_stream)
    _T = torch.Tensor


def _tensor(t, writable):
    if not t.is_contiguous():
        raise InvalidArgumentError("symmem: the tensor is not contiguous: call .contiguous() first")
    dt = _torch_dtypes.get(t.dtype)
    if dt is None:
        raise _lib.NotSupportedError(f"symmem: tensor dtype {t.dtype} is not supported (int8, uint8, int32, int64, "
                                     f"float16, float32, float64, bfloat16)")
    return t.data_ptr(), t.nbytes, dt, t.get_device()


_handlers = {}


def _handler(tp):
    h = _handlers.get(tp)
    if h is None:
        import array
        if issubclass(tp, array.array):
            h = _array
        elif tp.__module__.startswith("torch") and hasattr(tp, "data_ptr"):
            if _T is None:
                _load_torch()
            h = _tensor
        else:
            h = _cached_buffer
        _handlers[tp] = h
    return h


def describe(x, writable):
    """(address, bytes, dtype code, cuda device or -1) of a tensor or buffer."""
    return (_handlers.get(type(x)) or _handler(type(x)))(x, writable)


def _dtype(dt, override, what):
    size = _SIZE.get(dt) or dt - _RAW  # the element size
    if override is not None:
        want = DTYPES.get(override) if isinstance(override, str) else _torch_dtype_code(override)
        if want is None:
            raise InvalidArgumentError(f"symmem: unknown dtype {override!r} (want one of {', '.join(_SUPPORTED)})")
        if _SIZE[want] != size:
            raise InvalidArgumentError(f"symmem: dtype {override!r} has {_SIZE[want]}-byte elements, the {what}'s "
                                       f"are {size} bytes: {_fitting(size)}")
        return want
    if dt >= _RAW:
        raise InvalidArgumentError(f"symmem: the {what}'s element type has no symmem dtype: {_fitting(size)}")
    return dt


def _fitting(size):
    """What dtype= to pass for elements of size bytes."""
    fit = [n for n in _SUPPORTED if _SIZE[DTYPES[n]] == size]
    if not fit:
        return f"no symmem dtype has {size}-byte elements ({', '.join(_SUPPORTED)})"
    return f"pass dtype= ({' or '.join(fit)})"


def _torch_dtype_code(d):
    if isinstance(d, int):
        return d if d in _SIZE else None
    if _torch_dtypes is None:
        if "torch" not in sys.modules:
            return None  # no torch dtype can exist yet
        _load_torch()  # a torch dtype before any tensor reached symmem
    try:
        return _torch_dtypes.get(d)
    except TypeError:  # unhashable: not a dtype
        return None


# Raw handles of torch.cuda.Stream objects passed as stream=.
_streams = weakref.WeakKeyDictionary()


# torch's default stream is CUDA's legacy default stream, whose raw handle is
# 0; symmem reads a NULL stream as "the backend's own stream", which is not
# ordered after the caller's kernels. CU_STREAM_LEGACY names the legacy
# default stream explicitly.
CU_STREAM_LEGACY = 0x1


def _stream_arg(stream):
    """The raw stream of stream= (an int, or a torch.cuda.Stream whose
    handle is cached); the callers read the current stream themselves."""
    if isinstance(stream, int):
        if not 0 <= stream < 1 << 64:
            raise InvalidArgumentError(f"symmem: stream={stream} is not a stream handle (want a torch.cuda.Stream, "
                                       f"its cuda_stream, or 0 for the default stream)")
        return stream or CU_STREAM_LEGACY
    try:
        s = _streams.get(stream)
        if s is None:
            s = _streams[stream] = stream.cuda_stream or CU_STREAM_LEGACY
        return s
    except TypeError:  # no weak references to this object
        return stream.cuda_stream or CU_STREAM_LEGACY


def _place_error(g, dev, what):
    """Raises for a buffer on the wrong side (host vs CUDA) for g's backend."""
    if g.cuda:
        raise InvalidArgumentError(f"symmem: the {what} is host memory but the world runs the cuda backend: "
                                   f"pass CUDA tensors")
    raise InvalidArgumentError(f"symmem: the {what} is a CUDA tensor but the world runs the {g.world.backend} "
                               f"backend: init(backend=\"cuda\") or pass host memory")


_PATHS = tuple(_core.PATHS.get(i) for i in range(32))


def _fail(status):
    raise _lib.error(status)


_INVALID = _lib.InvalidArgumentError.code


def _refused(status, general, args):
    """Raises for a failed torch-path call. The torch path leaves tensors'
    devices to the library (pool memory is this rank's GPU's; the library
    checks other memory and refuses it as an invalid argument). So a refusal
    runs the general path's checks, which raise the error naming a wrong
    tensor as they always did, with the library's error standing in for its
    call: the library is not called again."""
    e = _lib.error(status)
    if status == _INVALID:
        def lib(*_):
            raise e
        general(*args, lib=lib)
    raise e


def _world_group():
    g = _core._default_group
    if g is None:
        _core.world()  # raises ClosedError
    return g


# The torch path of each collective (see the module doc): a plain
# torch.Tensor (_T) on a cuda world, no dtype=. It checks inline what the
# general path checks (contiguous, a supported dtype, the same dtype on both
# sides, sizes by element count, a known op, a root in range) but the
# tensors' devices: it reads the current stream of the group's device, and
# the library refuses memory that is not that GPU's (pool memory is; other
# memory it asks the driver about), before any peer is involved. A check
# that fails sends the call to the general path, whose error names it; a
# refusal runs the general path's checks (_refused), so a host tensor or
# tensors on two devices raise the error they always raised.

def all_gather_into_tensor(output, input, group=None, *, dtype=None, algo=None, stream=None):
    """Gathers every rank's input into output (size × input, in group-rank
    order). In place: input may be this rank's slice of output. Returns the
    Path the call took."""
    if input.__class__ is _T and output.__class__ is _T and dtype is None:
        g = group or _core._default_group or _world_group()
        d, n = input.dtype, input.numel()
        call = _TDT.get(d)
        if (call is not None and g.cuda and output.dtype is d and output.numel() == n * g.size
                and input.is_contiguous() and output.is_contiguous()):
            if algo is not None:
                call |= _algo(algo)
            s = _raw_stream(g.device) or CU_STREAM_LEGACY if stream is None else _stream_arg(stream)
            r = _collective(g.handle, call, input.data_ptr(), output.data_ptr(), n, s)  # AG is 0
            return _PATHS[r] if r >= 0 else _refused(r, _all_gather, (output, input, group, dtype, algo, stream))
    return _all_gather(output, input, group, dtype, algo, stream)


def _all_gather(output, input, group, dtype, algo, stream, lib=None):
    g = group or _world_group()
    ia, ib, idt, dev = (_handlers.get(type(input)) or _handler(type(input)))(input, False)
    oa, ob, odt, odev = (_handlers.get(type(output)) or _handler(type(output)))(output, True)
    if idt != odt or idt >= _RAW or dtype is not None:
        idt, odt = _dtype(idt, dtype, "input"), _dtype(odt, dtype, "output")
    es = _SIZE[idt]
    if ob != ib * g.size or idt != odt or dev != odev or ib % es:
        _shape_error("all_gather_into_tensor", f"output holds {ob} bytes, want group size {g.size} × input's {ib} "
                     f"bytes = {ib * g.size}", idt, odt, dev, odev)
    if (dev >= 0) != g.cuda:
        _place_error(g, dev, "input")
    if stream is None:  # the current stream
        stream = 0 if dev < 0 else _raw_stream(dev) or CU_STREAM_LEGACY
    else:
        stream = _stream_arg(stream)
    r = (lib or _collective)(g.handle, AG | idt << 8 | (0 if algo is None else _algo(algo)), ia, oa, ib // es, stream)
    return _PATHS[r] if r >= 0 else _fail(r)


def reduce_scatter_tensor(output, input, op=SUM, group=None, *, dtype=None, algo=None, stream=None):
    """Reduces input (size equal chunks) across ranks with op; this rank
    gets chunk Group.rank in output."""
    if input.__class__ is _T and output.__class__ is _T and dtype is None:
        g = group or _core._default_group or _world_group()
        d, n = output.dtype, output.numel()
        try:
            # A bool would match the int keys (False is SUM, True PROD): the
            # general path refuses it.
            call = _RS_OP[op] | _TDT[d] if op.__class__ is not bool else None
        except (KeyError, TypeError):
            call = None
        if (call is not None and g.cuda and input.dtype is d and input.numel() == n * g.size
                and input.is_contiguous() and output.is_contiguous()):
            if algo is not None:
                call |= _algo(algo)
            s = _raw_stream(g.device) or CU_STREAM_LEGACY if stream is None else _stream_arg(stream)
            r = _collective(g.handle, call, input.data_ptr(), output.data_ptr(), n, s)
            return _PATHS[r] if r >= 0 else _refused(r, _reduce_scatter, (output, input, op, group, dtype, algo,
                                                                         stream))
    return _reduce_scatter(output, input, op, group, dtype, algo, stream)


def _reduce_scatter(output, input, op, group, dtype, algo, stream, lib=None):
    g = group or _world_group()
    ia, ib, idt, dev = (_handlers.get(type(input)) or _handler(type(input)))(input, False)
    oa, ob, odt, odev = (_handlers.get(type(output)) or _handler(type(output)))(output, True)
    if idt != odt or idt >= _RAW or dtype is not None:
        idt, odt = _dtype(idt, dtype, "input"), _dtype(odt, dtype, "output")
    es = _SIZE[idt]
    if ib != ob * g.size or idt != odt or dev != odev or ob % es:
        _shape_error("reduce_scatter_tensor", f"input holds {ib} bytes, want group size {g.size} × output's {ob} "
                     f"bytes = {ob * g.size}", idt, odt, dev, odev)
    if (dev >= 0) != g.cuda:
        _place_error(g, dev, "input")
    if stream is None:  # the current stream
        stream = 0 if dev < 0 else _raw_stream(dev) or CU_STREAM_LEGACY
    else:
        stream = _stream_arg(stream)
    try:
        if op.__class__ is bool:
            raise KeyError(op)  # not a reduction, though it equals 0 or 1: _opcode refuses it
        call = _RS_OP[op]
    except (KeyError, TypeError):
        call = RS | _opcode(op) << 16
    r = (lib or _collective)(g.handle, call | idt << 8 | (0 if algo is None else _algo(algo)), ia, oa, ob // es, stream)
    return _PATHS[r] if r >= 0 else _fail(r)


def all_reduce(tensor, op=SUM, group=None, *, output=None, dtype=None, algo=None, stream=None):
    """Reduces tensor across ranks with op, in place (or into output)."""
    if tensor.__class__ is _T and dtype is None:
        g = group or _core._default_group or _world_group()
        d, n = tensor.dtype, tensor.numel()
        try:
            call = _AR_OP[op] | _TDT[d] if op.__class__ is not bool else None  # bools: as reduce_scatter_tensor
        except (KeyError, TypeError):
            call = None
        if call is not None and g.cuda and tensor.is_contiguous():
            if output is None:
                oa = ia = tensor.data_ptr()
            elif output.__class__ is _T and output.dtype is d and output.numel() == n and output.is_contiguous():
                ia, oa = tensor.data_ptr(), output.data_ptr()
            else:
                call = None
            if call is not None:
                if algo is not None:
                    call |= _algo(algo)
                s = _raw_stream(g.device) or CU_STREAM_LEGACY if stream is None else _stream_arg(stream)
                r = _collective(g.handle, call, ia, oa, n, s)
                return _PATHS[r] if r >= 0 else _refused(r, _all_reduce, (tensor, op, group, output, dtype, algo,
                                                                         stream))
    return _all_reduce(tensor, op, group, output, dtype, algo, stream)


def _all_reduce(tensor, op, group, output, dtype, algo, stream, lib=None):
    g = group or _world_group()
    ia, ib, idt, dev = (_handlers.get(type(tensor)) or _handler(type(tensor)))(tensor, output is None)
    if output is None:
        oa, ob, odt, odev = ia, ib, idt, dev
    else:
        oa, ob, odt, odev = (_handlers.get(type(output)) or _handler(type(output)))(output, True)
    if idt >= _RAW or dtype is not None or idt != odt:
        idt, odt = _dtype(idt, dtype, "tensor"), _dtype(odt, dtype, "output")
    es = _SIZE[idt]
    if ob != ib or idt != odt or dev != odev or ib % es:
        _shape_error("all_reduce", f"output holds {ob} bytes and the tensor {ib}", idt, odt, dev, odev)
    if (dev >= 0) != g.cuda:
        _place_error(g, dev, "tensor")
    if stream is None:  # the current stream
        stream = 0 if dev < 0 else _raw_stream(dev) or CU_STREAM_LEGACY
    else:
        stream = _stream_arg(stream)
    try:
        if op.__class__ is bool:
            raise KeyError(op)  # not a reduction, though it equals 0 or 1: _opcode refuses it
        call = _AR_OP[op]
    except (KeyError, TypeError):
        call = AR | _opcode(op) << 16
    r = (lib or _collective)(g.handle, call | idt << 8 | (0 if algo is None else _algo(algo)), ia, oa, ib // es, stream)
    return _PATHS[r] if r >= 0 else _fail(r)


def broadcast(tensor, root=0, group=None, *, dtype=None, algo=None, stream=None):
    """Copies group rank root's tensor into tensor on every rank (in place)."""
    if tensor.__class__ is _T and dtype is None and root.__class__ is int and 0 <= root < 1 << 31:
        g = group or _core._default_group or _world_group()
        call = _TDT.get(tensor.dtype)
        if call is not None and g.cuda and tensor.is_contiguous():
            call |= BC | root << 32
            if algo is not None:
                call |= _algo(algo)
            s = _raw_stream(g.device) or CU_STREAM_LEGACY if stream is None else _stream_arg(stream)
            r = _collective(g.handle, call, 0, tensor.data_ptr(), tensor.numel(), s)
            return _PATHS[r] if r >= 0 else _refused(r, _broadcast, (tensor, root, group, dtype, algo, stream))
    return _broadcast(tensor, root, group, dtype, algo, stream)


def _broadcast(tensor, root, group, dtype, algo, stream, lib=None):
    g = group or _world_group()
    a, b, dt, dev = (_handlers.get(type(tensor)) or _handler(type(tensor)))(tensor, True)
    if dt >= _RAW or dtype is not None:
        dt = _dtype(dt, dtype, "tensor")
    if (dev >= 0) != g.cuda:
        _place_error(g, dev, "tensor")
    if stream is None:  # the current stream
        stream = 0 if dev < 0 else _raw_stream(dev) or CU_STREAM_LEGACY
    else:
        stream = _stream_arg(stream)
    if root.__class__ is not int or not 0 <= root < 1 << 31:
        root = _root(root, g)
    r = (lib or _collective)(g.handle, BC | dt << 8 | (0 if algo is None else _algo(algo)) | root << 32, 0, a,
                             b // _SIZE[dt], stream)
    return _PATHS[r] if r >= 0 else _fail(r)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None, *, dtype=None,
                      algo=None, stream=None):
    """torch.distributed.all_to_all_single on symmem: input is split along
    dim 0 into chunks, chunk j goes to group rank j, and output's chunk i
    comes from group rank i. Split sizes count rows of dim 0, as torch's
    do (a flat buffer: elements); a side without them is split into size
    equal chunks. What rank i sends rank j must be what rank j expects from
    rank i: a difference raises MismatchError on every rank, naming both
    ranks and both sizes. Out of place only. Returns the Path the call
    took."""
    g, ia, ib, oa, ob, idt, dev, stream = _a2a_args("all_to_all_single", "output", input, output, group, dtype,
                                                    stream)
    es, n = _SIZE[idt], g.size
    if output_split_sizes is None and input_split_sizes is None:
        if ib != ob or (ib // es) % n:
            _shape_error("all_to_all_single", f"input holds {ib} bytes and output {ob}; without split sizes both hold "
                         f"the same number of elements, a multiple of the group size {n}", idt, idt, dev, dev)
        r = _collective(g.handle, A2A | idt << 8 | (0 if algo is None else _algo(algo)), ia, oa, ib // es // n, stream)
        return _PATHS[r] if r >= 0 else _fail(r)
    send = _splits("input", input, ib, input_split_sizes, n, es)
    recv = _splits("output", output, ob, output_split_sizes, n, es)
    if algo is not None:
        _algo(algo)
    r = lib.symmem_all_to_all_v(g.handle, ia, oa, ib // es, ob // es, (ctypes.c_int64 * n)(*send),
                                (ctypes.c_int64 * n)(*recv), idt, stream, None if algo is None else algo.encode())
    return _PATHS[r] if r >= 0 else _fail(r)


def _a2a_args(what, oname, input, output, group, dtype, stream):
    """What both all-to-all calls check alike: the group, both buffers
    (address, bytes) in one dtype on one device, whole elements, the
    group's placement, and the stream (None: the current one)."""
    g = group or _world_group()
    ia, ib, idt, dev = (_handlers.get(type(input)) or _handler(type(input)))(input, False)
    oa, ob, odt, odev = (_handlers.get(type(output)) or _handler(type(output)))(output, True)
    if idt != odt or idt >= _RAW or dtype is not None:
        idt, odt = _dtype(idt, dtype, "input"), _dtype(odt, dtype, oname)
    es = _SIZE[idt]
    if idt != odt or dev != odev or ib % es or ob % es:
        _shape_error(what, f"input holds {ib} bytes and {oname} {ob}, not whole {_NAME.get(idt, idt)} elements",
                     idt, odt, dev, odev)
    if (dev >= 0) != g.cuda:
        _place_error(g, dev, "input")
    if stream is None:  # the current stream
        stream = 0 if dev < 0 else _raw_stream(dev) or CU_STREAM_LEGACY
    else:
        stream = _stream_arg(stream)
    return g, ia, ib, oa, ob, idt, dev, stream


def _splits(what, x, nbytes, sizes, n, es):
    """Split sizes (rows of x's dim 0; None: n equal chunks) as element
    counts for the library."""
    shape = getattr(x, "shape", None)
    if shape is None:
        try:
            shape = memoryview(x).shape
        except TypeError:
            shape = ()
    rows = shape[0] if len(shape) else nbytes // es
    row = nbytes // es // rows if rows else 0  # elements per row
    if sizes is None:
        if rows % n:
            raise InvalidArgumentError(f"symmem.all_to_all_single: {what} has {rows} rows, not divisible by the group "
                                       f"size {n}: pass {what}_split_sizes")
        return [rows // n * row] * n
    try:
        sizes = [operator.index(s) for s in sizes]
    except TypeError:
        raise InvalidArgumentError(f"symmem.all_to_all_single: {what}_split_sizes {sizes!r} is not a sequence of "
                                   f"ints") from None
    if len(sizes) != n:
        raise InvalidArgumentError(f"symmem.all_to_all_single: {what}_split_sizes holds {len(sizes)} sizes; want one "
                                   f"per group rank ({n})")
    if any(s < 0 for s in sizes) or sum(sizes) > rows:
        raise InvalidArgumentError(f"symmem.all_to_all_single: {what}_split_sizes {sizes} must be >= 0 and sum to at "
                                   f"most {what}'s {rows} rows")
    return [s * row for s in sizes]


def all_to_all_vdev(input, out, in_splits, out_splits_offsets, group=None, *, dtype=None, algo=None, stream=None):
    """torch.ops.symm_mem.all_to_all_vdev on symmem (MoE dispatch and
    combine): in_splits (size int64, symmetric memory) holds the elements
    this rank sends each group rank, packed in rank order in input; the
    call writes out_splits_offsets (2 × size int64, symmetric): the
    elements received from each rank, then each block's element offset in
    out. input and out are capacities: counts below zero or past any rank's
    input or out raise InvalidArgumentError on every rank, and nothing is
    written. All four must be symmetric buffers of the group (empty_buffer,
    empty). Returns the Path the call took."""
    g, ia, ib, oa, ob, idt, dev, stream = _a2a_args("all_to_all_vdev", "out", input, out, group, dtype, stream)
    es = _SIZE[idt]
    sa, sb, sdt, sdev = (_handlers.get(type(in_splits)) or _handler(type(in_splits)))(in_splits, False)
    pa, pb, pdt, pdev = (_handlers.get(type(out_splits_offsets)) or _handler(type(out_splits_offsets)))(
        out_splits_offsets, True)
    if (sdt, pdt) != (DTYPES["int64"], DTYPES["int64"]) or (sdev, pdev) != (dev, dev):
        raise InvalidArgumentError(f"symmem.all_to_all_vdev: in_splits and out_splits_offsets must be int64 on the "
                                   f"input's device ({_NAME.get(sdt, sdt)} and {_NAME.get(pdt, pdt)} on {sdev} and "
                                   f"{pdev}; -1: host)")
    if algo is not None:
        _algo(algo)
    r = lib.symmem_all_to_all_vdev(g.handle, ia, oa, ib // es, ob // es, sa, pa, idt, stream,
                                   None if algo is None else algo.encode())
    return _PATHS[r] if r >= 0 else _fail(r)


def _root(root, g):
    """root as a plain int (anything with __index__: numpy integers too), or
    an error naming it."""
    try:
        r = operator.index(root)
    except TypeError:
        r = -1
    if isinstance(root, bool) or not 0 <= r < 1 << 31:
        raise InvalidArgumentError(f"symmem.broadcast: root {root!r} is not a group rank (0 to {g.size - 1})")
    return r


def _algo(a):
    c = _ALGO.get(a) if a.__class__ is str else None
    if c is None:
        raise InvalidArgumentError(f"symmem: unknown algorithm {a!r} (want {_ALGO_CHOICES})")
    return c


def _opcode(op):
    c = _OP.get(op) if isinstance(op, (int, str)) and not isinstance(op, bool) else None
    if c is None:
        raise InvalidArgumentError(f"symmem: unknown reduction {op!r} (want one of {', '.join(OPS)} or NCCL's value)")
    return c


def _shape_error(what, sizes, idt, odt, dev, odev):
    if idt != odt:
        raise InvalidArgumentError(f"symmem.{what}: input is {_NAME.get(idt, idt)} but output is {_NAME.get(odt, odt)}")
    if dev != odev:
        raise InvalidArgumentError(f"symmem.{what}: input and output are on different devices ({dev} and {odev}; -1: host)")
    raise InvalidArgumentError(f"symmem.{what}: {sizes}")
