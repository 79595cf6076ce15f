"""FSDP2 on symmem: PyTorch's fully_shard with its all-gathers and
reduce-scatters run by symmem, in symmem's pool.

    import symmem.fsdp
    fully_shard(layer) for each layer; fully_shard(model)   # as usual
    symmem.fsdp.apply(model)                                # the one added line

apply() gives every FSDP module of the model a SymmemAllGather and a
SymmemReduceScatter (FSDPModule.set_custom_all_gather /
set_custom_reduce_scatter, torch >= 2.11). FSDP then asks them for its
communication buffers (allocate: symmem's pool, registered with the symmem
group of the module's process group) and calls them on its own all-gather
and reduce-scatter streams (the collective runs on that current stream, on
the path auto picks, or algo=).

Process groups. A symmem group is created collectively over the whole
world, while FSDP's process groups are known rank by rank; so apply() (on
every rank, after fully_shard) exchanges the ranks of every FSDP process
group over torch.distributed and creates the symmem groups of their union in
the same order everywhere (map_process_groups does this for groups of your
own). A process group spanning the world is symmem's world group. The world
ranks must be torch.distributed's (the same launcher starts both: torchrun
or `symmem launch`), and a group's ranks ascending (symmem orders a group by
world rank). A call with a process group that was not mapped raises
InvalidArgumentError saying to call apply() or map_process_groups() on every
rank first.

Reductions: FSDP reduce-scatters with ReduceOp.AVG (float32, bfloat16) or
SUM (other dtypes, or set_force_sum_reduction_for_comms(True)), dividing
before or after itself. After set_gradient_divide_factor(f), a float32 or
bfloat16 reduce-scatter without forced sums asks for PREMUL_SUM(1/f) unless
f equals the size torch compares it with: the reduce-scatter (shard)
group's size in recent torch, the whole data-parallel size (shard x
replicate for HSDP) in older releases. symmem refuses PREMUL_SUM with an
error naming set_force_sum_reduction_for_comms(True) as the way out: with a
custom factor, set that too.

torch is imported when this module is first used, not when symmem (or
symmem.fsdp) is imported.
"""

import re
import zlib

from . import _core, _ops, _torch
from ._lib import InvalidArgumentError, NotSupportedError

__all__ = ["apply", "map_process_groups", "SymmemAllGather", "SymmemReduceScatter", "Work", "MIN_TORCH"]

MIN_TORCH = (2, 11)

_api = None  # torch's parts, once checked (_torch_api)
_classes = {}  # "SymmemAllGather"/"SymmemReduceScatter" -> the class, built on first use
# (world handle, ranks) -> the symmem Group created for them by map_process_groups.
_mapped = {}


def _version(v):
    """(major, minor) of a torch version string ("2.11.0+cu130", "2.12.0a0+git...")."""
    m = re.match(r"(\d+)(?:\.(\d+))?", str(v))
    return (int(m.group(1)), int(m.group(2) or 0)) if m else (0, 0)


class _API:
    __slots__ = ("torch", "dist", "FSDPModule", "AllGather", "ReduceScatter")


def _torch_api():
    """torch, torch.distributed, FSDPModule and FSDP2's AllGather and
    ReduceScatter interfaces; NotSupportedError before torch 2.11."""
    global _api
    if _api is not None:
        return _api
    torch = _torch._torch()
    v = getattr(torch, "__version__", "0")
    if _version(v) < MIN_TORCH:
        raise NotSupportedError(f"symmem.fsdp needs torch >= {MIN_TORCH[0]}.{MIN_TORCH[1]} (FSDP2's "
                                f"set_custom_all_gather / set_custom_reduce_scatter); this is torch {v}")
    try:
        import torch.distributed as dist
        from torch.distributed.fsdp import FSDPModule
        from torch.distributed.fsdp._fully_shard._fsdp_api import AllGather, ReduceScatter
    except ImportError as e:
        raise NotSupportedError(f"symmem.fsdp: torch {v} has no FSDP2 custom-collective interface ({e})") from None
    if not hasattr(FSDPModule, "set_custom_all_gather") or not hasattr(FSDPModule, "set_custom_reduce_scatter"):
        raise NotSupportedError(f"symmem.fsdp: torch {v}'s FSDPModule has no set_custom_all_gather / "
                                f"set_custom_reduce_scatter")
    a = _API()
    a.torch, a.dist, a.FSDPModule, a.AllGather, a.ReduceScatter = torch, dist, FSDPModule, AllGather, ReduceScatter
    _api = a
    return a


def _world():
    w = _core._world
    if w is None or not w.handle:
        w = _core.init()
    return w


def _check_world(w, dist):
    if not dist.is_initialized():
        raise InvalidArgumentError("symmem.fsdp: torch.distributed is not initialized: FSDP needs "
                                   "torch.distributed.init_process_group() first")
    r, n = dist.get_rank(), dist.get_world_size()
    if (w.rank, w.size) != (r, n):
        raise InvalidArgumentError(f"symmem.fsdp: symmem's world (rank {w.rank} of {w.size}) is not "
                                   f"torch.distributed's (rank {r} of {n}): start both from the same launcher "
                                   f"(torchrun, or symmem launch) so that their ranks agree")


def _ranks_of(pg, dist):
    """The world ranks of a torch process group, in its group-rank order,
    checked to be symmem's order (ascending)."""
    try:
        ranks = tuple(int(r) for r in dist.get_process_group_ranks(pg))
    except (RuntimeError, ValueError, TypeError, AttributeError) as e:
        raise InvalidArgumentError(f"symmem.fsdp: cannot read the ranks of process group {pg!r}: {e}") from None
    if list(ranks) != sorted(ranks) or len(set(ranks)) != len(ranks):
        raise InvalidArgumentError(f"symmem.fsdp: process group ranks {list(ranks)} are not ascending: symmem "
                                   f"orders a group's ranks by world rank, so its all-gather layout would "
                                   f"differ from torch's; build the device mesh with ascending ranks per group")
    return ranks


def _name(ranks):
    """The symmem group name of these ranks: the same on every rank."""
    return f"fsdp-{len(ranks)}-{ranks[0]}-{zlib.crc32(repr(ranks).encode()):08x}"


def _lookup(w, ranks):
    """The symmem group of these world ranks, or None where none was mapped."""
    if len(ranks) == w.size:
        return w.group
    g = _mapped.get((w.handle, ranks))
    if g is not None and g.handle:
        return g
    return None


def map_process_groups(process_groups):
    """Creates the symmem groups of torch process groups (collective over
    the whole world: every rank calls it, with its own process groups, in
    the same program order). The ranks of every rank's groups are exchanged
    with torch.distributed.all_gather_object, and the groups of their union
    are created in sorted order everywhere; groups already mapped, and the
    world, are not created again. Returns the symmem Group of each given
    process group."""
    api = _torch_api()
    dist = api.dist
    w = _world()
    _check_world(w, dist)
    mine = [_ranks_of(pg, dist) for pg in process_groups]
    everyone = [None] * w.size
    dist.all_gather_object(everyone, sorted(set(mine)))
    union = sorted({tuple(int(r) for r in ranks) for theirs in everyone for ranks in (theirs or ())})
    for ranks in union:
        if _lookup(w, ranks) is None:
            _mapped[(w.handle, ranks)] = w.new_group(ranks, name=_name(ranks))
    return [_lookup(w, ranks) for ranks in mine]


def _group_of(pg, default=None):
    """The symmem group for a process group FSDP passes (a symmem Group
    passes through; None is the world)."""
    if pg is None:
        return default or _world().group
    if isinstance(pg, _core.Group):
        return pg
    api = _torch_api()
    w = _world()
    _check_world(w, api.dist)
    ranks = _ranks_of(pg, api.dist)
    g = _lookup(w, ranks)
    if g is None and default is not None and tuple(default.ranks) == ranks:
        g = default
    if g is None:
        raise InvalidArgumentError(f"symmem.fsdp: no symmem group for the process group of ranks {list(ranks)}: "
                                   f"symmem groups are created collectively over the whole world, so map them "
                                   f"before training: call symmem.fsdp.apply(model) on every rank after "
                                   f"fully_shard (it maps every FSDP process group), or "
                                   f"symmem.fsdp.map_process_groups([...]) on every rank")
    if not g.is_member:
        raise InvalidArgumentError(f"symmem.fsdp: this rank ({w.rank}) is not in the process group of ranks "
                                   f"{list(ranks)} it was called with")
    return g


_SUM, _AVG = _ops.SUM, _ops.AVG


def _reduce_op(op):
    """symmem's reduction for FSDP's ReduceOp (SUM, AVG; a ReduceOp object
    carries its type in .op)."""
    name = getattr(getattr(op, "op", op), "name", None)
    if name == "SUM":
        return _SUM
    if name == "AVG":
        return _AVG
    if isinstance(op, str) and op.lower() in ("sum", "avg"):
        return _ops.OPS[op.lower()]
    what = name or repr(op)
    hint = (" (FSDP asks for it after set_gradient_divide_factor(f), f not the size of the group it reduces over)"
            if name == "PREMUL_SUM" else "")
    raise InvalidArgumentError(f"symmem.fsdp: reduce-scatter with ReduceOp {what}{hint}: symmem reduces "
                               f"FSDP's gradients with SUM and AVG only; call "
                               f"model.set_force_sum_reduction_for_comms(True) so that FSDP sums and divides "
                               f"itself")


class Work:
    """What a call with async_op=True returns. The collective is already
    queued on the stream that was current at the call; wait() makes the
    current stream wait for it (an event recorded after it), is_completed()
    asks that event. FSDP itself waits only on torch.distributed.Work
    objects and orders its streams with an event it records after the call,
    so for FSDP the returned object only says "async"."""

    __slots__ = ("_event",)

    def __init__(self, event=None):
        self._event = event

    def wait(self, timeout=None):
        if self._event is not None:
            _torch_api().torch.cuda.current_stream().wait_event(self._event)
        return True

    def is_completed(self):
        return self._event is None or bool(self._event.query())

    def synchronize(self):
        if self._event is not None:
            self._event.synchronize()


def _work(g):
    if not g.cuda:
        return Work()  # the cpu backend's collectives are done when they return
    ev = _torch_api().torch.cuda.Event()
    ev.record()
    return Work(ev)


class _Comm:
    """allocate() and the group handling the two collectives share."""

    def __init__(self, group=None, algo=None):
        if algo is not None and algo != "auto":
            _ops._algo(algo)  # an unknown name fails here, not at the first collective
        self.algo = None if algo == "auto" else algo
        self.group = group  # a symmem Group, a torch ProcessGroup, or None (the world)
        self._alloc_group = None
        self._groups = {}  # process group -> symmem Group
        _torch_api()
        if _ops._torch_dtypes is None:
            _ops._load_torch()  # the dtype table __call__ reads

    def _group_for_alloc(self):
        g = self._alloc_group
        if g is None or not g.handle:
            g = self._alloc_group = _group_of(self.group)
        return g

    def _call_group(self, pg):
        g = self._groups.get(pg)
        if g is None or not g.handle:
            bound = self.group if isinstance(self.group, _core.Group) else None
            g = self._groups[pg] = _group_of(pg, bound)
        return g

    def allocate(self, size, *, dtype, device):
        """A tensor of this size and dtype in symmem's pool, registered with
        the comm's symmem group (collective over its ranks: FSDP allocates the
        same sizes in the same order on every rank)."""
        g = self._group_for_alloc()
        shape = tuple(int(s) for s in size)
        kind = getattr(device, "type", None) or str(device).split(":")[0]
        if g.cuda:
            if kind != "cuda":
                raise InvalidArgumentError(f"symmem.fsdp: FSDP allocates on {device} but the world runs the cuda "
                                           f"backend (pool memory is on GPU {g.device})")
            index = getattr(device, "index", None)
            if index is not None and index != g.device:
                raise InvalidArgumentError(f"symmem.fsdp: FSDP allocates on {device} but this rank's symmem GPU is "
                                           f"{g.device}: call torch.cuda.set_device(LOCAL_RANK) before "
                                           f"symmem.init() and fully_shard")
        elif kind != "cpu":
            raise InvalidArgumentError(f"symmem.fsdp: FSDP allocates on {device} but the world runs the "
                                       f"{g.world.backend} backend, whose pool is host memory")
        return _torch.empty(shape, dtype, group=g, device=device)


class _AllGather(_Comm):
    """FSDP2's AllGather on symmem: allocate() from symmem's pool,
    __call__ runs symmem.all_gather_into_tensor on the current stream
    (FSDP's all-gather stream), in place where FSDP passes the input as this
    rank's slice of the output. Element types symmem has no dtype for
    (float8) are gathered as bytes.

    group: the symmem Group (or torch ProcessGroup) allocate() registers
    with (None: the world; apply() binds each module's own). algo: a path
    ("direct", "ce", "kernel", ...) instead of auto's choice."""

    def __call__(self, output_tensor, input_tensor, group, async_op=False):
        g = self._groups.get(group)
        if g is None or not g.handle:
            g = self._call_group(group)
        if input_tensor.dtype not in _ops._torch_dtypes:
            u8 = _api.torch.uint8
            input_tensor, output_tensor = input_tensor.view(u8), output_tensor.view(u8)
        _ops.all_gather_into_tensor(output_tensor, input_tensor, g, algo=self.algo)
        return _work(g) if async_op else None


class _ReduceScatter(_Comm):
    """FSDP2's ReduceScatter on symmem: allocate() from symmem's pool,
    __call__ runs symmem.reduce_scatter_tensor with FSDP's op (SUM or AVG)
    on the current stream (FSDP's reduce-scatter stream). group and algo as
    SymmemAllGather's."""

    def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
        code = _reduce_op(op)
        g = self._groups.get(group)
        if g is None or not g.handle:
            g = self._call_group(group)
        _ops.reduce_scatter_tensor(output_tensor, input_tensor, code, g, algo=self.algo)
        return _work(g) if async_op else None


def _build(name):
    """SymmemAllGather / SymmemReduceScatter: the implementation above with
    torch's interface class as a base (so that methods torch adds to it with
    defaults are there)."""
    c = _classes.get(name)
    if c is None:
        api = _torch_api()
        impl, base = {"SymmemAllGather": (_AllGather, api.AllGather),
                      "SymmemReduceScatter": (_ReduceScatter, api.ReduceScatter)}[name]
        c = type(name, (impl, base), {"__module__": __name__, "__doc__": impl.__doc__})
        _classes[name] = c
    return c


def __getattr__(name):
    if name in ("SymmemAllGather", "SymmemReduceScatter"):
        return _build(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _param_groups(m, version):
    """FSDP module m's parameter groups: torch's FSDP state holds them as
    _fsdp_param_groups (a list; torch with per-parameter meshes) or
    _fsdp_param_group (one, or None for a module with no parameters of its
    own). NotSupportedError where it has neither: guessing none would
    silently leave the module's groups unmapped."""
    try:
        state = m._get_fsdp_state()
    except (AttributeError, AssertionError) as e:
        raise NotSupportedError(f"symmem.fsdp: cannot read the FSDP state of {type(m).__name__} with torch "
                                f"{version} ({e})") from None
    groups = getattr(state, "_fsdp_param_groups", None)
    if groups is None:
        if not hasattr(state, "_fsdp_param_group"):
            raise NotSupportedError(f"symmem.fsdp: the FSDP state of {type(m).__name__} has neither "
                                    f"_fsdp_param_groups nor _fsdp_param_group in torch {version}: this "
                                    f"torch's FSDP2 is not one symmem.fsdp knows, so it cannot tell which "
                                    f"process groups the module communicates over")
        groups = [state._fsdp_param_group]
    return [pg for pg in groups if pg is not None]


def _module_groups(m, version="?"):
    """The process groups FSDP module m communicates over: its shard group
    first, then a post-forward group (reshard_after_forward=int); none for
    a module without parameters of its own."""
    out = []
    for pgroup in _param_groups(m, version):
        for info in (getattr(pgroup, "mesh_info", None), getattr(pgroup, "post_forward_mesh_info", None)):
            pg = getattr(info, "shard_process_group", None)
            if pg is not None and all(pg is not o for o in out):
                out.append(pg)
    return out


def apply(model, group=None, algo=None):
    """Runs the all-gathers and reduce-scatters of every FSDP module of
    model on symmem (torch >= 2.11): call it on every rank after
    fully_shard, before the first forward. Opens symmem's world if none is
    (symmem.init(): the launcher's environment), maps FSDP's process groups
    to symmem groups (collective, see the module doc), and sets a
    SymmemAllGather and a SymmemReduceScatter on each FSDP module, each
    allocating with the module's own group. group: one symmem Group or torch
    ProcessGroup every module allocates with instead (the collectives still
    run on the groups FSDP passes); algo: a path instead of auto's choice,
    for both collectives, or a dict naming it per collective
    ({"all_gather": "ce"}: copy engines for the all-gathers, auto for the
    reduce-scatters, which copy engines do not serve). Returns how many
    modules it set."""
    api = _torch_api()
    mods = [m for m in model.modules() if isinstance(m, api.FSDPModule)]
    if not mods:
        raise InvalidArgumentError(f"symmem.fsdp.apply: no FSDP module in {type(model).__name__}: call "
                                   f"torch.distributed.fsdp.fully_shard on its layers and on the model first")
    ag, rs = _build("SymmemAllGather"), _build("SymmemReduceScatter")
    ag_algo, rs_algo = _algos(algo)
    _world()
    version = getattr(api.torch, "__version__", "?")
    own = {id(m): _module_groups(m, version) for m in mods}
    pgs = [] if group is None or isinstance(group, _core.Group) else [group]
    for lst in own.values():
        pgs.extend(pg for pg in lst if all(pg is not o for o in pgs))
    map_process_groups(pgs)
    for m in mods:
        bind = group
        if bind is None and own[id(m)]:
            bind = own[id(m)][0]
        m.set_custom_all_gather(ag(bind, ag_algo))
        m.set_custom_reduce_scatter(rs(bind, rs_algo))
    return len(mods)


def _algos(algo):
    """apply's algo as (all-gather's, reduce-scatter's), each checked."""
    if isinstance(algo, dict):
        unknown = sorted(set(algo) - {"all_gather", "reduce_scatter"})
        if unknown:
            raise InvalidArgumentError(f"symmem.fsdp.apply: algo names {unknown}: the keys are "
                                       f"'all_gather' and 'reduce_scatter'")
        pair = (algo.get("all_gather"), algo.get("reduce_scatter"))
    else:
        pair = (algo, algo)
    for a in pair:
        if a is not None and a != "auto":
            _ops._algo(a)  # an unknown name fails here, not at the first collective
    return pair
