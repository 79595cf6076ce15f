"""symmem's Python API on the CPU backend, with the standard library only.

Every rank runs this module (the Go test cmd/libsymmem starts it with
`symmem launch -n 2` and `-n 3`): the tests are collective and run in the
same order everywhere. Inputs are fresh random data from a seed rank 0
broadcasts; each rank recomputes every rank's input for the reference.
SYMMEM_TEST_CHECKED=1 runs the world in checked mode (argument
mismatches of collectives raise on every rank)."""

import array
import ctypes
import mmap
import os
import random
import struct
import sys
import threading
import unittest

import symmem
from symmem import _core, _lib

W = None
CHECKED = os.environ.get("SYMMEM_TEST_CHECKED") == "1"


def setUpModule():
    global W
    W = symmem.init(backend="cpu", timeout=float(os.environ.get("SYMMEM_TEST_TIMEOUT", "20")), checked=CHECKED)


def tearDownModule():
    W.close()


def shared_seed():
    s = array.array("q", [random.getrandbits(62) if W.rank == 0 else 0])
    symmem.broadcast(s, 0)
    return s[0]


# dtype name -> (struct/array code, 16-bit float packer or None)
def bf16_bits(v):
    return struct.unpack("<I", struct.pack("<f", v))[0] >> 16


def bf16_value(b):
    return struct.unpack("<f", struct.pack("<I", b << 16))[0]


def f16_bits(v):
    return struct.unpack("<H", struct.pack("<e", v))[0]


def f16_value(b):
    return struct.unpack("<e", struct.pack("<H", b))[0]


# name: (array typecode, to stored word, from stored word, value from a random
# byte, tolerance). Values are small multiples of powers of two: exact in
# every type, so sums, max and min compare exactly and avg within rounding.
DTYPES = {
    "float32": ("f", None, None, lambda b: (b - 128) / 32, 1e-6),
    "float64": ("d", None, None, lambda b: (b - 128) / 32, 1e-12),
    "int8": ("b", None, None, lambda b: b % 17 - 8, 0),
    "uint8": ("B", None, None, lambda b: b % 16, 0),
    "int32": ("i", None, None, lambda b: (b - 128) * 7919, 0),
    "int64": ("q", None, None, lambda b: (b - 128) * 10**12, 0),
    "float16": ("H", f16_bits, f16_value, lambda b: (b - 128) / 16, 1e-3),
    "bfloat16": ("H", bf16_bits, bf16_value, lambda b: (b - 128) / 16, 1e-2),
}
INTS = {"int8", "uint8", "int32", "int64"}


def gen(seed, rank, n, dt, tag):
    code, enc, _, rnd, _ = DTYPES[dt]
    vals = [rnd(b) for b in random.Random(f"{seed}/{rank}/{tag}").randbytes(n)]
    return array.array(code, [enc(v) for v in vals] if enc else vals)


def values(buf, dt):
    dec = DTYPES[dt][2]
    return [dec(v) for v in buf] if dec else list(buf)


def reduce_ref(cols, op, dt):
    if op == "sum":
        return [sum(c) for c in cols]
    if op == "max":
        return [max(c) for c in cols]
    if op == "min":
        return [min(c) for c in cols]
    if dt in INTS:  # avg: the integer sum divided, truncated toward zero
        return [int(sum(c) / len(c)) for c in cols]
    return [sum(c) / len(c) for c in cols]


def kw(dt):
    return {"dtype": dt} if DTYPES[dt][1] else {}


class Base(unittest.TestCase):
    def assertValues(self, got, want, dt, what):
        tol = DTYPES[dt][4]
        self.assertEqual(len(got), len(want), what)
        for i, (g, w) in enumerate(zip(got, want)):
            if abs(g - w) > tol * max(1.0, abs(w)):
                self.fail(f"{what}: element {i} is {g}, want {w} (rank {W.rank})")

    def place(self, src, symmetric, dt):
        """src's data in symmetric pool memory or in an ordinary array."""
        if not symmetric:
            return array.array(src.typecode, src)
        b = symmem.empty_buffer(len(src), dt)
        b[:] = src  # memoryview slice assignment needs the same format
        return b


# Small counts for every dtype; two large ones (past the 64 KiB one-shot
# all-reduce limit) for the common types, with one op.
CASES = [(dt, n) for dt in DTYPES for n in (1, 7, 1000)] + [("float32", 40000), ("int32", 40000)]
ALL_OPS = ("sum", "max", "min", "avg")


def ops(c):
    return ALL_OPS if c <= 1000 else ("sum",)


class TestCollectives(Base):
    def test_all_gather(self):
        n, me = W.size, W.rank
        for dt, c in CASES:
            for sym in (True, False):
                seed = shared_seed()
                inp = self.place(gen(seed, me, c, dt, "ag"), sym, dt)
                out = self.place(array.array(DTYPES[dt][0], bytes(c * n * array.array(DTYPES[dt][0]).itemsize)), sym, dt)
                p = symmem.all_gather_into_tensor(out, inp, **kw(dt))
                self.assertEqual(p, symmem.Path("direct", not sym))
                want = [v for r in range(n) for v in values(gen(seed, r, c, dt, "ag"), dt)]
                self.assertValues(values(out, dt), want, dt, f"all_gather {dt} x{c} symmetric={sym}")

    def test_all_gather_in_place(self):
        n, me, dt, c = W.size, W.rank, "float32", 999
        seed = shared_seed()
        out = symmem.empty_buffer(n * c, dt)
        out[me * c:(me + 1) * c] = gen(seed, me, c, dt, "agi")
        p = symmem.all_gather_into_tensor(out, out[me * c:(me + 1) * c])
        self.assertFalse(p.staged)
        want = [v for r in range(n) for v in gen(seed, r, c, dt, "agi")]
        self.assertValues(out.tolist(), want, dt, "in-place all_gather")

    def test_reduce_scatter(self):
        n, me = W.size, W.rank
        for dt, c in CASES:
            for op in ops(c):
                for sym in (True, False):
                    seed = shared_seed()
                    inp = self.place(gen(seed, me, c * n, dt, "rs"), sym, dt)
                    out = self.place(array.array(DTYPES[dt][0], [0] * c), sym, dt)
                    p = symmem.reduce_scatter_tensor(out, inp, op, **kw(dt))
                    self.assertEqual(p.staged, not sym)
                    ins = [values(gen(seed, r, c * n, dt, "rs"), dt)[me * c:(me + 1) * c] for r in range(n)]
                    want = reduce_ref(list(zip(*ins)), op, dt)
                    self.assertValues(values(out, dt), want, dt, f"reduce_scatter {op} {dt} x{c} symmetric={sym}")

    def test_all_reduce(self):
        n, me = W.size, W.rank
        for dt, c in CASES:
            for op in ops(c):
                for sym, inplace in ((True, True), (True, False), (False, True), (False, False)):
                    seed = shared_seed()
                    t = self.place(gen(seed, me, c, dt, "ar"), sym, dt)
                    out = None if inplace else self.place(array.array(DTYPES[dt][0], [0] * c), sym, dt)
                    p = symmem.all_reduce(t, op, output=out, **kw(dt))
                    self.assertEqual(p.staged, not sym)
                    want = reduce_ref(list(zip(*[values(gen(seed, r, c, dt, "ar"), dt) for r in range(n)])), op, dt)
                    got = values(t if inplace else out, dt)
                    self.assertValues(got, want, dt, f"all_reduce {op} {dt} x{c} symmetric={sym} in-place={inplace}")

    def test_broadcast(self):
        n, me = W.size, W.rank
        for dt, c in CASES:
            for root in range(n):
                for sym in (True, False):
                    seed = shared_seed()
                    t = self.place(gen(seed, me, c, dt, "bc"), sym, dt)
                    p = symmem.broadcast(t, root, **kw(dt))
                    self.assertEqual(p.staged, not sym)
                    self.assertValues(values(t, dt), values(gen(seed, root, c, dt, "bc"), dt), dt,
                                      f"broadcast {dt} x{c} root {root} symmetric={sym}")

    def test_memoryview_of_bytearray_and_readonly_input(self):
        seed = shared_seed()
        src = gen(seed, W.rank, 64, "float32", "mv")
        inp = memoryview(bytes(src.tobytes())).cast("f")  # read-only input
        out = memoryview(bytearray(64 * 4 * W.size)).cast("f")
        symmem.all_gather_into_tensor(out, inp)
        want = [v for r in range(W.size) for v in gen(seed, r, 64, "float32", "mv")]
        self.assertValues(out.tolist(), want, "float32", "all_gather from a read-only memoryview")

    def test_buffers_without_nbytes(self):
        # Weak-referenceable buffers with no .nbytes: the second call used to
        # read it to check its cached description.
        m = mmap.mmap(-1, 16)
        m[:] = bytes([W.rank + 1]) * 16
        a = type("Ints", (ctypes.c_int32 * 4,), {})(*[W.rank + 1] * 4)
        s = W.size * (W.size + 1) // 2
        for want in (s, s * W.size):
            symmem.all_reduce(m)
            symmem.all_reduce(a)
            self.assertEqual(bytes(m), bytes([want]) * 16)
            self.assertEqual(list(a), [want] * 4)
        m.close()

    def test_path_reason_and_explain(self):
        b = symmem.empty_buffer(16, "float32")
        symmem.all_reduce(b)
        p = W.group.last_path()
        self.assertEqual((p.algo, p.staged), ("direct", False))
        self.assertIn("symmetric", p.reason)
        e = symmem.explain("all_gather", 1 << 20, symmetric=False)
        self.assertTrue(e.staged)
        self.assertIn("staged", e.reason)
        d = symmem.doctor()
        self.assertEqual((d["backend"], d["rank"], d["size"], d["checked"]), ("cpu", W.rank, W.size, CHECKED))
        self.assertEqual(d["groups"][0]["name"], "world")
        self.assertTrue(any(x["op"] == "broadcast" for x in d["paths"]))
        self.assertEqual((d["machine"]["backend"], d["auto_table"]["source"]), ("cpu", ""))
        self.assertIn("one path", d["auto_table"]["note"])


class TestNumpy(Base):
    def test_numpy_all_reduce(self):
        try:
            import numpy as np
        except ImportError:
            self.skipTest("numpy is not installed")
        seed = shared_seed()
        a = np.array(gen(seed, W.rank, 100, "float64", "np"), dtype=np.float64)
        symmem.all_reduce(a)
        want = [sum(c) for c in zip(*[gen(seed, r, 100, "float64", "np") for r in range(W.size)])]
        self.assertValues(list(a), want, "float64", "numpy all_reduce")


class TestTorchCPU(Base):
    def test_tensors(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch is not installed")
        seed = shared_seed()
        t = symmem.empty((4, 8), torch.float32)
        self.assertTrue(symmem.is_symmetric(t))
        t.copy_(torch.tensor(gen(seed, W.rank, 32, "float32", "t")).view(4, 8))
        out = torch.zeros(W.size * 32)
        self.assertEqual(symmem.all_gather_into_tensor(out, t), symmem.Path("direct", True))  # out is ordinary memory
        want = torch.cat([torch.tensor(gen(seed, r, 32, "float32", "t")) for r in range(W.size)])
        self.assertTrue(torch.allclose(out, want))
        symmem.all_reduce(t, "max")
        ref = torch.stack([torch.tensor(gen(seed, r, 32, "float32", "t")) for r in range(W.size)]).amax(0)
        self.assertTrue(torch.equal(t.view(-1), ref))


class TestScopes(Base):
    def test_scope_registers_at_exit(self):
        big = 80 << 20  # larger than the pool's 64 MiB minimum segment: a new segment
        with symmem.use_symmetric_memory(W.group):
            a = symmem.empty_buffer(big // 4, "float32")
            b = symmem.empty_buffer(100, "int64")
            self.assertFalse(symmem.is_symmetric(a), "a new segment is registered only when the scope ends")
        self.assertTrue(symmem.is_symmetric(a))
        self.assertTrue(symmem.is_symmetric(b))
        self.assertFalse(symmem.is_symmetric(array.array("f", [1.0])))
        a[0] = W.rank + 1
        self.assertFalse(symmem.all_reduce(a[:16]).staged)
        self.assertEqual(a[0], W.size * (W.size + 1) / 2)

    def test_refused_end_leaves_the_scope_open(self):
        outer, inner = symmem.Scope(W.group), symmem.Scope(W.group)
        with self.assertRaises(symmem.InvalidArgumentError) as cm:
            outer.end()  # an inner scope of the group is still open
        self.assertIn("end them first", str(cm.exception))
        h = outer.handle
        self.assertTrue(h, "a refused end leaves the scope open, to end again")
        self.assertTrue(_core.in_scope(W.group))
        inner.end()
        outer.end()
        self.assertEqual((outer.handle, inner.handle), (0, 0))
        self.assertEqual(_lib.lib.symmem_scope_end(h), symmem.BadHandleError.code, "the library ended it")
        self.assertFalse(_core.in_scope(W.group))
        self.assertEqual(_core._scopes(), [])

    def test_scopes_end_in_any_order_and_on_any_thread(self):
        g = symmem.new_group(range(W.size))
        try:
            a, b = symmem.Scope(W.group), symmem.Scope(g)
            a.end()  # scopes of different groups: not nested in the library
            b.end()
            s = symmem.Scope(W.group)
            t = threading.Thread(target=s.end)
            t.start()
            t.join()
            self.assertEqual((a.handle, b.handle, s.handle), (0, 0, 0))
            self.assertFalse(_core.in_scope(W.group))
            self.assertFalse(_core.in_scope(g))
            self.assertEqual(_core._scopes(), [])
            x = symmem.empty_buffer(16, "float32", group=g)  # registered by a scope of its own again
            self.assertTrue(symmem.is_symmetric(x, group=g))
            del x
        finally:
            g.close()

    def test_free_and_reuse(self):
        a = symmem.empty_buffer(1000, "float32")
        addr = symmem._ops.describe(a, False)[0]
        del a  # back to the pool on every rank, in the same order
        b = symmem.empty_buffer(1000, "float32")
        self.assertEqual(symmem._ops.describe(b, False)[0], addr)
        self.assertTrue(symmem.is_symmetric(b))


class TestGroups(Base):
    def test_subgroup(self):
        n, me = W.size, W.rank
        members = [0, n - 1]
        g = symmem.new_group(members)
        try:
            self.assertEqual(g.is_member, me in members)
            t = array.array("i", [me + 1] * 10)
            if g.is_member:
                with symmem.use_symmetric_memory(g):
                    s = symmem.empty_buffer(10, "int32")
                s[:] = array.array("i", [me + 1] * 10)
                self.assertFalse(symmem.all_reduce(s, group=g).staged)
                self.assertEqual(list(s), [sum(r + 1 for r in members)] * 10)
                symmem.all_reduce(t, "max", group=g)
                self.assertEqual(list(t), [max(members) + 1] * 10)
                self.assertEqual(g.rank, members.index(me))
            else:
                with symmem.use_symmetric_memory(g):  # mirrors the members' allocations
                    s = symmem.empty_buffer(10, "int32")
                with self.assertRaises(symmem.NotMemberError):
                    symmem.all_reduce(t, group=g)
            del s
        finally:
            h = g.handle
            g.close()
        with self.assertRaises(symmem.BadHandleError):  # the closed group's own handle
            _lib.check(_lib.lib.symmem_group_rank(h))

    def test_world_group_close_is_refused(self):
        with self.assertRaises(symmem.InvalidArgumentError) as cm:
            W.group.close()
        self.assertTrue(W.group.handle, "the world group stays open")
        a = array.array("f", [1.0])
        symmem.all_reduce(a)
        self.assertEqual(a[0], W.size)
        self.assertIn("World.close()", str(cm.exception))

    def test_group_limit_raises_everywhere(self):
        # Groups of rank 0 alone fill rank 0's pool only; the group past its
        # limit is a bad argument on every rank, naming the limit, and the
        # ranks that still had room undo their part.
        groups = []
        try:
            with self.assertRaises(symmem.InvalidArgumentError) as cm:
                for _ in range(200):
                    groups.append(symmem.new_group([0]))
            self.assertIn("64 groups", str(cm.exception))
            self.assertIn("close", str(cm.exception))
            self.assertLess(len(groups), 64)
        finally:
            for g in groups:
                g.close()
        symmem.new_group([0]).close()  # room again

    def test_group_mismatch_raises_everywhere(self):
        with self.assertRaises(symmem.MismatchError) as cm:
            symmem.new_group(list(range(W.size)), name=f"mismatch{W.rank}")
        self.assertIn("mismatch", str(cm.exception))


class TestNCCLShapedExports(Base):
    """The package calls symmem_collective through its builtin entry; C
    callers get the NCCL-shaped exports and symmem_collective too, checked here through ctypes on the same data."""

    def test_four_exports(self):
        lib, g, n, me, c = _lib.lib, W.group.handle, W.size, W.rank, 100
        addr = lambda b: symmem._ops.describe(b, True)[0]  # noqa: E731
        seed = shared_seed()
        inp = self.place(gen(seed, me, c * n, "float32", "x"), True, "float32")
        ins = [gen(seed, r, c * n, "float32", "x") for r in range(n)]
        out = symmem.empty_buffer(c * n, "float32")
        self.assertEqual(_lib.check(lib.symmem_all_gather(g, addr(inp), addr(out), c, 7, None, b"direct")), 0)
        self.assertValues(out.tolist(), [v for r in range(n) for v in ins[r][:c]], "float32", "symmem_all_gather")
        rs = symmem.empty_buffer(c, "float32")
        _lib.check(lib.symmem_reduce_scatter(g, addr(inp), addr(rs), c, 7, 2, None, None))  # max
        self.assertValues(rs.tolist(), reduce_ref(list(zip(*[x[me * c:(me + 1) * c] for x in ins])), "max", "float32"),
                          "float32", "symmem_reduce_scatter max")
        ar = symmem.empty_buffer(c * n, "float32")
        _lib.check(lib.symmem_all_reduce(g, addr(inp), addr(ar), c * n, 7, 0, None, b"auto"))
        self.assertValues(ar.tolist(), reduce_ref(list(zip(*ins)), "sum", "float32"), "float32", "symmem_all_reduce")
        root = n - 1
        _lib.check(lib.symmem_broadcast(g, addr(inp), c, 7, root, None, None))
        self.assertValues(inp.tolist()[:c], ins[root][:c], "float32", "symmem_broadcast")
        self.assertEqual(lib.symmem_all_reduce(g, addr(inp), addr(ar), c, 7, 0, None, b"fastest"), -1)
        self.assertIn(b"fastest", lib.symmem_last_error())

    def test_collective_broadcast_is_in_place(self):
        a, b = symmem.empty_buffer(4, "float32"), symmem.empty_buffer(4, "float32")
        pa, pb = symmem._ops.describe(a, True)[0], symmem._ops.describe(b, True)[0]
        call = symmem._ops.BC | 7 << 8
        self.assertEqual(_lib.collective(W.group.handle, call, pa, pb, 4, 0), -1)  # local: no peer waits
        self.assertIn(b"in place", _lib.lib.symmem_last_error())
        six = _lib.lib.symmem_collective  # the export through ctypes decodes the same way
        six.restype, six.argtypes = ctypes.c_int, [ctypes.c_void_p] * 6
        self.assertEqual(six(W.group.handle, call, pa, pb, 4, None), -1)
        self.assertIn(f"in={pa:#x} out={pb:#x}".encode(), _lib.lib.symmem_last_error())


class TestErrors(Base):
    def test_argument_errors(self):
        a = array.array("f", [0.0] * 8)
        cases = [
            (symmem.InvalidArgumentError, lambda: symmem.all_gather_into_tensor(array.array("f", [0.0] * 3), a)),
            (symmem.InvalidArgumentError, lambda: symmem.all_reduce(a, output=array.array("d", [0.0] * 8))),
            (symmem.NotSupportedError, lambda: symmem.all_reduce(a, "prod")),
            (symmem.InvalidArgumentError, lambda: symmem.all_reduce(a, "median")),
            (symmem.NotSupportedError, lambda: symmem.all_reduce(array.array("I", [1]))),
            (symmem.InvalidArgumentError, lambda: symmem.all_reduce(array.array("h", [1]))),
            (symmem.InvalidArgumentError, lambda: symmem.all_reduce(a, algo="fastest")),
            (symmem.NotSupportedError, lambda: symmem.all_reduce(a, algo="kernel")),
            (symmem.InvalidArgumentError, lambda: symmem.broadcast(a, root=W.size)),
            (symmem.InvalidArgumentError, lambda: symmem.broadcast(a, root=-1)),
            (symmem.InvalidArgumentError, lambda: symmem.broadcast(a, root="0")),
            (symmem.InvalidArgumentError, lambda: symmem.reduce_scatter_tensor(a, a * W.size, op=[1])),
            (symmem.InvalidArgumentError, lambda: symmem.all_reduce(memoryview(bytes(8)).cast("f"))),
            (symmem.InvalidArgumentError, lambda: symmem.empty_buffer(4, "complex64")),
            (symmem.InvalidArgumentError, lambda: symmem.explain("gather", 10)),
        ]
        for i, (exc, f) in enumerate(cases):
            with self.assertRaises(exc, msg=f"case {i}") as cm:
                f()
            self.assertTrue(str(cm.exception), f"case {i}: empty message")

    def test_messages_name_the_problem(self):
        with self.assertRaises(symmem.NotSupportedError) as cm:
            symmem.all_reduce(array.array("f", [0.0]), "prod")
        self.assertIn("prod", str(cm.exception))
        with self.assertRaises(symmem.InvalidArgumentError) as cm:
            symmem.broadcast(array.array("f", [0.0]), root=W.size + 5)
        self.assertIn(f"root {W.size + 5}", str(cm.exception))

    def test_foreign_byte_order_is_refused(self):
        # The library reduces in native order: big-endian ints summed as
        # little-endian ones come back wrong, silently.
        other = "__ctype_be__" if sys.byteorder == "little" else "__ctype_le__"
        for ct in (ctypes.c_int32, ctypes.c_int64, ctypes.c_float, ctypes.c_double):
            a = (getattr(ct, other) * 2)(1, 256)
            for call in (lambda: symmem.all_reduce(a), lambda: symmem.broadcast(a, 0)):
                with self.assertRaises(symmem.InvalidArgumentError, msg=ct.__name__) as cm:
                    call()
                self.assertIn("native order", str(cm.exception))
            self.assertEqual(list(a), [1, 256])
        n = (ctypes.c_int32 * 2)(W.rank, 256)  # ctypes marks native order too ('<i' here): taken
        symmem.all_reduce(n, "max")
        self.assertEqual(list(n), [W.size - 1, 256])

    def test_dtype_for_a_format_without_symmem_dtype(self):
        m = memoryview(bytearray(16)).cast("P")  # pointer-sized: no symmem dtype
        size = m.itemsize
        fit = {8: "int64 or float64", 4: "int32 or float32"}[size]
        m[0], m[1] = W.rank + 1, 7
        symmem.all_reduce(m, dtype=fit.split()[0])  # dtype= of the element size is taken
        self.assertEqual(list(m), [W.size * (W.size + 1) // 2, 7 * W.size])
        with self.assertRaises(symmem.InvalidArgumentError) as cm:
            symmem.all_reduce(m)
        self.assertIn(f"pass dtype= ({fit})", str(cm.exception))
        with self.assertRaises(symmem.InvalidArgumentError) as cm:
            symmem.all_reduce(m, dtype="int8")
        self.assertIn(f"are {size} bytes", str(cm.exception))
        with self.assertRaises(symmem.InvalidArgumentError) as cm:
            symmem.all_reduce(m, dtype="complex64")
        self.assertIn("bfloat16", str(cm.exception))
        self.assertNotIn("uint64", str(cm.exception), "the hint lists only dtypes the library runs")

    def test_last_error_is_per_thread(self):
        lib = _lib.lib
        self.assertLess(lib.symmem_group_rank(111111), 0)
        mine = lib.symmem_last_error()
        other = []
        ready, go = threading.Event(), threading.Event()

        def worker():
            lib.symmem_group_rank(222222)
            ready.set()
            go.wait(10)
            other.append(lib.symmem_last_error())

        t = threading.Thread(target=worker)
        t.start()
        ready.wait(10)
        self.assertLess(lib.symmem_world_size(333333), 0)  # this thread fails again meanwhile
        go.set()
        t.join()
        self.assertIn(b"111111", mine)
        self.assertIn(b"222222", other[0])
        self.assertIn(b"333333", lib.symmem_last_error())

    def test_collective_mismatch_raises_everywhere(self):
        # Always on: the CPU backend compares every call's arguments in-band
        # (Options.Checked adds a store exchange on top).
        a = array.array("f", [1.0] * (10 + W.rank))
        with self.assertRaises(symmem.MismatchError) as cm:
            symmem.all_reduce(a)
        self.assertIn("count", str(cm.exception))
        b = array.array("f", [1.0] * 4)  # the group still works afterwards
        symmem.all_reduce(b)
        self.assertEqual(list(b), [float(W.size)] * 4)


class TestAllToAll(Base):
    def matrix(self, seed, shape):
        """Elements rank i sends rank j, alike on every rank: shape 0 random
        with zeros, 1 rank 0 sends nothing, 2 all to the last rank."""
        rnd, n = random.Random(f"{seed}/a2a/{shape}"), W.size
        return [[0 if (shape == 1 and i == 0) or (shape == 2 and j != n - 1) or rnd.random() < 0.25
                 else rnd.randrange(1, 9) for j in range(n)] for i in range(n)]

    def test_all_to_all_single(self):
        n, me, c = W.size, W.rank, 5
        for dt in DTYPES:
            for sym in (True, False):
                seed = shared_seed()
                inp = self.place(gen(seed, me, c * n, dt, "a2a"), sym, dt)
                out = self.place(array.array(DTYPES[dt][0], [0] * (c * n)), sym, dt)
                p = symmem.all_to_all_single(out, inp, **kw(dt))
                self.assertEqual(p.staged, not sym)
                want = [v for r in range(n) for v in values(gen(seed, r, c * n, dt, "a2a"), dt)[me * c:(me + 1) * c]]
                self.assertValues(values(out, dt), want, dt, f"all_to_all_single {dt} symmetric={sym}")

    def test_all_to_all_single_split_sizes(self):
        n, me = W.size, W.rank
        for dt in ("int8", "float32", "bfloat16", "int64"):
            for shape in range(3):
                for sym in (True, False):
                    seed = shared_seed()
                    m = self.matrix(seed, shape)
                    recv = [m[i][me] for i in range(n)]
                    # Pool buffers are alike on every rank: the largest sums.
                    most_in = max(sum(r) for r in m) + 1
                    most_out = max(sum(r[j] for r in m) for j in range(n)) + 2
                    inp = self.place(gen(seed, me, most_in, dt, "a2av"), sym, dt)
                    out = self.place(array.array(DTYPES[dt][0], [0] * most_out), sym, dt)
                    p = symmem.all_to_all_single(out, inp, recv, m[me], **kw(dt))
                    self.assertEqual(p.staged, not sym)
                    want = []
                    for i in range(n):
                        src = values(gen(seed, i, most_in, dt, "a2av"), dt)
                        want += src[sum(m[i][:me]):sum(m[i][:me + 1])]
                    want += [0] * (most_out - len(want))
                    self.assertValues(values(out, dt), want, dt, f"split all_to_all_single {dt} {m}")

    def test_all_to_all_single_rows(self):
        # Split sizes count rows of dim 0, as torch's do.
        n, me = W.size, W.rank
        inp, out = symmem.empty_buffer((2 * n, 3), "int32"), symmem.empty_buffer((2 * n, 3), "int32")
        flat = inp.cast("B").cast("i")
        for k in range(6 * n):
            flat[k] = me * 1000 + k
        symmem.all_to_all_single(out, inp, [2] * n, [2] * n)
        want = [r * 1000 + me * 6 + k for r in range(n) for k in range(6)]
        self.assertEqual(out.cast("B").cast("i").tolist(), want)

    def test_all_to_all_split_mismatch_raises_everywhere(self):
        n = W.size
        recv = [1] * n
        if W.rank == 1:
            recv[0] = 2
        a, b = array.array("f", [1.0] * n), array.array("f", [0.0] * (n + 1))
        with self.assertRaises(symmem.MismatchError) as cm:
            symmem.all_to_all_single(b, a, recv, [1] * n)
        self.assertIn("rank 0 sends 1 elements to rank 1, but rank 1 expects 2 from rank 0", str(cm.exception))
        c = array.array("f", [0.0] * n)
        symmem.all_to_all_single(c, a)  # the group still works afterwards
        self.assertEqual(list(c), [1.0] * n)

    def test_all_to_all_argument_errors(self):
        n = W.size
        a = array.array("f", [1.0] * n)
        for call, text in (
                (lambda: symmem.all_to_all_single(array.array("f", [0.0] * (n + 1)), a), "without split sizes"),
                (lambda: symmem.all_to_all_single(array.array("f", [0.0] * n), a, [1] * n, [1] * (n + 1)),
                 "input_split_sizes holds"),
                (lambda: symmem.all_to_all_single(array.array("f", [0.0] * n), a, [1] * n, [-1] + [1] * (n - 1)),
                 "must be >= 0"),
                (lambda: symmem.all_to_all_single(a, a), "out of place only")):
            with self.assertRaises(symmem.InvalidArgumentError) as cm:
                call()
            self.assertIn(text, str(cm.exception))

    def test_all_to_all_vdev(self):
        n, me = W.size, W.rank
        splits, so = symmem.empty_buffer(n, "int64"), symmem.empty_buffer(2 * n, "int64")
        inp, out = symmem.empty_buffer(16 * n, "int32"), symmem.empty_buffer(8 * n + 4, "int32")
        seed = shared_seed()
        m = self.matrix(seed, 0)
        splits[:] = array.array("q", m[me])
        k = 0
        for j in range(n):
            for x in range(m[me][j]):
                inp[k] = me * 10000 + j * 100 + x
                k += 1
        for i in range(len(out)):
            out[i] = -1
        p = symmem.all_to_all_vdev(inp, out, splits, so)
        self.assertFalse(p.staged)
        want, offs, off = [], [], 0
        for i in range(n):
            want += [i * 10000 + me * 100 + x for x in range(m[i][me])]
            offs.append(off)
            off += m[i][me]
        self.assertEqual(out.tolist()[:len(want)], want)
        self.assertEqual(set(out.tolist()[len(want):]), {-1})
        self.assertEqual(so.tolist(), [m[i][me] for i in range(n)] + offs)
        # Counts past rank 1's out: refused on every rank, nothing written.
        if n > 1:
            splits[:] = array.array("q", [8 * n + 5 if (me, j) == (0, 1) else 0 for j in range(n)])
            before, sob = out.tolist(), so.tolist()
            with self.assertRaises(symmem.InvalidArgumentError) as cm:
                symmem.all_to_all_vdev(inp, out, splits, so)
            self.assertIn("would receive", str(cm.exception))
            self.assertEqual((out.tolist(), so.tolist()), (before, sob))


if __name__ == "__main__":
    unittest.main()
