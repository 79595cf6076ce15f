"""GPU checks of the Python package with PyTorch, one process per rank
(scripts/gpu-python.sh starts it with `symmem launch -n N`; ranks may share
one GPU with SYMMEM_SHARE_DEVICE=1).

  python3 gpu_torch.py checks     allocator + MemPool, empty, every collective
                                  and algorithm on torch tensors vs a torch
                                  reference on the same data, graph capture
                                  and replay; all-to-all (split sizes,
                                  all_to_all_vdev, an overrun, a captured
                                  all_to_all_vdev) checked exactly
  python3 gpu_torch.py mismatch   checked mode: a count mismatch raises
                                  MismatchError on every rank
  python3 gpu_torch.py cost       host cost per call (world of 1), layer by
                                  layer: ctypes into symmem on each stream,
                                  the package, its Python work alone, vs
                                  NCCL through ctypes as vLLM calls it

Every check prints "CHECK <name> ok|FAIL|refused <detail>"; the process
exits 1 if any check failed (refused: the backend declined that algorithm
for this call, with its reason)."""

import ctypes
import functools
import glob
import os
import random
import sys
import time

import torch

import symmem
from symmem import _codes

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from hostcost import interleaved, noop_copy  # noqa: E402

RESULTS = []


def report(name, status, detail=""):
    RESULTS.append((name, status))
    print(f"CHECK {name} {status} {detail}".rstrip(), flush=True)


def device():
    if os.environ.get("SYMMEM_SHARE_DEVICE") == "1":
        return 0
    return int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count()


_seeds = [0]


def shared_seed(w):
    """A fresh seed, the same on every rank without communicating (a
    broadcast would depend on the path under test): the job id the launcher
    gives every rank, plus a counter."""
    _seeds[0] += 1
    return int(os.environ.get("SYMMEM_JOB_ID", "0")[:8] or "0", 16) % 100003 * 1000 + _seeds[0]


def data(seed, rank, n, dtype):
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    if dtype.is_floating_point:
        return (torch.randint(-64, 64, (n,), generator=g).float() / 16).to(dtype)
    return torch.randint(-1000, 1000, (n,), generator=g).to(dtype)


def reduce_ref(stack, op):
    if op == "sum":
        return stack.float().sum(0) if stack.dtype.is_floating_point else stack.sum(0)
    if op == "max":
        return stack.amax(0)
    if op == "min":
        return stack.amin(0)
    return stack.float().mean(0)


def close(got, want, dtype):
    got, want = got.float().cpu(), want.float().cpu()
    tol = {torch.bfloat16: 2e-2, torch.float16: 2e-3}.get(dtype, 1e-5)
    return torch.allclose(got, want, rtol=tol, atol=tol), float((got - want).abs().max()) if got.numel() else 0.0


def run_checks(w):
    dev = torch.cuda.current_device()
    n, me = w.size, w.rank
    # Allocator + MemPool: tensors made inside the context live in symmem's pool.
    with symmem.use_symmetric_memory():
        x = torch.randn(1 << 20, device="cuda")
        inside = symmem.is_symmetric(x)
    ok = symmem.is_symmetric(x)
    report("mempool", "ok" if ok else "FAIL", f"is_symmetric inside={inside} after={ok} ptr={x.data_ptr():#x}")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    with symmem.use_symmetric_memory():
        b = a.clone()
        c = b @ b
    ref = a.float() @ a.float()
    err = float((c.float() - ref).abs().max() / ref.abs().max())
    report("mempool-gemm", "ok" if err < 1e-2 else "FAIL", f"bf16 4096^3 GEMM on pool memory, max rel err {err:.4f}")
    del x, b, c, a, ref
    e = symmem.empty((256, 1024), torch.bfloat16)
    report("empty", "ok" if symmem.is_symmetric(e) and e.is_cuda and e.shape == (256, 1024) else "FAIL",
           f"shape {tuple(e.shape)} device {e.device}")
    del e

    algos = [None, "kernel", "two-shot", "lc", "ce", "nccl-window", "nccl"]
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int32):
        for count in (4096, 1 << 20):
            seed = shared_seed(w)
            mine = data(seed, me, count * n, dtype)
            every = torch.stack([data(seed, r, count * n, dtype) for r in range(n)])
            for algo in algos:
                tag = f"{str(dtype)[6:]} x{count} algo={algo or 'auto'}"
                # all-gather: rank r contributes slice r of its data
                inp = symmem.empty(count, dtype)
                out = symmem.empty(count * n, dtype)
                inp.copy_(mine[:count])
                check(f"all_gather {tag}", lambda: symmem.all_gather_into_tensor(out, inp, algo=algo),
                      lambda: close(out, every[:, :count].reshape(-1), dtype))
                for op in ("sum", "max", "min", "avg"):
                    if op == "avg" and not dtype.is_floating_point:
                        continue
                    rin = symmem.empty(count * n, dtype)
                    rout = symmem.empty(count, dtype)
                    rin.copy_(mine)
                    want = reduce_ref(every, op)
                    check(f"reduce_scatter {op} {tag}", lambda: symmem.reduce_scatter_tensor(rout, rin, op, algo=algo),
                          lambda: close(rout, want[me * count:(me + 1) * count], dtype))
                    t = symmem.empty(count, dtype)
                    t.copy_(mine[:count])
                    check(f"all_reduce {op} {tag}", lambda: symmem.all_reduce(t, op, algo=algo),
                          lambda: close(t, reduce_ref(every[:, :count], op), dtype))
                root = n - 1
                bt = symmem.empty(count, dtype)
                bt.copy_(mine[:count])
                check(f"broadcast {tag}", lambda: symmem.broadcast(bt, root, algo=algo),
                      lambda: close(bt, every[root, :count], dtype))
            # ordinary (non-pool) CUDA tensors: plain NCCL
            plain = mine[:count].cuda()
            check(f"all_reduce sum {str(dtype)[6:]} x{count} ordinary memory",
                  lambda: symmem.all_reduce(plain), lambda: close(plain, reduce_ref(every[:, :count], "sum"), dtype))
    graph_checks(w)
    device_checks(w)
    a2a_checks(w)
    a2a_graph_check(w)


def device_checks(w):
    """Memory that is not this rank's GPU's, on the torch path: the library
    refuses it (the torch path reads no device) and the package raises the
    error naming the tensor, as its checks did before; on every rank alike
    (a local refusal: no peer waits), and the group still works after."""
    t = symmem.empty(1024, torch.float32)
    cases = [("host tensor", lambda: symmem.all_reduce(torch.ones(1024)), "host memory"),
             ("pinned host tensor", lambda: symmem.all_reduce(torch.ones(1024).pin_memory()), "host memory"),
             ("host output", lambda: symmem.all_reduce(t, output=torch.ones(1024)), "different devices"),
             ("host all_gather input", lambda: symmem.all_gather_into_tensor(symmem.empty(1024 * w.size),
                                                                           torch.ones(1024)), "different devices")]
    for name, f, text in cases:
        try:
            f()
            torch.cuda.synchronize()
            report(f"refuse {name}", "FAIL", "the call ran")
        except symmem.InvalidArgumentError as e:
            report(f"refuse {name}", "ok" if text in str(e) else "FAIL", f"{str(e)[:200]} (want {text!r})")
    t.fill_(1)
    symmem.all_reduce(t)
    torch.cuda.synchronize()
    report("after-refusals", "ok" if bool((t == w.size).all()) else "FAIL", f"t[0]={float(t[0])}")


# NCCL refuses two ranks on one GPU: with a shared device its paths may be
# declined rather than failing.
SHARED = os.environ.get("SYMMEM_SHARE_DEVICE") == "1"


def check(name, call, verify):
    try:
        path = call()
        torch.cuda.synchronize()
    except symmem.NotSupportedError as e:
        report(name, "refused", str(e)[:200])
        return
    except symmem.SymmemError as e:
        if SHARED and symmem.world().size > 1 and ("nccl" in name or "ordinary" in name or "nccl" in str(e).lower()):
            report(name, "refused", f"shared GPU: {type(e).__name__}: {str(e)[:200]}")
            return
        report(name, "FAIL", f"{type(e).__name__}: {str(e)[:300]}")
        return
    ok, err = verify()
    report(name, "ok" if ok else "FAIL", f"path={path} max_abs_err={err:g}")


def graph_checks(w):
    n, me = w.size, w.rank
    count = 1 << 16
    t = symmem.empty(count, torch.bfloat16)
    ag_out = symmem.empty(count * n, torch.bfloat16)
    s = torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.stream(s):
            symmem.all_reduce(t)  # warm up on the capture stream
            symmem.all_gather_into_tensor(ag_out, t)
        torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s):
            symmem.all_reduce(t)
            symmem.all_gather_into_tensor(ag_out, t)
        path = w.group.last_path()
    except symmem.SymmemError as e:
        report("graph-capture", "FAIL", f"{type(e).__name__}: {str(e)[:300]}")
        return
    bad = 0
    for it in range(3):
        seed = shared_seed(w)
        t.copy_(data(seed, me, count, torch.bfloat16))
        torch.cuda.synchronize()
        g.replay()
        torch.cuda.synchronize()
        want = torch.stack([data(seed, r, count, torch.bfloat16) for r in range(n)]).float().sum(0)
        ok1, _ = close(t, want, torch.bfloat16)
        ok2, _ = close(ag_out, t.float().repeat(n), torch.bfloat16)
        bad += (not ok1) + (not ok2)
    report("graph-replay", "ok" if bad == 0 else "FAIL", f"3 replays of all_reduce + all_gather, {bad} wrong; path {path}")
    # Allocation inside capture: the graph's pool is paused while symmem's is used.
    g2 = torch.cuda.CUDAGraph()
    try:
        gpool = torch.cuda.graph_pool_handle()  # the graph's pool, known before capture (as SGLang does)
        symmem.set_graph_pool_id(gpool)
        with torch.cuda.graph(g2, pool=gpool, stream=s):
            with symmem.use_symmetric_memory():
                y = torch.empty(count, device="cuda", dtype=torch.bfloat16)
            y.fill_(1)
            symmem.all_reduce(y)
        g2.replay()
        torch.cuda.synchronize()
        ok = symmem.is_symmetric(y) and bool((y.float() == n).all())
        report("graph-alloc-inside", "ok" if ok else "FAIL", f"y symmetric={symmem.is_symmetric(y)} y[0]={float(y[0])}")
    except Exception as e:  # noqa: BLE001 - report whatever the capture refused
        report("graph-alloc-inside", "FAIL", f"{type(e).__name__}: {str(e)[:300]}")


# All-to-all. Split sizes count rows of dim 0; rows of W elements check that
# the package turns rows into the library's element counts.
W = 3
SENTINEL = -7  # fills outputs first: rows past what a call receives must keep it


def split_matrix(seed, n, hi=6):
    """m[i][j]: rows rank i sends rank j, from seed (every rank draws the
    same); about a quarter zeros, and rank 0 sends the last rank nothing."""
    rng = random.Random(seed)
    m = [[0 if rng.random() < 0.25 else rng.randint(1, hi) for _ in range(n)] for _ in range(n)]
    if n > 1:
        m[0][n - 1] = 0
    return m


def a2a_inputs(seed, m, dtype):
    """Every rank's input rows (each rank regenerates the others' from the seed)."""
    return [data(seed, r, sum(m[r]) * W, dtype).view(-1, W) for r in range(len(m))]


def a2a_want(ins, m, me):
    """What rank me receives: rank r's block for me, in rank order."""
    return torch.cat([ins[r][sum(m[r][:me]):sum(m[r][:me + 1])] for r in range(len(m))])


def exact(out, want, rows):
    """out's first rows equal want bit for bit, and the rest still holds SENTINEL."""
    got = out.reshape(-1, W).cpu()
    head, tail = got[:rows], got[rows:]
    ok = head.shape == want.shape and torch.equal(head, want) and bool((tail == SENTINEL).all())
    err = float((head.float() - want.float()).abs().max()) if head.shape == want.shape and rows else 0.0
    return ok, err


def a2a_algos():
    """auto and every algorithm the library names: those the group does not
    serve for all-to-all are refused (NotSupportedError) with the reason."""
    return [None] + [a for a in _codes.ALGOS if a != "auto"]


def a2a_checks(w):
    n, me = w.size, w.rank
    # Buffers: symmetric on both sides; ordinary on both; an ordinary input
    # into a symmetric output (copy engines' case). Symmetric buffers are
    # allocated at capacities every rank computes alike (pool allocations
    # must match across ranks), and passed whole with the split sizes.
    kinds = ("symmetric", "ordinary", "ordinary input")

    def alloc(kind, side, rows, dtype):
        if kind == "symmetric" or (kind == "ordinary input" and side == "out"):
            return symmem.empty((max(rows, 1), W), dtype)
        return torch.empty((max(rows, 1), W), dtype=dtype, device="cuda")

    for dtype in (torch.float32, torch.bfloat16, torch.int32):
        dt = str(dtype)[6:]
        seed = shared_seed(w)
        m = split_matrix(seed, n)
        ins = a2a_inputs(seed, m, dtype)
        want, recv = a2a_want(ins, m, me), [m[r][me] for r in range(n)]
        cap_in = max(sum(row) for row in m)
        cap_out = max(sum(m[r][j] for r in range(n)) for j in range(n))
        eq = 4  # rows per block of the equal form
        eseed = shared_seed(w)
        eins = [data(eseed, r, n * eq * W, dtype).view(-1, W) for r in range(n)]
        ewant = torch.cat([eins[r][me * eq:(me + 1) * eq] for r in range(n)])
        # One set of buffers per kind for every algorithm: inputs written
        # once, outputs refilled with SENTINEL before each call.
        bufs = {}
        for kind in kinds:
            ei, si = alloc(kind, "in", n * eq, dtype), alloc(kind, "in", cap_in, dtype)
            ei.copy_(eins[me].cuda())
            si[:sum(m[me])].copy_(ins[me].cuda())
            bufs[kind] = ei, alloc(kind, "out", n * eq, dtype), si, alloc(kind, "out", cap_out, dtype)
        vdev = VdevBufs(m, ins, dtype)
        for algo in a2a_algos():
            for kind, (ei, eo, si, sout) in bufs.items():
                tag = f"{dt} {kind} algo={algo or 'auto'}"
                eo.fill_(SENTINEL)
                check(f"all_to_all_single equal {tag}", lambda: synced(symmem.all_to_all_single(eo, ei, algo=algo)),
                      lambda: exact(eo, ewant, n * eq))
                sout.fill_(SENTINEL)
                check(f"all_to_all_single splits {tag} m={m}",
                      lambda: synced(symmem.all_to_all_single(sout, si, recv, m[me], algo=algo)),
                      lambda: exact(sout, want, sum(recv)))
            vdev.check(f"all_to_all_vdev {dt} symmetric algo={algo or 'auto'}", want, algo)
        del bufs, vdev
    for algo in a2a_algos():
        overrun_check(w, algo)


def splits_want(recv_elems):
    """out_splits_offsets as all_to_all_vdev writes it: counts, then each
    block's offset (exclusive prefix sums)."""
    offs = [sum(recv_elems[:i]) for i in range(len(recv_elems))]
    return torch.tensor(recv_elems + offs, dtype=torch.int64)


class VdevBufs:
    """all_to_all_vdev's four symmetric buffers for split matrix m, the
    input written from ins and the splits (elements) on the GPU."""

    def __init__(self, m, ins, dtype):
        n, me = len(m), symmem.world().group.rank
        cap_in = max(sum(row) for row in m)
        cap_out = max(sum(m[r][j] for r in range(n)) for j in range(n))
        self.inp, self.out = symmem.empty(max(cap_in, 1) * W, dtype), symmem.empty(max(cap_out, 1) * W, dtype)
        self.splits, self.so = symmem.empty(n, torch.int64), symmem.empty(2 * n, torch.int64)
        self.inp[:sum(m[me]) * W].copy_(ins[me].reshape(-1).cuda())
        self.splits.copy_(torch.tensor([c * W for c in m[me]], dtype=torch.int64))
        self.recv = [m[r][me] * W for r in range(n)]

    def check(self, name, want, algo):
        """Data, the received counts and offsets, and nothing past them written."""
        self.out.fill_(SENTINEL)
        self.so.fill_(-1)

        def verify():
            ok, err = exact(self.out, want, sum(self.recv) // W)
            sok = torch.equal(self.so.cpu(), splits_want(self.recv))
            return ok and sok, err if sok else float("inf")
        check(name, lambda: vdev_sync(self.inp, self.out, self.splits, self.so, algo), verify)


def synced(path):
    """Waits for the call that returned path, and the world's Synchronize:
    the kernel path checks split counts on the GPU and reports a refusal
    with the group's next call or Synchronize, which must be this call's."""
    torch.cuda.synchronize()
    symmem.world().synchronize()
    return path


def vdev_sync(inp, out, splits, so, algo=None):
    return synced(symmem.all_to_all_vdev(inp, out, splits, so, algo=algo))


def overrun_check(w, algo):
    """Splits that sum past out's capacity: InvalidArgumentError on every
    rank, and nothing written past the capacity (out is the head of a larger
    symmetric buffer filled with SENTINEL)."""
    n, cap = w.size, 64
    name = f"all_to_all_vdev overrun algo={algo or 'auto'}"
    per = cap // n + 1  # each rank sends every rank this many: each receives n*per > cap
    inp, big = symmem.empty(n * per, torch.float32), symmem.empty(2 * cap, torch.float32)
    splits, so = symmem.empty(n, torch.int64), symmem.empty(2 * n, torch.int64)
    inp.fill_(1)
    big.fill_(SENTINEL)
    splits.fill_(per)
    try:
        vdev_sync(inp, big[:cap], splits, so, algo)
        report(name, "FAIL", f"{n} ranks x {per} elements into a capacity of {cap} ran")
        return
    except symmem.NotSupportedError as e:
        report(name, "refused", str(e)[:200])
        return
    except symmem.InvalidArgumentError as e:
        torch.cuda.synchronize()
        b = big.cpu()
        past, inside = int((b[cap:] != SENTINEL).sum()), int((b[:cap] != SENTINEL).sum())
        report(name, "ok" if past == 0 else "FAIL",
               f"InvalidArgumentError: {str(e)[:160]}; {past} elements past the capacity written, {inside} inside")
    except symmem.SymmemError as e:
        report(name, "FAIL", f"want InvalidArgumentError, got {type(e).__name__}: {str(e)[:200]}")


def a2a_graph_check(w):
    """all_to_all_vdev (the first path that serves it) captured once in a
    CUDA graph, replayed twice with new splits and data written between
    replays: the graph reads the splits from the GPU at each replay."""
    n, me = w.size, w.rank
    seeds = [shared_seed(w), shared_seed(w)]
    ms = [split_matrix(s, n) for s in seeds]
    cap_in = max(sum(row) for m in ms for row in m)
    cap_out = max(sum(m[r][j] for r in range(n)) for m in ms for j in range(n))
    inp, out = symmem.empty(max(cap_in, 1) * W), symmem.empty(max(cap_out, 1) * W)
    splits, so = symmem.empty(n, torch.int64), symmem.empty(2 * n, torch.int64)
    splits.zero_()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    # The first algorithm that runs device splits here (auto may not: the
    # kernel path serves them only when forced), warmed up on the capture
    # stream.
    refusals = []
    for algo in a2a_algos():
        try:
            with torch.cuda.stream(s):
                vdev_sync(inp, out, splits, so, algo)
            break
        except symmem.SymmemError as e:  # the vdev checks above report each path's failures
            refusals.append(f"{algo or 'auto'}: {type(e).__name__}: {str(e)[:100]}")
    else:
        why = "; ".join(refusals)
        print(f"SKIP all_to_all_vdev graph: no path runs device splits on this group: {why}", flush=True)
        report("all_to_all_vdev graph", "refused", f"skipped: {why[:300]}")
        return
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g, stream=s):
            symmem.all_to_all_vdev(inp, out, splits, so, algo=algo)
        path = w.group.last_path()
    except symmem.SymmemError as e:
        report("all_to_all_vdev graph", "FAIL", f"capture: {type(e).__name__}: {str(e)[:300]}")
        return
    bad = []
    for i, (seed, m) in enumerate(zip(seeds, ms)):
        ins = a2a_inputs(seed, m, torch.float32)
        inp[:sum(m[me]) * W].copy_(ins[me].reshape(-1).cuda())
        splits.copy_(torch.tensor([c * W for c in m[me]], dtype=torch.int64))
        out.fill_(SENTINEL)
        torch.cuda.synchronize()
        g.replay()
        torch.cuda.synchronize()
        try:
            w.synchronize()  # a count check that failed on the GPU is reported here
        except symmem.SymmemError as e:
            bad.append(f"replay {i} m={m}: {type(e).__name__}: {str(e)[:200]}")
            continue
        recv = [m[r][me] * W for r in range(n)]
        ok, _ = exact(out, a2a_want(ins, m, me), sum(recv) // W)
        if not (ok and torch.equal(so.cpu(), splits_want(recv))):
            bad.append(f"replay {i} m={m}")
    report("all_to_all_vdev graph", "FAIL" if bad else "ok",
           f"2 replays with new splits, wrong: {bad or 'none'}; path {path}")


def run_mismatch(w):
    t = symmem.empty(1024, torch.float32)
    try:
        symmem.all_reduce(t[: 512 + w.rank])
        torch.cuda.synchronize()
        report("mismatch", "FAIL", "a count mismatch ran")
    except symmem.MismatchError as e:
        report("mismatch", "ok", f"MismatchError: {str(e)[:200]}")
    t.fill_(1)
    symmem.all_reduce(t)  # still usable afterwards
    torch.cuda.synchronize()
    report("after-mismatch", "ok" if bool((t == w.size).all()) else "FAIL", f"t[0]={float(t[0])}")


def spin(ns=3000):
    """Busy host time between calls, with little memory traffic."""
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def nccl_lib():
    p = os.environ.get("SYMMEM_NCCL_LIB")
    if p:
        return p
    for c in glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "nvidia", "nccl", "lib", "libnccl.so*")):
        return c
    return "libnccl.so.2"


def run_cost(w):
    """Host cost per call, layer by layer (the Go and C layers come from
    BenchmarkGoAllReduce and abi_cost in scripts/gpu-python.sh): ctypes
    into symmem with arguments ready on each stream (symmem_collective with
    six c_void_p argtypes, the package's call before ABI version 3; and the
    builtin function the package makes of symmem_py_collective, its call
    now), the package on torch's default stream (CU_STREAM_LEGACY) and on
    a side stream, the package's torch path as it was before (ABI 2: ten
    tensor reads, six argtypes), its general path, its Python work alone,
    and NCCL through ctypes as vLLM calls it. Rows are interleaved batch by
    batch (python/bench/hostcost.py), the GPU drained untimed after each
    batch.

    Diagnostic rows, for a package row above ctypes + its Python work:
    "Python work, then ctypes" runs the two back to back (no package call:
    what remains above it is the package call's own); the spin rows ask
    whether 3 us of host time between calls makes the library call dearer."""
    count = 1024
    inp, out = symmem.empty(count, torch.float32), symmem.empty(count, torch.float32)
    plain_in, plain_out = torch.zeros(count, device="cuda"), torch.zeros(count, device="cuda")
    dev = torch.cuda.current_device()
    raw = torch._C._cuda_getCurrentRawStream
    side = torch.cuda.Stream()
    on_side = functools.partial(torch.cuda.stream, side)
    lib, gh, coll = symmem._lib.lib, w.group.handle, symmem._lib.collective
    six = lib.symmem_collective  # the package's binding before ABI version 3: six c_void_p argtypes
    six.restype, six.argtypes = ctypes.c_int, [ctypes.c_void_p] * 6
    ia, oa = inp.data_ptr(), out.data_ptr()
    call = symmem._ops.AR | 7 << 8  # all-reduce, float32, sum, auto
    ops = symmem._ops
    symmem.all_reduce(inp, output=out)  # loads torch into the package
    torch_path = ops._T is torch.Tensor and type(inp) is torch.Tensor
    noop_ar = noop_copy(ops, "all_reduce")
    if noop_ar(inp, output=out) is not None:
        raise SystemExit("the no-op copy of all_reduce called the library")
    # functools.partial: a ctypes row times the ctypes call itself; its
    # status is checked before the timing and after it.
    coll_null = functools.partial(six, gh, call, ia, oa, count, None)
    coll_legacy = functools.partial(coll, gh, call, ia, oa, count, 1)  # the package's call
    checked = [("ctypes symmem_all_reduce(8 args), stream NULL",
                functools.partial(lib.symmem_all_reduce, gh, ia, oa, count, 7, 0, None, None)),
               ("ctypes symmem_collective(6 args), stream NULL", coll_null),
               ("ctypes symmem_collective(6 args), CU_STREAM_LEGACY", functools.partial(six, gh, call, ia, oa, count, 1)),
               ("builtin symmem_collective (the package's), LEGACY", coll_legacy),
               ("builtin symmem_collective (the package's), stream NULL",
                functools.partial(coll, gh, call, ia, oa, count, 0)),
               ("ctypes symmem_collective(6 args), side stream",
                functools.partial(six, gh, call, ia, oa, count, side.cuda_stream))]
    for _, f in checked:
        if (r := f()) < 0:
            raise symmem._lib.error(r)
    # vLLM-style: ctypes binding of libnccl, a world of 1.
    nccl = ctypes.CDLL(nccl_lib())

    class UniqueId(ctypes.Structure):
        _fields_ = [("internal", ctypes.c_byte * 128)]

    nccl.ncclGetUniqueId.argtypes = [ctypes.POINTER(UniqueId)]
    nccl.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, UniqueId, ctypes.c_int]
    nccl.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                   ctypes.c_void_p, ctypes.c_void_p]
    uid, comm = UniqueId(), ctypes.c_void_p()
    assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0
    assert nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0
    dt = {torch.float32: 7, torch.bfloat16: 9, torch.float16: 6}

    def vllm_all_reduce(t_in, t_out):  # the shape of vLLM's PyNcclCommunicator.all_reduce
        r = nccl.ncclAllReduce(t_in.data_ptr(), t_out.data_ptr(), t_in.numel(), dt[t_in.dtype], 0, comm,
                               raw(t_in.get_device()))
        if r != 0:
            raise RuntimeError(f"NCCL error {r}")

    def before_all_reduce(tensor, output):
        """The package's torch path before ABI version 3 (commit 13c1806),
        out of place on the current stream, for a before/after in one run:
        ten tensor reads (the devices too) and six c_void_p argtypes."""
        g = symmem._core._default_group
        d, dv, n = tensor.dtype, tensor.get_device(), tensor.numel()
        call = ops._AR_OP[0] | ops._TDT[d]
        if (dv >= 0 and g.cuda and tensor.is_contiguous() and output.__class__ is torch.Tensor and output.dtype is d
                and output.get_device() == dv and output.numel() == n and output.is_contiguous()):
            r = six(g.handle, call, tensor.data_ptr(), output.data_ptr(), n, raw(dv) or 1)
            return ops._PATHS[r] if r >= 0 else ops._fail(r)
        raise SystemExit("before_all_reduce: not the torch path")

    pa, po = plain_in.data_ptr(), plain_out.data_ptr()
    ar = lambda: symmem.all_reduce(inp, output=out)  # noqa: E731
    if before_all_reduce(inp, out) != ar():
        raise SystemExit("the package before and now took different paths")
    general = ops._all_reduce
    rows = [("torch.cuda.current_stream().cuda_stream", lambda: torch.cuda.current_stream().cuda_stream),
            ("torch._C._cuda_getCurrentRawStream(dev)", functools.partial(raw, dev)),
            ("ctypes floor: symmem_abi_version()", lib.symmem_abi_version),
            *checked,
            ("symmem.all_reduce(pool tensors, output=), default stream", ar),
            ("symmem.all_reduce(pool tensors, output=), side stream", ar, on_side),
            ("before: the package's torch path of ABI 2, default stream", lambda: before_all_reduce(inp, out)),
            ("symmem.all_reduce, general path (_ops._all_reduce)",
             lambda: general(inp, 0, None, out, None, None, None)),
            ("symmem.all_reduce Python work (library call a no-op)", lambda: noop_ar(inp, output=out)),
            ("diag: Python work, then builtin LEGACY", lambda: (noop_ar(inp, output=out), coll_legacy())),
            ("diag: 3 us spin alone", spin),
            ("diag: 3 us spin, then builtin LEGACY", lambda: (spin(), coll_legacy())),
            ("torch reads of one tensor (_ops._tensor)", functools.partial(ops._tensor, inp, True)),
            ("NCCL ncclAllReduce via ctypes, args ready, stream NULL",
             functools.partial(nccl.ncclAllReduce, pa, po, count, 7, 0, comm, None)),
            ("vLLM-style pynccl all_reduce(tensor), default stream", lambda: vllm_all_reduce(plain_in, plain_out))]
    res = interleaved(rows, 3000, drain=torch.cuda.synchronize)
    for name, f in checked:
        if (r := f()) < 0:
            raise SystemExit(f"{name}: failed after timing: {symmem._lib.error(r)}")
    print("COST host us/call from Python: cuda backend, 1024 float32 out of place, world of 1, best and median of 7 "
          "interleaved rounds of 3000 calls (batches of 200), GPU", torch.cuda.get_device_name(),
          "; package calls take the", "torch path" if torch_path else "general path")
    for name, best, med in res:
        print(f"COST {name:58s} {best:8.3f} {med:8.3f}")
    print(f"COST path {w.group.last_path()}")


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "checks"
    torch.cuda.set_device(device())
    w = symmem.init(backend="cuda", timeout=60, checked=(mode == "mismatch"))
    {"checks": run_checks, "mismatch": run_mismatch, "cost": run_cost}[mode](w)
    torch.cuda.synchronize()
    failed = [n for n, s in RESULTS if s == "FAIL"]
    print(f"SUMMARY rank {w.rank}/{w.size} {mode}: {len(RESULTS)} checks, {len(failed)} failed, "
          f"{sum(s == 'refused' for _, s in RESULTS)} refused", flush=True)
    w.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
