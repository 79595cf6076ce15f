"""The collectives' torch path (plain torch.Tensor on a cuda world) against
the general path, without torch or a GPU: tensors are faketorch's, the
group is a cuda group in name only, and the library call is a recorder, so
no memory is touched. For every collective: a valid call takes the torch
path and makes the library call the general path makes; every argument the
general path refuses is refused with the same exception and message, before
any library call. Run as a plain process (the Go test cmd/libsymmem runs
it)."""

import os
import sys
import types
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faketorch  # noqa: E402

torch = faketorch.install()

import symmem  # noqa: E402
from symmem import _core, _ops  # noqa: E402

F32, BF16, I64 = torch.float32, torch.bfloat16, torch.int64
HANDLE, SIZE, LEGACY = 77, 2, 0x1
A, B = 0x10000, 0x20000  # addresses
KERNEL = 5 << 24  # SYMMEM_ALGO_KERNEL in the call word


def group(cuda=True, size=SIZE, device=0):
    g = _core.Group.__new__(_core.Group)
    g.world = types.SimpleNamespace(backend="cuda" if cuda else "cpu")
    g.handle, g.name, g.ranks, g.rank, g.size, g.cuda, g.is_member = HANDLE, "fake", list(range(size)), 0, size, cuda, True
    g.device = device if cuda else -1
    return g


def at(addr, dev):
    """The fake address of a tensor at addr on device dev (-1: host): the
    device in bits 40-47, so the recorder can refuse memory of another
    device as the library does."""
    return addr | (dev & 0xFF) << 40


def device_of(addr):
    d = addr >> 40 & 0xFF
    return -1 if d == 0xFF else d


def T(addr, n, dt=F32, dev=0, contiguous=True):
    return torch.Tensor(at(addr, dev), n, dt, dev, contiguous)


# (public function, general path, its arguments in the general path's order)
OPS = {
    "all_gather": (symmem.all_gather_into_tensor, _ops._all_gather,
                   lambda a, kw: (a[0], a[1], kw.get("group"), kw.get("dtype"), kw.get("algo"), kw.get("stream"))),
    "reduce_scatter": (symmem.reduce_scatter_tensor, _ops._reduce_scatter,
                       lambda a, kw: (a[0], a[1], kw.get("op", 0), kw.get("group"), kw.get("dtype"), kw.get("algo"),
                                      kw.get("stream"))),
    "all_reduce": (symmem.all_reduce, _ops._all_reduce,
                   lambda a, kw: (a[0], kw.get("op", 0), kw.get("group"), kw.get("output"), kw.get("dtype"),
                                  kw.get("algo"), kw.get("stream"))),
    "broadcast": (symmem.broadcast, _ops._broadcast,
                  lambda a, kw: (a[0], kw.get("root", 0), kw.get("group"), kw.get("dtype"), kw.get("algo"),
                                 kw.get("stream"))),
}


class Recorder:
    """The library's collective entry: records each call; like the library, it
    refuses (SYMMEM_ERR_INVALID) a cuda call whose buffers are not memory of
    the group's device (device), else returns status. accepted: the calls
    it did not refuse."""

    def __init__(self, status=4, device=0):  # 4: SYMMEM_PATH_KERNEL
        self.calls, self.accepted, self.status, self.device = [], [], status, device
        self.cuda = True  # the group the calls come from runs the cuda backend

    def __call__(self, *c):  # group, call, in, out, count, stream
        self.calls.append(c)
        if self.cuda and any(a and device_of(a) != self.device for a in c[2:4]):
            return -1
        self.accepted.append(c)
        return self.status

    def clear(self):
        self.calls.clear()
        self.accepted.clear()


class TorchPath(unittest.TestCase):
    def setUp(self):
        self.rec = Recorder()
        for p in (mock.patch.object(_ops, "_collective", self.rec), mock.patch.dict(faketorch.current, clear=True)):
            p.start()
            self.addCleanup(p.stop)
        _ops.describe(T(A, 1), False)  # the first tensor loads torch (the fake) into the package

    def run_both(self, name, *args, fast=True, **kw):
        """Calls op's public function and its general path with the same
        arguments; checks both made the same library call (or raised the
        same error) and whether the torch path served the call."""
        public, general, order = OPS[name]
        outcomes = []
        g = kw.get("group")
        self.rec.cuda = g is None or g.cuda
        for f, a in ((public, args), (general, order(args, kw))):
            self.rec.clear()
            spy = mock.patch.object(_ops, general.__name__, wraps=general)
            with spy as s:
                try:
                    r = f(*a, **kw) if f is public else f(*a)
                    outcomes.append(("ok", r, list(self.rec.accepted)))
                except symmem.SymmemError as e:
                    outcomes.append((type(e), str(e), list(self.rec.accepted)))
                self.assertLessEqual(len(self.rec.calls), 1, "the library was called twice")
                if f is public and fast is not None:
                    self.assertEqual(s.called, not fast, f"{name}: torch path taken: want {fast}")
        self.assertEqual(outcomes[0], outcomes[1], f"{name}{args}{kw}: torch path vs general path")
        return outcomes[0]

    def ok(self, name, *args, want, fast=True, **kw):
        got = self.run_both(name, *args, fast=fast, **kw)
        self.assertEqual(got[0], "ok", got)
        self.assertIs(got[1], _ops._PATHS[4])  # the status the recorder returned, as the shared Path
        self.assertEqual(got[2], [want])

    def refused(self, name, *args, err=symmem.InvalidArgumentError, text, **kw):
        got = self.run_both(name, *args, fast=None, **kw)  # an algo= refusal comes from either path
        self.assertIs(got[0], err, got)
        self.assertIn(text, got[1])
        self.assertEqual(got[2], [], "the library ran the call")

    def test_valid_calls(self):
        g = group()
        n = 1024
        self.ok("all_reduce", T(A, n), group=g, output=T(B, n), want=(HANDLE, 2 | 7 << 8, A, B, n, LEGACY))
        self.ok("all_reduce", T(A, n, BF16), op="max", group=g, want=(HANDLE, 2 | 9 << 8 | 2 << 16, A, A, n, LEGACY))
        self.ok("all_reduce", T(A, n), op=4, group=g, algo="kernel", want=(HANDLE, 2 | 7 << 8 | 4 << 16 | KERNEL, A, A, n, LEGACY))
        self.ok("all_gather", T(B, n * SIZE), T(A, n), group=g, want=(HANDLE, 0 | 7 << 8, A, B, n, LEGACY))
        self.ok("reduce_scatter", T(B, n, I64), T(A, n * SIZE, I64), op="sum", group=g,
                want=(HANDLE, 1 | 4 << 8, A, B, n, LEGACY))
        self.ok("broadcast", T(A, n), root=1, group=g, want=(HANDLE, 3 | 7 << 8 | 1 << 32, 0, A, n, LEGACY))
        self.ok("broadcast", T(A, n), root=1, group=g, algo="kernel",
                want=(HANDLE, 3 | 7 << 8 | 1 << 32 | KERNEL, 0, A, n, LEGACY))

    def test_current_and_given_streams(self):
        g = group()
        faketorch.current[0] = 0x55
        self.ok("all_reduce", T(A, 8), group=g, want=(HANDLE, 2 | 7 << 8, A, A, 8, 0x55))
        faketorch.current[3] = 0x66
        self.rec.device = 3
        self.ok("all_reduce", T(A, 8, dev=3), group=group(device=3),
                want=(HANDLE, 2 | 7 << 8, at(A, 3), at(A, 3), 8, 0x66))
        self.rec.device = 0
        self.ok("all_gather", T(B, 16), T(A, 8), group=g, stream=0x77, want=(HANDLE, 7 << 8, A, B, 8, 0x77))
        self.ok("all_gather", T(B, 16), T(A, 8), group=g, stream=0, want=(HANDLE, 7 << 8, A, B, 8, LEGACY))

    def test_default_group_is_the_open_worlds(self):
        g = group()
        with mock.patch.object(_core, "_default_group", g):
            self.ok("all_reduce", T(A, 8), want=(HANDLE, 2 | 7 << 8, A, A, 8, LEGACY))
        self.rec.calls.clear()
        with self.assertRaises(symmem.ClosedError):
            symmem.all_reduce(T(A, 8))
        self.assertEqual(self.rec.calls, [])

    def test_what_the_torch_path_leaves_to_the_general_path(self):
        # Served, by the general path: CPU tensors on a cpu world, a tensor
        # subclass, dtype=.
        cpu = group(cuda=False)
        self.ok("all_reduce", T(A, 8, dev=-1), group=cpu, output=T(B, 8, dev=-1), fast=False,
                want=(HANDLE, 2 | 7 << 8, at(A, -1), at(B, -1), 8, 0))
        p = torch.Parameter(A, 8, F32)
        self.ok("all_reduce", p, group=group(), fast=False, want=(HANDLE, 2 | 7 << 8, A, A, 8, LEGACY))
        self.ok("broadcast", T(A, 8, BF16), group=group(), dtype="float16", fast=False,
                want=(HANDLE, 3 | 6 << 8, 0, A, 8, LEGACY))

    def test_refusals(self):
        g, n = group(), 64
        cases = [
            ("all_reduce", (T(A, n, contiguous=False),), {}, symmem.InvalidArgumentError, "not contiguous"),
            ("all_reduce", (T(A, n),), dict(output=T(B, n, contiguous=False)), symmem.InvalidArgumentError,
             "not contiguous"),
            ("all_reduce", (T(A, n, torch.complex64),), {}, symmem.NotSupportedError, "not supported"),
            ("all_reduce", (T(A, n),), dict(output=T(B, n, BF16)), symmem.InvalidArgumentError,
             "input is float32 but output is bfloat16"),
            ("all_reduce", (T(A, n),), dict(output=T(B, n + 1)), symmem.InvalidArgumentError, "output holds"),
            ("all_reduce", (T(A, n),), dict(output=T(B, n, dev=1)), symmem.InvalidArgumentError,
             "different devices"),
            ("all_reduce", (T(A, n, dev=-1),), {}, symmem.InvalidArgumentError, "host memory"),
            ("all_reduce", (T(A, n),), dict(op="prod2"), symmem.InvalidArgumentError, "unknown reduction"),
            ("all_reduce", (T(A, n),), dict(op=[0]), symmem.InvalidArgumentError, "unknown reduction"),
            # bools equal 0 and 1 (SUM and PROD's codes) but are no reduction
            ("all_reduce", (T(A, n),), dict(op=False), symmem.InvalidArgumentError, "unknown reduction False"),
            ("all_reduce", (T(A, n),), dict(op=True), symmem.InvalidArgumentError, "unknown reduction True"),
            ("all_reduce", (T(A, n),), dict(algo="fast"), symmem.InvalidArgumentError, "unknown algorithm"),
            ("all_reduce", (T(A, n),), dict(output=memoryview(bytearray(4 * n)).cast("f")),
             symmem.InvalidArgumentError, "different devices"),
            ("all_gather", (T(B, n * SIZE + 1), T(A, n)), {}, symmem.InvalidArgumentError, "output holds"),
            ("all_gather", (T(B, n * SIZE, I64), T(A, n)), {}, symmem.InvalidArgumentError, "input is float32"),
            ("all_gather", (T(B, n * SIZE), T(A, n, dev=1)), {}, symmem.InvalidArgumentError, "different devices"),
            ("all_gather", (T(B, n * SIZE), T(A, n, contiguous=False)), {}, symmem.InvalidArgumentError,
             "not contiguous"),
            ("all_gather", (T(B, n * SIZE, dev=-1), T(A, n, dev=-1)), {}, symmem.InvalidArgumentError, "host memory"),
            ("all_gather", (T(B, n * SIZE), T(A, n)), dict(algo=3), symmem.InvalidArgumentError, "unknown algorithm"),
            ("reduce_scatter", (T(B, n), T(A, n * SIZE - 1)), {}, symmem.InvalidArgumentError, "input holds"),
            ("reduce_scatter", (T(B, n), T(A, n * SIZE)), dict(op="xor"), symmem.InvalidArgumentError,
             "unknown reduction"),
            ("reduce_scatter", (T(B, n), T(A, n * SIZE)), dict(op=False), symmem.InvalidArgumentError,
             "unknown reduction False"),
            ("reduce_scatter", (T(B, n), T(A, n * SIZE)), dict(op=True), symmem.InvalidArgumentError,
             "unknown reduction True"),
            ("reduce_scatter", (T(B, n, contiguous=False), T(A, n * SIZE)), {}, symmem.InvalidArgumentError,
             "not contiguous"),
            ("reduce_scatter", (T(B, n, torch.complex64), T(A, n * SIZE, torch.complex64)), {},
             symmem.NotSupportedError, "not supported"),
            ("broadcast", (T(A, n),), dict(root=-1), symmem.InvalidArgumentError, "is not a group rank"),
            ("broadcast", (T(A, n),), dict(root=1 << 31), symmem.InvalidArgumentError, "is not a group rank"),
            ("broadcast", (T(A, n),), dict(root=True), symmem.InvalidArgumentError, "is not a group rank"),
            ("broadcast", (T(A, n, contiguous=False),), {}, symmem.InvalidArgumentError, "not contiguous"),
            ("broadcast", (T(A, n, dev=-1),), {}, symmem.InvalidArgumentError, "host memory"),
        ]
        for name, args, kw, err, text in cases:
            with self.subTest(name=name, args=args, kw=kw):
                self.refused(name, *args, group=g, err=err, text=text, **kw)
        # A CUDA tensor on a cpu world.
        self.refused("all_reduce", T(A, n), group=group(cuda=False), text="is a CUDA tensor")

    def test_torch_path_reads_no_device(self):
        # The current stream is the group's device's; the library checks
        # where the memory is. A tensor whose get_device() fails still runs.
        def boom():
            raise AssertionError("get_device() read on the torch path")
        g, n = group(), 8
        t, o, big = T(A, n), T(B, n), T(B, n * SIZE)
        for x in (t, o, big):
            x.get_device = boom
        faketorch.current[0] = 0x55
        for f, want in ((lambda: symmem.all_reduce(t, output=o, group=g), (HANDLE, 2 | 7 << 8, A, B, n, 0x55)),
                        (lambda: symmem.all_gather_into_tensor(big, t, group=g), (HANDLE, 7 << 8, A, B, n, 0x55)),
                        (lambda: symmem.reduce_scatter_tensor(t, big, group=g), (HANDLE, 1 | 7 << 8, B, A, n, 0x55)),
                        (lambda: symmem.broadcast(t, 1, group=g), (HANDLE, 3 | 7 << 8 | 1 << 32, 0, A, n, 0x55))):
            self.rec.clear()
            self.assertIs(f(), _ops._PATHS[4])
            self.assertEqual(self.rec.calls, [want])

    def test_refusal_with_no_wrong_tensor_raises_the_librarys_error(self):
        # Both tensors on GPU 1, the group's GPU 0: the general path's checks
        # pass (same device, CUDA memory), so the library's refusal is the
        # error, and the library is not called a second time.
        with self.assertRaises(symmem.InvalidArgumentError):
            symmem.all_reduce(T(A, 8, dev=1), output=T(B, 8, dev=1), group=group())
        self.assertEqual(len(self.rec.calls), 1)
        self.assertEqual(self.rec.accepted, [])

    def test_failed_status_raises_with_the_librarys_text(self):
        self.rec.status = -4  # SYMMEM_MISMATCH
        with self.assertRaises(symmem.MismatchError):
            symmem.all_reduce(T(A, 8), group=group())
        self.assertEqual(len(self.rec.calls), 1)


if __name__ == "__main__":
    unittest.main()
