"""Parts of the Python package that need no launcher: where init takes the
job description from, explicit-argument errors, a world of one rank
started from explicit arguments, and the algorithm and path codes against
include/symmem.h. Run as a plain process (the Go test
cmd/libsymmem runs it)."""

import array
import contextlib
import io
import json
import os
import re
import socket
import sys
import threading
import unittest
from unittest import mock

import symmem
from symmem import _codes, _core, _lib, _ops

ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SYMMEM_TOKEN",
       "SYMMEM_JOB_ID", "SYMMEM_STORE_HOSTED")


def explicit(**kw):
    base = dict(rank=None, world_size=None, local_rank=None, local_world_size=None, master_addr=None,
                master_port=None, token=None, job_id=None)
    base.update(kw)
    return base


class TestJobEnv(unittest.TestCase):
    def test_no_arguments_leave_the_environment_to_the_library(self):
        self.assertIsNone(_core._job_env(explicit()))

    def test_missing_arguments_come_from_the_environment(self):
        env = {"WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "h",
               "MASTER_PORT": "99", "SYMMEM_TOKEN": "t", "SYMMEM_JOB_ID": "j"}
        with mock.patch.dict(os.environ, env, clear=True):
            got = _core._job_env(explicit(rank=3))
        self.assertEqual(got, dict(rank=3, world_size=4, local_rank=1, local_world_size=2, master_addr="h",
                                   master_port=99, token="t", job_id="j"))

    def test_missing_everywhere_names_what(self):
        with mock.patch.dict(os.environ, {}, clear=True):
            with self.assertRaises(symmem.InvalidArgumentError) as cm:
                _core._job_env(explicit(rank=0, world_size=1))
        self.assertIn("master_addr (or MASTER_ADDR)", str(cm.exception))
        self.assertIn("token (or SYMMEM_TOKEN)", str(cm.exception))

    def test_torchrun_variables_give_token_and_job_id(self):
        # Under torchrun (no SYMMEM_TOKEN, SYMMEM_JOB_ID) an explicit argument
        # used to make the token and job id required. They are left to the
        # library (None: NULL), which derives them as from the environment
        # (rendezvous.TestEnvDerivedValues; test_torchrun_variables_with_an_
        # explicit_argument runs it).
        env = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "node0",
               "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "run42"}
        with mock.patch.dict(os.environ, env, clear=True):
            got = _core._job_env(explicit(local_rank=1))
            self.assertEqual((got["token"], got["job_id"], got["rank"]), (None, None, 1))
            got = _core._job_env(explicit(token="tok"))  # SYMMEM_JOB_ID is optional: derived from the token
            self.assertEqual((got["token"], got["job_id"]), ("tok", None))
        with mock.patch.dict(os.environ, {k: v for k, v in env.items() if k != "TORCHELASTIC_RUN_ID"}, clear=True):
            with self.assertRaises(symmem.InvalidArgumentError) as cm:
                _core._job_env(explicit(local_rank=1))
            self.assertIn("token (or SYMMEM_TOKEN)", str(cm.exception))

    def test_not_a_number(self):
        with mock.patch.dict(os.environ, {}, clear=True):
            with self.assertRaises(symmem.InvalidArgumentError):
                _core._job_env(explicit(rank="x", world_size=1, local_rank=0, local_world_size=1, master_addr="h",
                                        master_port=1, token="t", job_id="j"))


# A job id of this process: rank 0's fd exchange listens on a name made of
# it, machine-wide (two runs of the suite at once took the same name).
JOB = f"standalone-{os.getpid()}"


def free_port():
    """A free port whose successor, where rank 0 hosts symmem's store, is free
    too (a test's groups leave connections on ephemeral ports)."""
    for _ in range(20):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 65535:
            try:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port + 1))
                return port
            except OSError:
                pass
    raise unittest.SkipTest("no port pair with MASTER_PORT+1 free in 20 tries")


class TestExplicitInit(unittest.TestCase):
    def setUp(self):
        p = mock.patch.dict(os.environ, {k: v for k, v in os.environ.items() if k not in ENV}, clear=True)
        p.start()
        self.addCleanup(p.stop)

    def args(self, **kw):
        a = dict(rank=0, world_size=1, local_rank=0, local_world_size=1, master_addr="127.0.0.1",
                 master_port=free_port(), token="tok", job_id=JOB)
        a.update(kw)
        return a

    def test_bad_arguments_are_named(self):
        for kw, text in [(dict(rank=1), "rank 1 is outside"), (dict(world_size=0), "world_size 0"),
                         (dict(master_port=70000), "master_port 70000"), (dict(token=""), "token is empty"),
                         (dict(local_rank=2), "local_rank 2")]:
            with self.assertRaises(symmem.InvalidArgumentError, msg=str(kw)) as cm:
                symmem.init(backend="cpu", **self.args(**kw))
            self.assertIn(text, str(cm.exception))
        with self.assertRaises(symmem.InvalidArgumentError) as cm:
            symmem.init(backend="tpu", **self.args())
        self.assertIn("unknown backend", str(cm.exception))

    def test_environment_set_by_the_script(self):
        # The job environment set in Python after the process started (as
        # scripts set MASTER_ADDR for torch.distributed) reaches the library:
        # a Go library read the environment of the process's start ("RANK is
        # not set").
        env = dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(free_port()), SYMMEM_TOKEN="tok", SYMMEM_JOB_ID=JOB + "-env")
        os.environ.update(env)
        w = symmem.init(backend="cpu", timeout=10)
        try:
            self.assertEqual((w.rank, w.size), (0, 1))
        finally:
            w.close()
        for k in env:
            del os.environ[k]
        with self.assertRaises(symmem.InvalidArgumentError) as cm:  # and unset again
            symmem.init(backend="cpu", timeout=10)
        self.assertIn("RANK", str(cm.exception))

    def test_sizes_past_size_t(self):
        # ctypes wraps a size_t argument: alloc(2**64 + 16) allocated 16 bytes.
        w = symmem.init(backend="cpu", timeout=10, **self.args())
        try:
            for n in (2**64 + 16, -1, 1.5):
                with self.assertRaises(symmem.InvalidArgumentError, msg=repr(n)):
                    w.alloc(n)
                with self.assertRaises(symmem.InvalidArgumentError, msg=repr(n)):
                    symmem.explain("all_reduce", n)
        finally:
            w.close()

    def test_world_of_one(self):
        w = symmem.init(backend="cpu", timeout=10, **self.args())
        try:
            self.assertIs(symmem.init(), w)  # a second init returns the open world
            self.assertEqual((w.rank, w.size, w.backend, w.device, w.group.device), (0, 1, "cpu", -1, -1))
            a, out = symmem.empty_buffer(8, "int64"), symmem.empty_buffer(8, "int64")
            a[:] = array.array("q", range(8))
            self.assertEqual(symmem.all_reduce(a, output=out), symmem.Path("direct", False))
            self.assertEqual(list(out), list(range(8)))
        finally:
            h = w.group.world.handle
            w.close()
        with self.assertRaises(symmem.ClosedError):
            symmem.world()
        with self.assertRaises(symmem.BadHandleError):  # the closed world's own handle
            symmem._lib.check(symmem._lib.lib.symmem_world_rank(h))

    def test_torchrun_variables_with_an_explicit_argument(self):
        env = dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(free_port()), TORCHELASTIC_RUN_ID="run-standalone")
        with mock.patch.dict(os.environ, env):
            w = symmem.init(backend="cpu", timeout=10, local_rank=0)
            try:
                self.assertEqual((w.rank, w.size), (0, 1))
                job = w.doctor()["job_id"]
            finally:
                w.close()
            # The job the library derives from the environment alone: every
            # rank of the job meets under it, whichever way each started.
            w = symmem.init(backend="cpu", timeout=10)
            try:
                self.assertEqual(w.doctor()["job_id"], job)
            finally:
                w.close()

    def test_empty_buffer_shapes(self):
        # A zero-size buffer is an empty view (memoryview.cast refuses zeros
        # in a shape: it raised TypeError); a negative size is a bad argument.
        w = symmem.init(backend="cpu", timeout=10, **self.args())
        try:
            for shape in (0, (0,), (3, 0)):
                b = symmem.empty_buffer(shape, "int32")
                self.assertEqual((b.nbytes, b.format, len(b)), (0, "i", 0), shape)
                symmem.all_reduce(b)
            for shape in (-1, (2, -3), ("4",)):
                with self.assertRaises(symmem.InvalidArgumentError, msg=repr(shape)) as cm:
                    symmem.empty_buffer(shape)
                self.assertIn("shape", str(cm.exception))
            self.assertEqual(symmem.empty_buffer((2, 3), "int64").shape, (2, 3))
        finally:
            w.close()

    def test_torch_dtype_before_any_tensor(self):
        # dtype= takes a torch dtype; it was "unknown dtype" until a tensor
        # had reached a collective (the package reads torch's dtypes then).
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        try:
            import faketorch
        finally:
            sys.path.pop(0)
        w = symmem.init(backend="cpu", timeout=10, **self.args())
        saved = {k: v for k, v in sys.modules.items() if k == "torch" or k.startswith("torch.")}
        try:
            torch = faketorch.install()
            with mock.patch.multiple(_ops, _torch_dtypes=None, _TDT={}, _T=None, _raw_stream=None), \
                    mock.patch.dict(_ops._handlers, clear=True):
                m = memoryview(bytearray(4)).cast("H")
                m[0], m[1] = 0x3F80, 0x4000  # bfloat16 1.0, 2.0
                self.assertEqual(symmem.all_reduce(m, dtype=torch.bfloat16), symmem.Path("direct", True))
                self.assertEqual(list(m), [0x3F80, 0x4000])
                with self.assertRaises(symmem.InvalidArgumentError):
                    symmem.all_reduce(m, dtype=torch.complex64)
                with self.assertRaises(symmem.InvalidArgumentError):
                    symmem.all_reduce(m, dtype=[1])
        finally:
            for k in [k for k in sys.modules if k == "torch" or k.startswith("torch.")]:
                del sys.modules[k]
            sys.modules.update(saved)
            w.close()

    def test_out_of_memory(self):
        # More than the host has: its own exception (SYMMEM_ERR_NO_MEMORY),
        # a MemoryError too, so a caller can free memory and try smaller.
        w = symmem.init(backend="cpu", timeout=10, **self.args())
        try:
            with self.assertRaises(symmem.NoMemoryError) as cm:
                w.alloc(1 << 46)
            self.assertIsInstance(cm.exception, MemoryError)
            self.assertIsInstance(cm.exception, symmem.SymmemError)
            self.assertIn("not enough memory", str(cm.exception))
            w.free(w.alloc(4096))  # the pool still works
        finally:
            w.close()

    def test_group_limit(self):
        # The group past the pool's limit is a bad argument naming the limit
        # and the remedy; closing a group makes room.
        w = symmem.init(backend="cpu", timeout=10, **self.args())
        try:
            groups = []
            with self.assertRaises(symmem.InvalidArgumentError) as cm:
                for _ in range(200):
                    groups.append(w.new_group([0]))
            self.assertEqual(len(groups), 63)  # the world group is the 64th
            self.assertIn("64 groups", str(cm.exception))
            self.assertIn("close", str(cm.exception))
            groups.pop().close()
            w.new_group([0])
        finally:
            w.close()


    def test_threads_allocate_on_one_group(self):
        # The library keeps one scope stack per group, Python one per
        # thread: two threads' registration scopes must not nest.
        w = symmem.init(backend="cpu", timeout=10, **self.args())
        try:
            errs = []

            def run():
                try:
                    for _ in range(300):
                        b = symmem.empty_buffer(64, "float32")
                        if not symmem.is_symmetric(b):
                            errs.append("an empty_buffer is not registered")
                            return
                except symmem.SymmemError as e:
                    errs.append(f"{type(e).__name__}: {e}")

            ts = [threading.Thread(target=run) for _ in range(4)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            self.assertEqual(errs, [])
            self.assertFalse(_core.in_scope(w.group))
        finally:
            w.close()


    def test_threads_use_symmetric_memory_on_one_group(self):
        # use_symmetric_memory holds its group's scope from enter to exit: a
        # second thread's waits for it instead of opening a scope inside it
        # in the library (whose outer end would then be refused, left open).
        w = symmem.init(backend="cpu", timeout=10, **self.args())
        try:
            a_in, b_in, order, res = threading.Event(), threading.Event(), [], {}

            def a():
                try:
                    with symmem.use_symmetric_memory(w.group):
                        a_in.set()
                        b_in.wait(0.5)  # b must not get in meanwhile
                        buf = symmem.empty_buffer(16)
                        order.append("a leaves")
                    res["a"] = symmem.is_symmetric(buf)
                except symmem.SymmemError as e:
                    res["a"] = f"{type(e).__name__}: {e}"

            def b():
                a_in.wait(10)
                try:
                    with symmem.use_symmetric_memory(w.group):
                        order.append("b enters")
                        b_in.set()
                        buf = symmem.empty_buffer(16)
                    res["b"] = symmem.is_symmetric(buf)
                except symmem.SymmemError as e:
                    res["b"] = f"{type(e).__name__}: {e}"

            ts = [threading.Thread(target=a), threading.Thread(target=b)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(30)
            self.assertEqual(res, {"a": True, "b": True})
            self.assertEqual(order, ["a leaves", "b enters"])
            # One thread may nest, and allocate inside: the lock is reentrant.
            with symmem.use_symmetric_memory(w.group):
                with symmem.use_symmetric_memory(w.group):
                    inner = symmem.empty_buffer(8)
                outer = symmem.empty_buffer(8)
            self.assertTrue(symmem.is_symmetric(inner) and symmem.is_symmetric(outer))
            self.assertFalse(_core.in_scope(w.group))
        finally:
            w.close()


class TestDoctorCommand(unittest.TestCase):
    def test_world_of_one_needs_the_next_port_free(self):
        # `python -m symmem doctor` starts a world of one on a free port;
        # rank 0 hosts the store on port+1, which it did not check: taken
        # (here by a listener), the doctor failed with "address already in use".
        from symmem import __main__ as cli
        for _ in range(50):
            held = socket.socket()
            held.bind(("127.0.0.1", 0))
            q = held.getsockname()[1] - 1
            try:
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", q))
                break
            except OSError:
                held.close()
        else:
            self.skipTest("no free port below a free port in 50 tries")
        self.addCleanup(held.close)
        held.listen()
        real, first = socket.socket, [True]

        class Sock(real):
            def bind(self, addr):
                if addr == ("127.0.0.1", 0) and first[0]:
                    first[0] = False
                    addr = ("127.0.0.1", q)  # the free port whose successor is held
                return super().bind(addr)

        out = io.StringIO()
        env = {k: v for k, v in os.environ.items() if k not in ENV}
        with mock.patch.dict(os.environ, env, clear=True), mock.patch.object(socket, "socket", Sock), \
                contextlib.redirect_stdout(out):
            rc = cli.main(["symmem", "doctor", "--backend", "cpu", "--timeout", "10"])
        self.assertFalse(first[0], "the doctor did not pick its port as expected")
        self.assertEqual(rc, 0, out.getvalue())
        self.assertEqual(json.loads(out.getvalue())["backend"], "cpu")


HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include", "symmem.h")


@unittest.skipUnless(os.path.exists(HEADER), "include/symmem.h is not beside the package")
class TestHeaderCodes(unittest.TestCase):
    """The package's algorithm names and path codes are the header's."""

    def defines(self, prefix):
        with open(HEADER) as f:
            src = f.read()
        return {m[1]: int(m[2]) for m in re.finditer(r"#define (" + prefix + r"\w+)\s+(\d+)", src)}

    @staticmethod
    def macro(prefix, algo):
        return prefix + algo.upper().replace("-", "_")

    def test_algorithm_codes(self):
        want = self.defines("SYMMEM_ALGO_")
        got = {self.macro("SYMMEM_ALGO_", a): c >> 24 for a, c in _ops._ALGO.items()}
        self.assertEqual(got, want)
        self.assertEqual(tuple(a for a in sorted(_ops._ALGO, key=_ops._ALGO.get) if a != "auto"), _codes.ALGOS[1:])
        with self.assertRaises(symmem.InvalidArgumentError) as cm:
            _ops._algo("fastest")
        self.assertIn(", ".join(_codes.ALGOS[1:-1]) + " or " + _codes.ALGOS[-1], str(cm.exception))

    def test_path_codes(self):
        want = self.defines("SYMMEM_PATH_")
        staged = want.pop("SYMMEM_PATH_STAGED")
        self.assertEqual({self.macro("SYMMEM_PATH_", a): c for a, c in _codes.PATHS.items()}, want)
        for name, code in want.items():
            self.assertEqual(code & staged, 0, name)
            for s in (0, staged):
                p = _ops._PATHS[code | s]
                self.assertEqual(self.macro("SYMMEM_PATH_", p.algo), name)
                self.assertEqual(p.staged, bool(s))

    def test_status_codes(self):
        # Every error code of the header has its exception, named after it,
        # exported by the package; SYMMEM_ERR_INTERNAL is the base class.
        with open(HEADER) as f:
            src = f.read()
        want = {m[1]: int(m[2]) for m in re.finditer(r"SYMMEM_ERR_(\w+) = (-\d+)", src)}
        names = {"INVALID": "InvalidArgumentError", "TIMEOUT": "SymmemTimeoutError", "PEER": "PeerError"}
        self.assertEqual(want.pop("INTERNAL"), symmem.SymmemError.code)
        self.assertEqual(sorted(_lib._BY_CODE), sorted(want.values()))
        for name, code in want.items():
            cls = names.get(name) or "".join(w.title() for w in name.split("_")) + "Error"
            self.assertIn(cls, symmem.__all__)
            self.assertIs(_lib._BY_CODE[code], getattr(symmem, cls), name)
            self.assertEqual(getattr(symmem, cls).code, code, name)
            self.assertTrue(issubclass(getattr(symmem, cls), symmem.SymmemError), name)
        self.assertEqual(want["NO_MEMORY"], -10)

    def test_hostcost_noop_status_is_no_path(self):
        # hostcost's no-op library call returns NOOP_STATUS so that a
        # collective returns None and the host-cost scripts can tell the
        # library was not called: a real path code there (15 became ll+staged
        # when ll took 7) stopped both scripts.
        bench = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench")
        sys.path.insert(0, bench)
        try:
            import hostcost
        finally:
            sys.path.remove(bench)
        self.assertTrue(0 <= hostcost.NOOP_STATUS < len(_ops._PATHS))
        self.assertIsNone(_ops._PATHS[hostcost.NOOP_STATUS])


if __name__ == "__main__":
    unittest.main()
