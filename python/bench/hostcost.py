"""Shared parts of the Python host-cost benchmarks (host_cost.py,
torch_path.py, tests/gpu_torch.py cost): rows timed side by side, and the
package with its library call a no-op.

interleaved():
Each round times a batch of every row in turn, with drain() untimed after
each batch (the GPU's queue: a row is enqueue time, never a full queue), so
all rows see the same machine state; a row timed in a block of its own, after
another, can read slower or faster for reasons not its own (GPU host, run 17:
two rows doing the same work read 5.4 and 8.5 us). A row's "best" is its
fastest round, "median" its middle one, in microseconds per call.
"""

import contextlib
import time
import types


def interleaved(rows, n, batch=200, rounds=7, drain=None, out=print):
    """Times rows, each (name, f) or (name, f, ctx): f() is one call; ctx, if
    given, returns a context manager entered around each of the row's
    batches (a stream to run on). Returns [(name, best, median)], a failed
    row with NaN after printing why (each row runs once, untimed, first)."""
    live = []
    for r in rows:
        name, f, ctx = (*r, None)[:3]
        ctx = ctx or contextlib.nullcontext
        try:
            with ctx():
                for _ in range(batch):  # warm up; raises here if the row cannot run
                    f()
        except Exception as e:  # noqa: BLE001 - a row that cannot run says why and is left out
            out(f"COST row failed: {name}: {type(e).__name__}: {str(e)[:300]}")
            continue
        live.append((name, f, ctx))
    if drain is not None:
        drain()
    batches = -(-n // batch)
    b = range(batch)
    per = [[] for _ in live]
    for _ in range(rounds):
        total = [0.0] * len(live)
        for _ in range(batches):
            for j, (_, f, ctx) in enumerate(live):
                with ctx():
                    t0 = time.perf_counter()
                    for _ in b:
                        f()
                    total[j] += time.perf_counter() - t0
                if drain is not None:
                    drain()
        for j, t in enumerate(total):
            per[j].append(t / (batches * batch) * 1e6)
    res = {name: (min(v), sorted(v)[rounds // 2]) for (name, _, _), v in zip(live, per)}
    nan = float("nan")
    return [(name, *res.get(name, (nan, nan))) for name, *_ in rows]


# What the no-op library call returns: a path code no real call returns
# (the highest below 32, far past the algorithms' codes; 15 was one until
# ll took 7, and 15 became ll+staged), so the collective returns None and a
# row can check that the library was not called (TestNoopStatusIsNoPath).
NOOP_STATUS = 31


def noop_copy(module, name):
    """Function name of module (symmem._ops) in a copy of the module whose
    library call (_collective) is a no-op returning NOOP_STATUS: the
    package's Python work alone, on whichever path the call takes. The
    copy shares the module's caches and state as they are now (load torch
    into the package first, with one real call)."""
    g = dict(vars(module))
    g["_collective"] = lambda *args: NOOP_STATUS
    for k, v in list(g.items()):
        if isinstance(v, types.FunctionType) and v.__globals__ is vars(module):
            c = types.FunctionType(v.__code__, g, v.__name__, v.__defaults__, v.__closure__)
            c.__kwdefaults__ = v.__kwdefaults__
            g[k] = c
    return g[name]
