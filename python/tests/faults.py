"""Failures that end a job, run by the Go test under `symmem launch`:
an allocation mismatch (detected when the scope ends, raised on every
rank), then the last rank exits and every other rank's next collective
raises instead of hanging. Each surviving rank prints one line per check
and exits 0 only when both raised as they should."""

import array
import os
import sys
import time

import symmem

TIMEOUT = 5.0


def main():
    w = symmem.init(backend="cpu", timeout=TIMEOUT)
    # Different sizes above the 64 MiB minimum segment: every rank creates a
    # segment of another size, and the scope's end refuses to register them.
    try:
        with symmem.use_symmetric_memory():
            b = symmem.empty_buffer((64 << 20) + (w.rank + 1) * (4 << 20), "uint8")
        print(f"rank {w.rank}: FAIL: mismatched allocations were registered", flush=True)
        return 1
    except symmem.MismatchError as e:
        print(f"rank {w.rank}: alloc mismatch raised MismatchError: {str(e)[:120]}", flush=True)
    last = w.size - 1
    if w.rank == last:
        os._exit(0)  # dies without a word
    t0 = time.monotonic()
    try:
        symmem.all_reduce(array.array("f", [1.0] * 16))
        print(f"rank {w.rank}: FAIL: all_reduce with a dead peer returned", flush=True)
        return 1
    except (symmem.PeerError, symmem.SymmemTimeoutError) as e:
        dt = time.monotonic() - t0
        ok = dt < TIMEOUT + 3
        print(f"rank {w.rank}: dead peer raised {type(e).__name__} after {dt:.1f}s: {str(e)[:160]}", flush=True)
        if not ok:
            print(f"rank {w.rank}: FAIL: took longer than the {TIMEOUT}s timeout", flush=True)
            return 1
    del b
    os._exit(0)  # the world cannot close cleanly without its peer


if __name__ == "__main__":
    sys.exit(main())
