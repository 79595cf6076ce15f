"""All-reduce on the CPU backend with the standard library only (no torch,
no GPU): every rank fills a buffer of symmetric memory with its own values,
sums it across the ranks in place, and checks the result.

    go build -buildmode=c-shared -o python/symmem/libsymmem.so ./cmd/libsymmem
    PYTHONPATH=python go run ./cmd/symmem launch --nproc-per-node 2 python3 examples/python/cpu_allreduce.py
    PYTHONPATH=python torchrun --nproc-per-node 2 examples/python/cpu_allreduce.py

(or `pip install` the wheel, docs/python-wheel.md, and drop PYTHONPATH)."""

import array
import sys

import symmem


def main():
    w = symmem.init(backend="cpu")  # reads RANK, WORLD_SIZE, MASTER_ADDR, ... (symmem launch or torchrun)
    n, me = w.size, w.rank
    count = 1 << 16

    # Symmetric memory: pool memory registered with the world, so the
    # all-reduce takes the direct path (no staging copy).
    buf = symmem.empty_buffer(count, "float32")
    for i in range(count):
        buf[i] = me + i % 7
    path = symmem.all_reduce(buf)
    # Sum over ranks r of (r + i%7) = n(n-1)/2 + n*(i%7): small integers,
    # exact in float32.
    bad = [i for i in range(count) if buf[i] != n * (n - 1) / 2 + n * (i % 7)]

    # Ordinary memory works too; it is staged through the pool.
    plain = array.array("f", [float(me)] * 1024)
    staged = symmem.all_reduce(plain)
    bad += [i for i, v in enumerate(plain) if v != n * (n - 1) / 2]

    if bad:
        print(f"rank {me}: {len(bad)} wrong elements, first at {bad[0]}", file=sys.stderr)
        w.close()
        return 1
    if path.staged or not staged.staged:
        print(f"rank {me}: paths {path}, {staged}: want the pool buffer direct, the ordinary one staged",
              file=sys.stderr)
        w.close()
        return 1
    print(f"rank {me}/{n}: all-reduce of {count} float32 ok (path {path.algo}; ordinary memory: {staged.algo}, staged)")
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
