"""Worlds, groups, scopes and pool memory."""

import ctypes
import json
import operator
import os
import threading
import weakref

from . import _codes, _lib
from ._lib import InvalidArgumentError, check, lib

KINDS = {k: i for i, k in enumerate(_codes.KINDS)}


class Path:
    """How a collective ran: algo (the path, one of the library's
    algorithms but "auto": "nccl", "kernel", ...), staged (ordinary memory
    went through the pool) and, from last_path() and explain(), the
    reason."""

    __slots__ = ("algo", "staged", "reason")

    def __init__(self, algo, staged, reason=""):
        self.algo, self.staged, self.reason = algo, staged, reason

    def __eq__(self, other):
        return isinstance(other, Path) and (self.algo, self.staged) == (other.algo, other.staged)

    def __hash__(self):
        return hash((self.algo, self.staged))

    def __repr__(self):
        s = self.algo + ("+staged" if self.staged else "")
        return f"Path({s}{': ' + self.reason if self.reason else ''})"

    @classmethod
    def _from_json(cls, s):
        d = json.loads(s)
        return cls(d["algo"], d["staged"], d["reason"])


# The path codes collectives return (SYMMEM_PATH_*), as shared objects.
PATHS = {c | staged: Path(a, bool(staged)) for a, c in _codes.PATHS.items() for staged in (0, _codes.PATH_STAGED)}

_ENV_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
              "SYMMEM_TOKEN", "SYMMEM_JOB_ID")


def _job_env(explicit):
    """The one place that decides where the job description comes from.

    With no explicit argument it returns None: the library reads the job
    environment itself (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT, SYMMEM_TOKEN, SYMMEM_JOB_ID, as `symmem launch`
    sets them). Otherwise every argument not given is read from the
    environment variable of the same meaning, and the full set is returned;
    token and job_id stay None where their variables are not set: the
    library then derives them as from the environment (under torchrun from
    TORCHELASTIC_RUN_ID, the master address and port; the job id from the
    token)."""
    if all(v is None for v in explicit.values()):
        return None
    out = dict(explicit)
    missing = []
    for key, var in zip(explicit, _ENV_NAMES):
        if out[key] is None:
            v = os.environ.get(var)
            derived = key == "job_id" or key == "token" and os.environ.get("TORCHELASTIC_RUN_ID", "").strip()
            if v is None and not derived:
                missing.append(f"{key} (or {var})")
            out[key] = v
    if missing:
        raise InvalidArgumentError(f"symmem.init: missing {', '.join(missing)}; pass them or start the ranks with "
                                   f"`symmem launch -n N python3 prog.py`")
    try:
        for key in ("rank", "world_size", "local_rank", "local_world_size", "master_port"):
            out[key] = int(out[key])
    except ValueError as e:
        raise InvalidArgumentError(f"symmem.init: {e}") from None
    return out


def _cstr(v):
    """A str argument as a C string; None as NULL (the library's choice)."""
    return None if v is None else str(v).encode()


def _nbytes(what, n):
    """n as a size_t argument: ctypes wraps an int past it silently
    (2**64 + 16 became 16), and a negative one too."""
    try:
        n = operator.index(n)
    except TypeError:
        raise InvalidArgumentError(f"{what}: size {n!r} is not an integer") from None
    if not 0 <= n < 2**63:
        raise InvalidArgumentError(f"{what}: size {n} is outside 0..2**63-1 bytes")
    return n


_world = None
_world_lock = threading.Lock()
# The open world's group (None while no world is open): the collectives'
# default, one lookup on their hot path.
_default_group = None


def init(backend="auto", timeout=None, checked=False, *, rank=None, world_size=None, local_rank=None,
         local_world_size=None, master_addr=None, master_port=None, token=None, job_id=None):
    """Joins the job (collective over every rank) and returns the World.

    backend: "auto" (the GPU when usable), "cpu" or "cuda". timeout: seconds
    every wait may take (default 60). checked: every collective first
    verifies that all ranks passed the same arguments (MismatchError
    otherwise). A second call returns the world already open.

    The job description comes from the environment (`symmem launch`,
    torchrun), read as it is at the call; rank, world_size, local_rank,
    local_world_size, master_addr, master_port, token and job_id, where
    given, take the place of their variables (rank 0 then hosts symmem's
    store on master_port + 1)."""
    global _world, _default_group
    with _world_lock:
        if _world is not None and _world.handle:
            return _world
        args = _job_env(dict(rank=rank, world_size=world_size, local_rank=local_rank,
                             local_world_size=local_world_size, master_addr=master_addr,
                             master_port=master_port, token=token, job_id=job_id))
        ms = 0 if timeout is None else int(timeout * 1000)
        if timeout is not None and ms <= 0:
            raise InvalidArgumentError(f"symmem.init: timeout {timeout!r} must be a positive number of seconds")
        flags = 1 if checked else 0
        h = _lib.u64()
        be = backend.encode() if backend else None
        _lib.sync_env()  # the environment as os.environ has it, read under the GIL
        if args is None:
            check(lib.symmem_init(be, ms, flags, ctypes.byref(h)))
        else:
            check(lib.symmem_init_explicit(args["rank"], args["world_size"], args["local_rank"],
                                           args["local_world_size"], args["master_addr"].encode(),
                                           args["master_port"], _cstr(args["token"]), _cstr(args["job_id"]),
                                           be, ms, flags, ctypes.byref(h)))
        _world = World(h.value)
        _default_group = _world.group
        return _world


def world():
    """The open World (init() first)."""
    w = _world
    if w is None or not w.handle:
        raise _lib.ClosedError("symmem: no open world: call symmem.init() first")
    return w


def _group(g):
    """The group a call runs on: g, or the world group."""
    if g is None:
        return world().group
    return g


class World:
    """This process's view of the job: rank, size, backend, groups, pool."""

    def __init__(self, handle):
        self.handle = handle
        self.rank = check(lib.symmem_world_rank(handle))
        self.size = check(lib.symmem_world_size(handle))
        self.backend = _lib.text(lib.symmem_world_backend, handle)
        d = _lib.i32()
        check(lib.symmem_world_device(handle, ctypes.byref(d)))
        self.device = d.value  # this rank's GPU (CUDA ordinal), -1 on the cpu backend
        g = _lib.u64()
        check(lib.symmem_world_group(handle, ctypes.byref(g)))
        self.group = Group(self, g.value, "world", list(range(self.size)))
        self._groups = 0

    def new_group(self, ranks, name=None):
        """Creates a group of these world ranks. Collective over the whole
        world: every rank calls it with the same ranks (and name) in the same
        order. Non-members get a Group whose is_member is False."""
        ranks = [int(r) for r in ranks]
        if name is None:
            self._groups += 1
            name = f"py{self._groups}"
        arr = (_lib.i32 * len(ranks))(*ranks)
        h = _lib.u64()
        check(lib.symmem_group_new(self.handle, name.encode(), arr, len(ranks), ctypes.byref(h)))
        return Group(self, h.value, name, sorted(ranks))

    def alloc(self, nbytes):
        """Allocates nbytes of pool memory; returns its address. Same sizes in
        the same order on every rank; registered at the next scope end."""
        p = ctypes.c_void_p()
        check(lib.symmem_alloc(self.handle, _nbytes("World.alloc", nbytes), ctypes.byref(p)))
        return p.value

    def free(self, addr, stream=None):
        check(lib.symmem_free(self.handle, addr, stream))

    def synchronize(self):
        check(lib.symmem_synchronize(self.handle))

    def doctor(self):
        """The doctor report (backend, ranks, groups, pool, the path each op
        would take) as a dict."""
        return json.loads(_lib.text(lib.symmem_doctor, self.handle))

    def close(self):
        """Closes the world (collective). Pool memory is released with it:
        drop every tensor and buffer from the pool first (PyTorch's MemPool
        keeps freed blocks cached; they must not be used after close)."""
        global _world, _default_group
        h, self.handle = self.handle, 0
        if _world is self:
            _world, _default_group = None, None
        if h:
            check(lib.symmem_world_close(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Group:
    """Ranks that run collectives together (symmem.world().group, or
    World.new_group)."""

    def __init__(self, w, handle, name, ranks):
        self.world, self.handle, self.name, self.ranks = w, handle, name, ranks
        self.rank = lib.symmem_group_rank(handle)
        self.size = len(ranks)
        self.is_member = self.rank >= 0
        self.cuda = w.backend == "cuda"
        self.device = w.device  # the torch path reads the current stream of this device
        # Serialises this group's registration scopes between threads (those
        # _alloc_registered opens, and use_symmetric_memory's from enter to
        # exit): the library keeps one scope stack per group, so two threads'
        # scopes would nest there and end out of order. Reentrant: a thread
        # inside use_symmetric_memory may nest another, or allocate.
        self._alloc_lock = threading.RLock()

    def close(self):
        """Removes the group (collective over the whole world)."""
        if self is self.world.group:
            raise InvalidArgumentError("symmem: the world group closes with the world: call World.close() "
                                       "(or symmem.close()) instead")
        h = self.handle
        if not h:
            return
        try:
            check(lib.symmem_group_close(h))
        except _lib.BadHandleError:
            self.handle = 0  # already gone (its world closed): nothing left to close
            raise
        # Cleared only now: a refused close leaves the group open and usable.
        self.handle = 0

    def last_path(self):
        """The path of this group's last collective on this rank, with the reason."""
        return Path._from_json(_lib.text(lib.symmem_group_last_path, self.handle))

    def explain(self, op, nbytes, symmetric=True):
        """The path a call of op ("all_gather", ...) moving nbytes in total
        would take, and why, without running anything."""
        if op not in KINDS:
            raise InvalidArgumentError(f"symmem.explain: unknown op {op!r} (want one of {', '.join(KINDS)})")
        nbytes = _nbytes("symmem.explain", nbytes)
        return Path._from_json(_lib.text(lib.symmem_explain, self.handle, KINDS[op], nbytes, int(bool(symmetric))))

    def __repr__(self):
        return f"Group({self.name!r}, ranks={self.ranks}, rank={self.rank})"


def new_group(ranks, name=None):
    return world().new_group(ranks, name)


def explain(op, nbytes, symmetric=True, group=None):
    return _group(group).explain(op, nbytes, symmetric)


def doctor():
    return world().doctor()


# Open scopes of this thread, innermost last: allocations inside one are
# registered with its group at its end.
_tls = threading.local()


def _scopes():
    s = getattr(_tls, "scopes", None)
    if s is None:
        s = _tls.scopes = []
    return s


class Scope:
    """An open symmetric scope of a group (collective at its end)."""

    def __init__(self, group):
        if not group.handle:
            raise _lib.ClosedError(f"symmem: group {group.name!r} is closed")
        self.group = group
        h = _lib.u64()
        check(lib.symmem_scope_open(group.handle, ctypes.byref(h)))
        self.handle = h.value
        # The opening thread's stack, kept here: scopes of different groups
        # may end in any order, and on another thread.
        self._stack = _scopes()
        self._stack.append(self)

    def end(self):
        h = self.handle
        if not h:
            return
        try:
            check(lib.symmem_scope_end(h))
        except InvalidArgumentError:
            raise  # refused, nothing changed (an inner scope of the group is open): still open, to end again
        except _lib.SymmemError:
            self._forget()  # the library dropped the scope with the error
            raise
        self._forget()

    def _forget(self):
        self.handle = 0
        try:
            self._stack.remove(self)  # by identity: Scope has no __eq__
        except ValueError:
            pass


def in_scope(group):
    """Whether this thread has an open scope of group."""
    return any(s.group is group for s in _scopes())


def _host_block(w, nbytes):
    """nbytes of pool host memory as a ctypes array that frees the block
    when the last view of it is gone."""
    addr = w.alloc(nbytes)
    # A subclass, because plain ctypes arrays take no weak references.
    arr = type("_Mem", (ctypes.c_uint8 * nbytes,), {}).from_address(addr)
    weakref.finalize(arr, _free_if_open, w, addr)
    return arr


def _free_if_open(w, addr):
    if w.handle:
        try:
            w.free(addr)
        except _lib.SymmemError:
            pass  # the world is closing; its pool goes with it


_FORMATS = {"float32": "f", "float64": "d", "float16": "H", "bfloat16": "H", "int8": "b", "uint8": "B",
            "int32": "i", "int64": "q"}


def empty_buffer(shape, dtype="float32", group=None):
    """A memoryview of pool memory (CPU backend) of this shape and dtype
    ("float32", "float64", "float16" and "bfloat16" as raw 16-bit words: pass dtype= to collectives,
    "int8", "uint8", "int32", "int64"), registered with group (default the
    world): the standard-library counterpart of empty(). A shape with a zero
    gives an empty 1-d view (memoryview allows no zeros in a shape)."""
    g = _group(group)
    if g.cuda:
        raise _lib.NotSupportedError("symmem.empty_buffer: the world runs the cuda backend, whose memory is "
                                     "device memory: use symmem.empty(shape, dtype) for a torch tensor")
    if dtype not in _FORMATS:
        raise InvalidArgumentError(f"symmem.empty_buffer: unknown dtype {dtype!r} (want one of {', '.join(_FORMATS)})")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    try:
        dims = tuple(operator.index(d) for d in shape)  # numpy integers too
    except TypeError:
        dims = (-1,)
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"symmem.empty_buffer: shape {shape!r} is not a tuple of sizes >= 0")
    shape = dims
    n = 1
    for d in shape:
        n *= d
    fmt = _FORMATS[dtype]
    nbytes = n * ctypes.sizeof({"f": ctypes.c_float, "d": ctypes.c_double, "e": ctypes.c_uint16,
                                "H": ctypes.c_uint16, "b": ctypes.c_int8, "B": ctypes.c_uint8,
                                "i": ctypes.c_int32, "q": ctypes.c_int64}[fmt])
    arr = _alloc_registered(g, max(nbytes, 1))
    if n == 0:
        # memoryview.cast refuses zeros in a shape: an empty 1-d view.
        return memoryview(arr).cast("B")[:0].cast(fmt)
    return memoryview(arr).cast("B")[:nbytes].cast(fmt, shape)


def _alloc_registered(g, nbytes):
    """Allocates host pool memory, registered with g by the open scope of g
    (at its end) or by a scope of its own."""
    if in_scope(g):
        return _host_block(g.world, nbytes)
    with g._alloc_lock:
        sc = Scope(g)
        try:
            arr = _host_block(g.world, nbytes)
        finally:
            sc.end()
    return arr


def is_symmetric(x, group=None):
    """Whether tensor or buffer x is pool memory registered with group, so
    collectives on it run directly (no staging)."""
    from . import _ops
    addr, nbytes, _, _ = _ops.describe(x, False)
    return check(lib.symmem_is_symmetric(_group(group).handle, addr, nbytes)) == 1
