"""symmem.fsdp (FSDP2's custom all-gather / reduce-scatter) without torch or a
GPU: torch, torch.distributed and FSDP2 are faketorch's, the world is a
cuda world in name only, and the library calls are recorders (the
collective entry, as in test_torch_path.py, and the scope calls of the pool
path), so no memory is touched. Checks that apply() sets both collectives on
every FSDP module and no other, maps process groups to symmem groups the
same way on every rank, that allocate() goes to symmem's pool, that a call
reaches symmem's C call with FSDP's op, dtype, tensors and current stream,
and that bad inputs raise errors saying what to do. Run as a plain process
(the Go test cmd/libsymmem runs it)."""

import os
import subprocess
import sys
import threading
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faketorch  # noqa: E402

torch = faketorch.install()
dist = torch.distributed

import symmem  # noqa: E402
import symmem.fsdp as sfsdp  # noqa: E402
from symmem import _core, _lib, _ops, _torch  # noqa: E402

F32, BF16, U8, F8 = torch.float32, torch.bfloat16, torch.uint8, torch.float8_e4m3fn
KERNEL = 5 << 24  # SYMMEM_ALGO_KERNEL in the call word
LEGACY = 0x1


def make_group(w, ranks, handle, name):
    g = _core.Group.__new__(_core.Group)
    g.world, g.handle, g.name, g.ranks = w, handle, name, sorted(ranks)
    g.rank = g.ranks.index(w.rank) if w.rank in g.ranks else -1
    g.size, g.is_member, g.cuda, g.device = len(g.ranks), g.rank >= 0, w.backend == "cuda", w.device
    g._alloc_lock = threading.RLock()
    return g


class FakeWorld:
    """symmem's World: rank, size, the world group, and new_group recorded."""

    def __init__(self, rank=0, size=4, backend="cuda", device=0):
        self.handle, self.rank, self.size, self.backend = 1, rank, size, backend
        self.device = device if backend == "cuda" else -1
        self.group = make_group(self, range(size), 100, "world")
        self.created = []

    def new_group(self, ranks, name=None):
        g = make_group(self, ranks, 200 + len(self.created), name)
        self.created.append((tuple(ranks), name))
        return g


class Recorder:
    """The library's collective entry: records (group, call, in, out, count,
    stream) and returns SYMMEM_PATH_KERNEL."""

    def __init__(self):
        self.calls = []

    def __call__(self, *c):
        self.calls.append(c)
        return 4


class ScopeLib:
    """The library's scope calls, recorded; the rest of _core's lib."""

    def __init__(self):
        self.calls = []

    def symmem_scope_open(self, group, ref):
        self.calls.append(("open", group))
        ref._obj.value = 7000 + group
        return 0

    def symmem_scope_end(self, scope):
        self.calls.append(("end", scope))
        return 0


class SymInt:
    """A size FSDP may pass: converts with int()."""

    def __init__(self, v):
        self.v = v

    def __int__(self):
        return self.v


class Block(faketorch.Module):
    def __init__(self, pg=None, post_pg=None, fsdp=True, state="groups"):
        self.lin = faketorch.Module()
        if fsdp:
            self._fsdp_init(pg, post_pg, state)


class FSDPBlock(faketorch.FSDPModule, Block):
    pass


class Model(faketorch.Module):
    def __init__(self, *layers):
        self.layers = list(layers)
        self.head = faketorch.Module()


class Base(unittest.TestCase):
    def setUp(self):
        self.w = FakeWorld()
        self.rec = Recorder()
        faketorch.log.clear()
        faketorch.job.update(initialized=True, rank=0, size=4, peers={})
        for p in (mock.patch.object(_core, "_world", self.w), mock.patch.object(_core, "_default_group", self.w.group),
                  mock.patch.object(_ops, "_collective", self.rec), mock.patch.dict(faketorch.current, clear=True),
                  mock.patch.dict(sfsdp._mapped, clear=True)):
            p.start()
            self.addCleanup(p.stop)

    def assertRaisesText(self, err, text, f, *a, **kw):
        with self.assertRaises(err) as cm:
            f(*a, **kw)
        self.assertIn(text, str(cm.exception))
        return cm.exception


class Apply(Base):
    def test_sets_both_collectives_on_every_fsdp_module_only(self):
        world = dist.ProcessGroup(range(4))
        a, b, root = FSDPBlock(world), FSDPBlock(world), FSDPBlock(world)
        plain = Block(fsdp=False)
        model = Model(a, plain, b)
        model.root = root
        self.assertEqual(sfsdp.apply(model), 3)
        for m in (a, b, root):
            self.assertIsInstance(m.all_gather_comm, sfsdp.SymmemAllGather)
            self.assertIsInstance(m.reduce_scatter_comm, sfsdp.SymmemReduceScatter)
            # torch's interfaces are their bases: defaults torch adds there are inherited.
            self.assertIsInstance(m.all_gather_comm, faketorch.AllGather)
            self.assertIsInstance(m.reduce_scatter_comm, faketorch.ReduceScatter)
            self.assertIsNone(m.all_gather_comm.algo)
        self.assertFalse(hasattr(plain, "all_gather_comm"))
        self.assertIsNot(a.all_gather_comm, b.all_gather_comm)  # one per module
        self.assertEqual(self.w.created, [])  # the world's process group is the world group
        self.assertIs(a.all_gather_comm._group_for_alloc(), self.w.group)

    def test_algo_is_passed_and_checked(self):
        m = FSDPBlock(dist.ProcessGroup(range(4)))
        sfsdp.apply(Model(m), algo="kernel")
        self.assertEqual((m.all_gather_comm.algo, m.reduce_scatter_comm.algo), ("kernel", "kernel"))
        self.assertRaisesText(symmem.InvalidArgumentError, "unknown algorithm", sfsdp.apply, Model(m), algo="fast")

    def test_algo_per_collective(self):
        m = FSDPBlock(dist.ProcessGroup(range(4)))
        sfsdp.apply(Model(m), algo={"all_gather": "ce"})
        self.assertEqual((m.all_gather_comm.algo, m.reduce_scatter_comm.algo), ("ce", None))
        self.assertRaisesText(symmem.InvalidArgumentError, "unknown algorithm", sfsdp.apply, Model(m),
                              algo={"reduce_scatter": "fast"})
        self.assertRaisesText(symmem.InvalidArgumentError, "'all_gather' and 'reduce_scatter'", sfsdp.apply,
                              Model(m), algo={"allgather": "ce"})

    def test_subgroups_are_created_in_one_order_on_every_rank(self):
        # HSDP on 4 ranks: rank 0 shards over [0, 1]; with
        # reshard_after_forward=int a post-forward group [0] too. Rank 2
        # shards over [2, 3]: every rank creates every group, sorted.
        faketorch.job["peers"] = {1: [(0, 1)], 2: [(2, 3)], 3: [(2, 3)]}
        pg, post = dist.ProcessGroup([0, 1]), dist.ProcessGroup([0])
        a, b = FSDPBlock(pg, post), FSDPBlock(pg)
        sfsdp.apply(Model(a, b))
        self.assertEqual([r for r, _ in self.w.created], [(0,), (0, 1), (2, 3)])
        names = [n for _, n in self.w.created]
        self.assertEqual(len(set(names)), 3)
        self.assertEqual(names, [sfsdp._name(r) for r, _ in self.w.created])
        self.assertIn(("all_gather_object", [(0,), (0, 1)]), faketorch.log)
        g = a.all_gather_comm._group_for_alloc()
        self.assertEqual((g.ranks, g.is_member), ([0, 1], True))
        self.assertIs(b.reduce_scatter_comm._group_for_alloc(), g)
        # Mapped once: a second apply creates nothing new.
        sfsdp.apply(Model(a, b))
        self.assertEqual(len(self.w.created), 3)

    def test_param_group_attribute_of_either_name(self):
        # torch's FSDP state holds the parameter groups as _fsdp_param_groups
        # (a list) or _fsdp_param_group (one, or None for a module with no
        # parameters of its own): both are read.
        faketorch.job["peers"] = {1: [(0, 1)], 2: [(2, 3)], 3: [(2, 3)]}
        pg = dist.ProcessGroup([0, 1])
        plural, single = FSDPBlock(pg, state="groups"), FSDPBlock(pg, dist.ProcessGroup([0]), state="group")
        empty = FSDPBlock(pg, state="group-none")
        self.assertEqual(sfsdp.apply(Model(plural, single, empty)), 3)
        self.assertEqual([r for r, _ in self.w.created], [(0,), (0, 1), (2, 3)])
        g = plural.all_gather_comm._group_for_alloc()
        self.assertEqual(g.ranks, [0, 1])
        self.assertIs(single.all_gather_comm._group_for_alloc(), g)
        self.assertIs(empty.all_gather_comm._group_for_alloc(), self.w.group)  # no group of its own: the world

    def test_param_group_attribute_missing_is_an_error(self):
        # Neither name: not silently "no process groups" (which would leave
        # the module's groups unmapped and allocate with the world group).
        m = FSDPBlock(dist.ProcessGroup([0, 1]), state="neither")
        e = self.assertRaisesText(symmem.NotSupportedError, "_fsdp_param_group", sfsdp.apply, Model(m))
        self.assertIn(f"torch {torch.__version__}", str(e))
        self.assertIsNone(m.all_gather_comm)
        self.assertEqual(self.w.created, [])

    def test_explicit_group(self):
        g = self.w.new_group([0, 1], name="mine")
        m = FSDPBlock(dist.ProcessGroup([0, 1]))
        sfsdp.apply(Model(m), group=g)
        self.assertIs(m.all_gather_comm._group_for_alloc(), g)
        self.assertIn(("all_gather_object", [(0, 1)]), faketorch.log)  # FSDP's groups are still mapped

    def test_no_fsdp_module(self):
        self.assertRaisesText(symmem.InvalidArgumentError, "no FSDP module in Model", sfsdp.apply,
                              Model(Block(fsdp=False)))

    def test_old_torch(self):
        with mock.patch.object(sfsdp, "_api", None), mock.patch.object(torch, "__version__", "2.10.1+cu128"):
            self.assertRaisesText(symmem.NotSupportedError, "needs torch >= 2.11", sfsdp.apply,
                                  Model(FSDPBlock(dist.ProcessGroup(range(4)))))
        self.assertEqual(sfsdp._version("2.12.0a0+git1234"), (2, 12))
        self.assertEqual(sfsdp._version("2.11"), (2, 11))
        self.assertGreater(sfsdp._version("3.0.0"), sfsdp.MIN_TORCH)

    def test_world_disagrees(self):
        faketorch.job["rank"] = 1
        self.assertRaisesText(symmem.InvalidArgumentError, "same launcher", sfsdp.apply,
                              Model(FSDPBlock(dist.ProcessGroup(range(4)))))
        faketorch.job.update(rank=0, initialized=False)
        self.assertRaisesText(symmem.InvalidArgumentError, "init_process_group", sfsdp.apply,
                              Model(FSDPBlock(dist.ProcessGroup(range(4)))))

    def test_ranks_out_of_order(self):
        self.assertRaisesText(symmem.InvalidArgumentError, "not ascending", sfsdp.apply,
                              Model(FSDPBlock(dist.ProcessGroup([1, 0]))))

    def test_import_does_not_import_torch(self):
        code = ("import sys, symmem, symmem.fsdp; assert 'torch' not in sys.modules, 'torch imported'; "
                "print(symmem.fsdp.MIN_TORCH)")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "(2, 11)")


class Allocate(Base):
    def setUp(self):
        super().setUp()
        self.lib = ScopeLib()
        for p in (mock.patch.object(_core, "lib", self.lib), mock.patch.object(_torch, "_pool", None)):
            p.start()
            self.addCleanup(p.stop)

    def test_allocates_in_symmems_pool_registered_with_the_group(self):
        faketorch.job["peers"] = {1: [(0, 1)], 2: [(2, 3)], 3: [(2, 3)]}
        m = FSDPBlock(dist.ProcessGroup([0, 1]))
        sfsdp.apply(Model(m))
        g = m.all_gather_comm._group_for_alloc()
        faketorch.log.clear()
        t = m.all_gather_comm.allocate((SymInt(3), 8), dtype=BF16, device=torch.device("cuda", 0))
        self.assertEqual((t.numel(), t.dtype), (24, BF16))
        pool = _torch._pool
        self.assertIsInstance(pool, faketorch.MemPool)
        self.assertEqual(pool.allocator.args, (_lib.path, "symmem_torch_alloc", "symmem_torch_free"))
        empties = [e for e in faketorch.log if e[0] == "empty"]
        self.assertEqual(empties, [("empty", (3, 8), BF16, empties[0][3], pool)])  # inside the pool
        self.assertEqual(self.lib.calls, [("open", g.handle), ("end", 7000 + g.handle)])
        # The reduce-scatter's buffers too.
        self.lib.calls.clear()
        m.reduce_scatter_comm.allocate([16], dtype=F32, device=torch.device("cuda:0"))
        self.assertEqual(self.lib.calls, [("open", g.handle), ("end", 7000 + g.handle)])

    def empties(self):
        return [e for e in faketorch.log if e[0] == "empty"]

    def test_empty_device_zero_is_a_device(self):
        # device=0 is GPU 0, not "not given": on a world whose GPU is 1 it is
        # refused, not replaced by the current device.
        w1 = FakeWorld(device=1)
        with mock.patch.object(torch.cuda, "current_device", lambda: 1):
            self.assertRaisesText(symmem.InvalidArgumentError, "device=0 was asked for", _torch.empty, (4,), F32,
                                  group=w1.group, device=0)
            self.assertEqual((self.empties(), self.lib.calls), ([], []))
            _torch.empty((4,), F32, group=w1.group, device=1)
            _torch.empty((4,), F32, group=w1.group, device="cuda:1")
            _torch.empty((4,), F32, group=w1.group, device=torch.device("cuda"))
        self.assertEqual([e[3] for e in self.empties()[:2]], [1, "cuda:1"])
        self.assertEqual(len(self.empties()), 3)
        _torch.empty((4,), F32, device=0)  # the world's GPU 0, current
        self.assertEqual(self.empties()[-1][3], 0)

    def test_current_device_must_be_the_groups_gpu(self):
        # torch.cuda.use_mem_pool routes the current device's allocations,
        # and symmem's pool is memory of the group's GPU: another current
        # device is refused, saying to call torch.cuda.set_device.
        with mock.patch.object(torch.cuda, "current_device", lambda: 1):
            e = self.assertRaisesText(symmem.InvalidArgumentError, "torch.cuda.set_device", _torch.empty, (4,), F32)
            self.assertIn("current CUDA device is 1 but this rank's symmem GPU is 0", str(e))
            self.assertRaisesText(symmem.InvalidArgumentError, "symmem GPU is 0", _torch.empty, (4,), F32, device=0)
            with self.assertRaises(symmem.InvalidArgumentError) as cm:
                with symmem.use_symmetric_memory(self.w.group):
                    pass
            self.assertIn("torch.cuda.set_device", str(cm.exception))
            # FSDP's allocate on the right device with the wrong current one.
            c = sfsdp.SymmemAllGather()
            self.assertRaisesText(symmem.InvalidArgumentError, "current CUDA device is 1", c.allocate, (4,),
                                  dtype=F32, device=torch.device("cuda", 0))
        self.assertEqual((self.empties(), self.lib.calls), ([], []))
        self.assertFalse(_core.in_scope(self.w.group))

    def test_empty_inside_an_open_scope_comes_from_the_pool(self):
        # A bare Scope registers at its end; empty() inside it must still
        # allocate from symmem's MemPool, not torch's own allocator.
        g = self.w.group
        sc = symmem.Scope(g)
        symmem.empty(16)
        sc.end()
        pool = _torch._pool
        self.assertIsInstance(pool, faketorch.MemPool)
        self.assertEqual([e[4] for e in self.empties()], [pool])
        self.assertEqual(self.lib.calls, [("open", g.handle), ("end", 7000 + g.handle)])  # the bare scope only
        # Inside use_symmetric_memory: routed once, whatever the nesting.
        faketorch.log.clear()
        with symmem.use_symmetric_memory(g):
            with symmem.use_symmetric_memory(g):
                symmem.empty(16)
            symmem.empty(16)
        self.assertEqual([e[4] for e in self.empties()], [pool, pool])
        self.assertEqual([e for e in faketorch.log if e[0] == "use_mem_pool"],
                         [("use_mem_pool", pool, "enter"), ("use_mem_pool", pool, "exit")])
        self.assertEqual(faketorch._pools, [])

    def test_threads_scopes_of_one_group_do_not_nest(self):
        # use_symmetric_memory holds the group's lock from enter to exit:
        # another thread's waits instead of opening a scope inside it (the
        # library keeps one scope stack per group).
        g, a_in, b_in, out = self.w.group, threading.Event(), threading.Event(), {}

        def a():
            with symmem.use_symmetric_memory(g):
                a_in.set()
                out["b entered while a was in"] = b_in.wait(0.3)
                _torch.empty((4,), F32, group=g)

        def b():
            a_in.wait(10)
            with symmem.use_symmetric_memory(g):
                b_in.set()
                _torch.empty((4,), F32, group=g)

        ts = [threading.Thread(target=a), threading.Thread(target=b)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        self.assertEqual(out, {"b entered while a was in": False})
        self.assertEqual([c[0] for c in self.lib.calls], ["open", "end", "open", "end"])
        self.assertEqual(len(self.empties()), 2)

    def test_wrong_device(self):
        c = sfsdp.SymmemAllGather()
        self.assertRaisesText(symmem.InvalidArgumentError, "set_device", c.allocate, (4,), dtype=F32,
                              device=torch.device("cuda", 3))
        self.assertRaisesText(symmem.InvalidArgumentError, "cuda backend", c.allocate, (4,), dtype=F32,
                              device=torch.device("cpu"))
        self.assertEqual(self.lib.calls, [])


class Calls(Base):
    def comms(self, pg=None, algo=None):
        pg = pg or dist.ProcessGroup(range(4))
        m = FSDPBlock(pg)
        sfsdp.apply(Model(m), algo=algo)
        return m.all_gather_comm, m.reduce_scatter_comm, pg

    def test_all_gather_in_place_on_the_current_stream(self):
        ag, _, pg = self.comms()
        n = 256
        out = torch.Tensor(0x10000, 4 * n, BF16)
        inp = torch.Tensor(0x10000 + 2 * n * pg.rank(), n, BF16)  # this rank's slice of out
        faketorch.current[0] = 0x55  # FSDP's all-gather stream is current
        self.assertIsNone(ag(output_tensor=out, input_tensor=inp, group=pg, async_op=False))
        self.assertEqual(self.rec.calls, [(100, 0 | 9 << 8, inp.data_ptr(), out.data_ptr(), n, 0x55)])

    def test_all_gather_default_stream_and_algo(self):
        ag, _, pg = self.comms(algo="kernel")
        ag(torch.Tensor(0x20000, 64, F32), torch.Tensor(0x10000, 16, F32), pg)
        self.assertEqual(self.rec.calls, [(100, 7 << 8 | KERNEL, 0x10000, 0x20000, 16, LEGACY)])

    def test_all_gather_of_a_type_without_symmem_dtype_moves_bytes(self):
        ag, _, pg = self.comms()
        ag(torch.Tensor(0x20000, 64, F8), torch.Tensor(0x10000, 16, F8), pg)
        ag(torch.Tensor(0x20000, 64, U8), torch.Tensor(0x10000, 16, U8), pg)
        self.assertEqual(self.rec.calls, [(100, 1 << 8, 0x10000, 0x20000, 16, LEGACY)] * 2)

    def test_reduce_scatter_ops(self):
        _, rs, pg = self.comms()
        out, inp = torch.Tensor(0x20000, 32, F32), torch.Tensor(0x10000, 128, F32)
        faketorch.current[0] = 0x77
        for op, code in ((dist.ReduceOp.AVG, 4), (dist.ReduceOp.SUM, 0), (dist.ReduceOp(dist.ReduceOp.AVG), 4),
                         (dist.ReduceOp(dist.ReduceOp.SUM), 0)):
            self.rec.calls.clear()
            self.assertIsNone(rs(output_tensor=out, input_tensor=inp, group=pg, op=op))
            self.assertEqual(self.rec.calls, [(100, 1 | 7 << 8 | code << 16, 0x10000, 0x20000, 32, 0x77)])
        self.rec.calls.clear()
        rs(torch.Tensor(0x20000, 32, BF16), torch.Tensor(0x10000, 128, BF16), pg, dist.ReduceOp.AVG)
        self.assertEqual(self.rec.calls, [(100, 1 | 9 << 8 | 4 << 16, 0x10000, 0x20000, 32, 0x77)])

    def test_reduce_scatter_refuses_other_ops(self):
        _, rs, pg = self.comms()
        out, inp = torch.Tensor(0x20000, 32, F32), torch.Tensor(0x10000, 128, F32)
        e = self.assertRaisesText(symmem.InvalidArgumentError, "set_force_sum_reduction_for_comms(True)", rs,
                                  out, inp, pg, dist.ReduceOp(dist.ReduceOp.PREMUL_SUM, 0.25))
        self.assertIn("PREMUL_SUM", str(e))
        self.assertIn("set_gradient_divide_factor", str(e))
        for op in (dist.ReduceOp.MAX, dist.ReduceOp.PRODUCT, None):
            self.assertRaisesText(symmem.InvalidArgumentError, "SUM and AVG only", rs, out, inp, pg, op)
        self.assertEqual(self.rec.calls, [])

    def test_async_op_returns_work_on_the_stream(self):
        ag, rs, pg = self.comms()
        faketorch.log.clear()
        w = ag(torch.Tensor(0x20000, 64, F32), torch.Tensor(0x10000, 16, F32), pg, async_op=True)
        self.assertIsInstance(w, sfsdp.Work)
        self.assertEqual(faketorch.log, [("event", "record")])  # recorded after the call was queued
        self.assertTrue(w.wait())
        self.assertEqual(faketorch.log[-1], ("wait_event", w._event))
        self.assertTrue(w.is_completed())
        w = rs(torch.Tensor(0x20000, 16, F32), torch.Tensor(0x10000, 64, F32), pg, dist.ReduceOp.SUM, async_op=True)
        self.assertIsInstance(w, sfsdp.Work)
        self.assertEqual(len(self.rec.calls), 2)

    def test_sub_group_calls_run_on_the_mapped_group(self):
        faketorch.job["peers"] = {1: [(0, 1)], 2: [(2, 3)], 3: [(2, 3)]}
        ag, rs, pg = self.comms(dist.ProcessGroup([0, 1]))
        rs(torch.Tensor(0x20000, 16, F32), torch.Tensor(0x10000, 32, F32), pg, dist.ReduceOp.AVG)
        g = sfsdp._mapped[(1, (0, 1))]
        self.assertEqual(self.rec.calls, [(g.handle, 1 | 7 << 8 | 4 << 16, 0x10000, 0x20000, 16, LEGACY)])
        # A process group equal to the world's, met first at a call, is the world group.
        self.rec.calls.clear()
        ag(torch.Tensor(0x20000, 64, F32), torch.Tensor(0x10000, 16, F32), dist.ProcessGroup(range(4)))
        self.assertEqual(self.rec.calls[0][0], 100)

    def test_unmapped_group_says_what_to_do(self):
        ag, _, _ = self.comms()
        e = self.assertRaisesText(symmem.InvalidArgumentError, "no symmem group for the process group of ranks [0, 2]",
                                  ag, torch.Tensor(0x20000, 32, F32), torch.Tensor(0x10000, 16, F32),
                                  dist.ProcessGroup([0, 2]))
        self.assertIn("symmem.fsdp.apply(model) on every rank", str(e))
        self.assertEqual(self.rec.calls, [])

    def test_not_a_member(self):
        faketorch.job["peers"] = {2: [(2, 3)], 3: [(2, 3)]}
        sfsdp.map_process_groups([dist.ProcessGroup([0, 1])])
        ag = sfsdp.SymmemAllGather()
        self.assertRaisesText(symmem.InvalidArgumentError, "not in the process group", ag,
                              torch.Tensor(0x20000, 32, F32), torch.Tensor(0x10000, 16, F32),
                              dist.ProcessGroup([2, 3]))

    def test_bad_tensors_raise_symmems_errors(self):
        ag, rs, pg = self.comms()
        self.assertRaisesText(symmem.InvalidArgumentError, "output holds", ag, torch.Tensor(0x20000, 63, F32),
                              torch.Tensor(0x10000, 16, F32), pg)
        self.assertRaisesText(symmem.InvalidArgumentError, "input is float32 but output is bfloat16", rs,
                              torch.Tensor(0x20000, 16, BF16), torch.Tensor(0x10000, 64, F32), pg, dist.ReduceOp.SUM)
        self.assertRaisesText(symmem.NotSupportedError, "not supported", rs, torch.Tensor(0x20000, 16, F8),
                              torch.Tensor(0x10000, 64, F8), pg, dist.ReduceOp.SUM)
        self.assertEqual(self.rec.calls, [])

    def test_constructor_checks_algo(self):
        self.assertRaisesText(symmem.InvalidArgumentError, "unknown algorithm", sfsdp.SymmemAllGather, algo="x")
        self.assertIsNone(sfsdp.SymmemReduceScatter(algo="auto").algo)


if __name__ == "__main__":
    unittest.main()
