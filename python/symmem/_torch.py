"""PyTorch parts: symmem's pool as a CUDAPluggableAllocator in a MemPool,
the use_symmetric_memory context, and empty(). torch is imported here only,
when first needed."""

import threading

from . import _core, _lib

_pool = None
_graph_pool_id = None


def _torch():
    try:
        import torch
    except ImportError as e:
        raise _lib.NotSupportedError(f"symmem: this needs PyTorch ({e}); the rest of the package works without it") from None
    return torch


def mem_pool():
    """The torch.cuda.MemPool whose allocations come from symmem's pool (one
    per process: every group registers every pool segment at its scopes'
    ends, so blocks may move between groups)."""
    global _pool
    if _pool is None:
        torch = _torch()
        alloc = torch.cuda.memory.CUDAPluggableAllocator(_lib.path, "symmem_torch_alloc", "symmem_torch_free")
        _pool = torch.cuda.MemPool(alloc.allocator())
    return _pool


def set_graph_pool_id(pool_id):
    """Tells use_symmetric_memory the CUDA graph memory pool being captured
    into (torch.cuda.graph(...).pool(), or graph_pool_handle()), so it can
    pause that pool while routing allocations to symmem (as SGLang does)."""
    global _graph_pool_id
    _graph_pool_id = pool_id


def _device_error(what, where, g):
    """The error for an allocation on another GPU than the group's: symmem's
    pool is memory of this rank's GPU, and torch.cuda.use_mem_pool routes
    the allocations of torch's current device to it."""
    return _lib.InvalidArgumentError(
        f"{what}: {where} but this rank's symmem GPU is {g.device}: call torch.cuda.set_device(LOCAL_RANK) "
        f"before symmem.init() (here torch.cuda.set_device({g.device}), the GPU symmem.init() took); symmem's "
        f"pool is memory of that GPU, and torch.cuda.use_mem_pool routes the allocations of torch's current "
        f"device to it")


def _check_current_device(torch, g, what):
    dev = torch.cuda.current_device()
    if dev != g.device:
        raise _device_error(what, f"torch's current CUDA device is {dev}", g)
    return dev


# Whether this thread's allocations already go to symmem's MemPool (an
# enclosing _Route): nested routes then change nothing, so the graph pool is
# paused once and resumed once.
_routed = threading.local()


class _Route:
    """Routes this thread's CUDA allocations on the current device to
    symmem's MemPool; during CUDA graph capture the graph's pool is paused
    meanwhile (set_graph_pool_id first). No scope: the caller's open scope
    registers what is allocated."""

    def __init__(self, torch):
        self.torch = torch
        self._ctx = None
        self._capture = self._active = False

    def __enter__(self):
        if getattr(_routed, "on", False):
            return self
        torch = self.torch
        self._device = torch.cuda.current_device()
        self._capture = torch.cuda.is_current_stream_capturing()
        if self._capture:
            if _graph_pool_id is None:
                raise _lib.InvalidArgumentError(
                    "symmem.use_symmetric_memory inside CUDA graph capture: call "
                    "symmem.set_graph_pool_id(graph.pool()) first so the graph's pool can be paused")
            torch._C._cuda_endAllocateToPool(self._device, _graph_pool_id)
        try:
            ctx = torch.cuda.use_mem_pool(mem_pool())
            ctx.__enter__()
        except BaseException:
            self._resume()
            raise
        self._ctx, self._active, _routed.on = ctx, True, True
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self._active:
            return False
        self._active, _routed.on = False, False
        try:
            ctx, self._ctx = self._ctx, None
            ctx.__exit__(exc_type, exc, tb)
        finally:
            self._resume()
        return False

    def _resume(self):
        if self._capture:
            self._capture = False
            self.torch._C._cuda_beginAllocateCurrentThreadToPool(self._device, _graph_pool_id)


class use_symmetric_memory:
    """Inside, allocations of this thread come from symmem's pool: CUDA
    tensors through the MemPool (cuda backend; torch's current device must
    be the group's GPU), empty()/empty_buffer() on the cpu backend. At exit
    the new pool segments are registered with the group (collective over its
    ranks, verified: every rank must allocate the same sizes in the same
    order). Another thread's use_symmetric_memory (or empty_buffer) of the
    same group waits until this one exits: the library keeps one scope stack
    per group. During CUDA graph capture the graph's pool is paused while
    inside (set_graph_pool_id first)."""

    def __init__(self, group=None, disabled=False):
        self.group = _core._group(group)
        self.disabled = disabled
        self._scope = self._route = None

    def __enter__(self):
        if self.disabled:
            return self
        g = self.group
        torch = None
        if g.cuda:
            torch = _torch()
            _check_current_device(torch, g, "symmem.use_symmetric_memory")
        # Held until __exit__: another thread's scope of g would nest in this
        # one in the library and end out of order.
        lock = g._alloc_lock
        lock.acquire()
        try:
            self._scope = _core.Scope(g)
        except BaseException:
            lock.release()
            raise
        if torch is None:
            return self
        try:
            route = _Route(torch)
            route.__enter__()
            self._route = route
        except BaseException:
            try:
                self._scope.end()
            finally:
                lock.release()
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.disabled:
            return False
        try:
            if self._route is not None:
                route, self._route = self._route, None
                route.__exit__(exc_type, exc, tb)
        finally:
            try:
                self._scope.end()
            finally:
                self.group._alloc_lock.release()
        return False


def _device_index(torch, device, g):
    """The CUDA index of empty()'s device= (an int, "cuda:k", a
    torch.device; "cuda" alone is the current device)."""
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    d = device if isinstance(device, torch.device) else torch.device(device)
    if d.type != "cuda":
        raise _lib.InvalidArgumentError(f"symmem.empty: device {device!r} is not a CUDA device but the world runs "
                                        f"the cuda backend (pool memory is on GPU {g.device})")
    return torch.cuda.current_device() if d.index is None else d.index


def empty(shape, dtype=None, group=None, device=None):
    """A torch.Tensor in symmem's pool, registered with group (default: the
    world); the counterpart of torch.distributed._symmetric_memory.empty.
    Every rank makes the same calls. cuda backend: on this rank's GPU, which
    must be torch's current device (device=, if given, must name it too);
    cpu backend: a CPU tensor over pool host memory."""
    torch = _torch()
    dtype = dtype or torch.float32
    g = _core._group(group)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if g.cuda:
        if device is not None and _device_index(torch, device, g) != g.device:
            raise _device_error("symmem.empty", f"device={device!r} was asked for", g)
        dev = _check_current_device(torch, g, "symmem.empty")
        if _core.in_scope(g):
            # An open scope of g (use_symmetric_memory's, or a bare Scope)
            # registers the block at its end; torch.empty must still come
            # from symmem's pool.
            with _Route(torch):
                return torch.empty(shape, dtype=dtype, device=dev if device is None else device)
        with use_symmetric_memory(g):
            return torch.empty(shape, dtype=dtype, device=dev if device is None else device)
    n = 1
    for d in shape:
        n *= d
    es = torch.empty((), dtype=dtype).element_size()
    arr = _core._alloc_registered(g, max(n * es, 1))
    return torch.frombuffer(arr, dtype=torch.uint8)[: n * es].view(dtype).view(shape)
