"""A stand-in for the few parts of torch that symmem's collectives read, for
tests and benchmarks of the package's torch path on machines without torch
(the build machine and CI have the standard library only).

It is pure logic: a Tensor holds an address, a count, a dtype, a device and
contiguity, nothing else; no memory is touched, so it is used with the
library call replaced (a recorder, a no-op). Its reads are C-level callables
(bound methods of int and bool), like torch's, but cheaper than torch's own
(which check for __torch_function__ overrides): a benchmark on it measures
the package's Python work with the floor of a tensor read, not torch's cost.

    torch = faketorch.install()      # before the first tensor reaches symmem
    t = torch.Tensor(0x1000, 1024, torch.float32)

For symmem.fsdp it also stands in for torch.distributed (process groups by
ranks, ReduceOp, all_gather_object), FSDP2's FSDPModule and its AllGather /
ReduceScatter interfaces, nn.Module's module tree, torch.empty and the few
torch.cuda calls of the MemPool path (recorded in `log`).
"""

import abc
import collections
import contextlib
import enum
import itertools
import sys
import types

_SIZES = {"int8": 1, "uint8": 1, "int32": 4, "int64": 8, "float16": 2, "float32": 4, "float64": 8, "bfloat16": 2,
          "complex64": 8, "float8_e4m3fn": 1}


class dtype:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "torch." + self.name


class Tensor:
    # symmem recognises a torch type by its module and a data_ptr attribute.
    data_ptr = None

    def __init__(self, addr, numel, dt, device=0, contiguous=True):
        self.data_ptr = addr.__int__
        self.numel = numel.__int__
        self.get_device = device.__int__
        self.is_contiguous = contiguous.__bool__
        self.dtype = dt
        self.nbytes = numel * _SIZES[dt.name]

    def view(self, dt):
        """The same memory as another dtype (torch's Tensor.view(dtype))."""
        return Tensor(self.data_ptr(), self.nbytes // _SIZES[dt.name], dt, self.get_device(), self.is_contiguous())

    def __repr__(self):
        return f"Tensor({self.data_ptr():#x}, {self.numel()}, {self.dtype}, device={self.get_device()})"


Tensor.__module__ = "torch"


class Parameter(Tensor):
    """A subclass, as torch.nn.Parameter is one."""


Parameter.__module__ = "torch.nn.parameter"

# The current raw stream per device (torch._C._cuda_getCurrentRawStream):
# 0 is the default (legacy) stream; tests set another value for a side stream.
current = collections.defaultdict(int)


# What the fake torch.cuda, torch.empty and torch.distributed calls did, in
# order: ("empty", shape, dtype, device, pool or None), ("use_mem_pool", pool,
# "enter"/"exit"), ("event", "record"), ("wait_event", event), ...
log = []
# The job torch.distributed sees: this rank, the world size, and what
# all_gather_object returns for the other ranks (rank -> object; by default
# the caller's own object).
job = {"initialized": True, "rank": 0, "size": 2, "peers": {}}
_addrs = itertools.count(0x100000, 0x100000)


class device:
    def __init__(self, type, index=None):
        if ":" in type:
            type, index = type.split(":")[0], int(type.split(":")[1])
        self.type, self.index = type, index

    def __repr__(self):
        return f"device(type={self.type!r}{'' if self.index is None else f', index={self.index}'})"


def empty(*shape, dtype=None, device=None):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    n = 1
    for d in shape:
        n *= d
    log.append(("empty", tuple(shape), dtype, device, _pools[-1] if _pools else None))
    dev = getattr(device, "index", device)
    return Tensor(next(_addrs), n, dtype, dev if isinstance(dev, int) else 0)


_pools = []


class Event:
    def record(self, stream=None):
        log.append(("event", "record"))

    def query(self):
        return True

    def synchronize(self):
        log.append(("event", "synchronize"))


class Stream:
    def wait_event(self, ev):
        log.append(("wait_event", ev))


class CUDAPluggableAllocator:
    def __init__(self, path, alloc_fn, free_fn):
        self.args = (path, alloc_fn, free_fn)

    def allocator(self):
        return self


class MemPool:
    def __init__(self, allocator):
        self.allocator = allocator


@contextlib.contextmanager
def use_mem_pool(pool):
    log.append(("use_mem_pool", pool, "enter"))
    _pools.append(pool)
    try:
        yield
    finally:
        _pools.pop()
        log.append(("use_mem_pool", pool, "exit"))


class RedOpType(enum.IntEnum):
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8


class ReduceOp:
    """torch's ReduceOp: its constants are RedOpType values; an instance
    (ReduceOp.PREMUL_SUM(factor) makes one) carries its type in .op."""
    RedOpType = RedOpType

    def __init__(self, op, factor=None):
        self.op, self.factor = op, factor


for _o in RedOpType:
    setattr(ReduceOp, _o.name, _o)


class ProcessGroup:
    def __init__(self, ranks):
        self.ranks = list(ranks)

    def size(self):
        return len(self.ranks)

    def rank(self):
        return self.ranks.index(job["rank"]) if job["rank"] in self.ranks else -1

    def __repr__(self):
        return f"ProcessGroup({self.ranks})"


def all_gather_object(out, obj, group=None):
    log.append(("all_gather_object", obj))
    for i in range(len(out)):
        out[i] = obj if i == job["rank"] else job["peers"].get(i, obj)


class Module:
    """nn.Module's module tree: children are the Module attributes and the
    Modules in list attributes, in assignment order."""

    def modules(self):
        yield self
        for v in list(vars(self).values()):
            for c in (v if isinstance(v, list) else [v]):
                if isinstance(c, Module):
                    yield from c.modules()


class FSDPModule:
    """FSDP2's FSDPModule: records the custom collectives set on it; its
    state has one parameter group over pg (post_pg: the post-forward
    group of reshard_after_forward=int). state names the attribute that
    holds it, as torch versions differ: "groups" (_fsdp_param_groups, a
    list: torch with per-parameter meshes), "group" (_fsdp_param_group,
    the group or None), "group-none" (_fsdp_param_group = None: a module
    with no parameters of its own), "neither" (a state with no such
    attribute: a torch symmem.fsdp does not know)."""

    def _fsdp_init(self, pg, post_pg=None, state="groups"):
        info = types.SimpleNamespace(shard_process_group=pg)
        post = None if post_pg is None else types.SimpleNamespace(shard_process_group=post_pg)
        group = types.SimpleNamespace(mesh_info=info, post_forward_mesh_info=post)
        self._state = types.SimpleNamespace(**{
            "groups": {"_fsdp_param_groups": [group]}, "group": {"_fsdp_param_group": group},
            "group-none": {"_fsdp_param_group": None}, "neither": {}}[state])
        self.all_gather_comm = self.reduce_scatter_comm = None

    def _get_fsdp_state(self):
        return self._state

    def set_custom_all_gather(self, comm):
        self.all_gather_comm = comm

    def set_custom_reduce_scatter(self, comm):
        self.reduce_scatter_comm = comm


class AllGather(abc.ABC):
    @abc.abstractmethod
    def allocate(self, size, *, dtype, device): ...

    @abc.abstractmethod
    def __call__(self, output_tensor, input_tensor, group, async_op=False): ...


class ReduceScatter(abc.ABC):
    @abc.abstractmethod
    def allocate(self, size, *, dtype, device): ...

    @abc.abstractmethod
    def __call__(self, output_tensor, input_tensor, group, op, async_op=False): ...


def _module(name, **attrs):
    m = types.ModuleType(name)
    for k, v in attrs.items():
        setattr(m, k, v)
    sys.modules[name] = m
    return m


def install(version="2.11.0"):
    """Puts the fake module in sys.modules as torch and returns it."""
    m = _module("torch", __version__=version, Tensor=Tensor, Parameter=Parameter, device=device, empty=empty)
    for name in _SIZES:
        setattr(m, name, dtype(name))
    m._C = types.SimpleNamespace(_cuda_getCurrentRawStream=current.__getitem__)
    m.cuda = types.SimpleNamespace(
        current_device=lambda: 0, is_current_stream_capturing=lambda: False, Event=Event,
        current_stream=lambda device=None: Stream(), use_mem_pool=use_mem_pool, MemPool=MemPool,
        memory=types.SimpleNamespace(CUDAPluggableAllocator=CUDAPluggableAllocator))
    m.nn = _module("torch.nn", Module=Module)
    m.distributed = _module(
        "torch.distributed", ProcessGroup=ProcessGroup, ReduceOp=ReduceOp, all_gather_object=all_gather_object,
        is_initialized=lambda: job["initialized"], get_rank=lambda group=None: job["rank"],
        get_world_size=lambda group=None: job["size"], get_process_group_ranks=lambda pg: list(pg.ranks))
    m.distributed.fsdp = _module("torch.distributed.fsdp", FSDPModule=FSDPModule)
    m.distributed.fsdp._fully_shard = _module("torch.distributed.fsdp._fully_shard")
    m.distributed.fsdp._fully_shard._fsdp_api = _module("torch.distributed.fsdp._fully_shard._fsdp_api",
                                                         AllGather=AllGather, ReduceScatter=ReduceScatter)
    return m
