"""PyTorch parts: symmem's pool as a CUDAPluggableAllocator in a MemPool,
the use_symmetric_memory context, and empty(). torch is imported here only,
when first needed."""

import contextlib

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


class use_symmetric_memory:
    """Inside, allocations of this thread come from symmem's pool: CUDA
    tensors through the MemPool (cuda backend), empty()/empty_buffer() on the
    cpu backend. At exit the new pool segments are registered with the group
    (collective over its ranks, verified: every rank must allocate the same
    sizes in the same order). During CUDA graph capture the graph's pool is
    paused while inside (set_graph_pool_id first)."""

    def __init__(self, group=None, disabled=False):
        self.group = _core._group(group)
        self.disabled = disabled
        self._scope = self._pool_ctx = None
        self._capture = False

    def __enter__(self):
        if self.disabled:
            return self
        self._scope = _core.Scope(self.group)
        if not self.group.cuda:
            return self
        try:
            torch = _torch()
            self._device = torch.cuda.current_device()
            self._capture = torch.cuda.is_current_stream_capturing()
            if self._capture:
                if _graph_pool_id is None:
                    raise _lib.InvalidArgumentError(
                        "symmem.use_symmetric_memory inside CUDA graph capture: call "
                        "symmem.set_graph_pool_id(graph.pool()) first so the graph's pool can be paused")
                torch._C._cuda_endAllocateToPool(self._device, _graph_pool_id)
            self._pool_ctx = torch.cuda.use_mem_pool(mem_pool())
            self._pool_ctx.__enter__()
        except BaseException:
            self._scope.end()
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.disabled:
            return False
        try:
            if self._pool_ctx is not None:
                self._pool_ctx.__exit__(exc_type, exc, tb)
                self._pool_ctx = None
            if self._capture:
                _torch()._C._cuda_beginAllocateCurrentThreadToPool(self._device, _graph_pool_id)
        finally:
            self._scope.end()
        return False


def empty(shape, dtype=None, group=None, device=None):
    """A torch.Tensor in symmem's pool, registered with group (default: the
    world); the counterpart of torch.distributed._symmetric_memory.empty.
    Every rank makes the same calls. cuda backend: on the current CUDA
    device; cpu backend: a CPU tensor over pool host memory."""
    torch = _torch()
    dtype = dtype or torch.float32
    g = _core._group(group)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if g.cuda:
        with use_symmetric_memory(g) if not _core.in_scope(g) else contextlib.nullcontext():
            return torch.empty(shape, dtype=dtype, device=device or torch.cuda.current_device())
    n = 1
    for d in shape:
        n *= d
    es = torch.empty((), dtype=dtype).element_size()
    arr = _core._alloc_registered(g, max(n * es, 1))
    return torch.frombuffer(arr, dtype=torch.uint8)[: n * es].view(dtype).view(shape)
