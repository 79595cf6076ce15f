#!/usr/bin/env bash
# python-cost.sh: host cost of one all-reduce call, layer by layer, on the
# CPU backend (world of 1, 1024 float32 in pool memory, out of place), in
# one run. Needs Go, cc and python3 (standard library only).
#   Go call          BenchmarkGoAllReduce/cpu            (cmd/libsymmem/cost_test.go)
#   ABI's Go side    BenchmarkABIAllReduce/cpu           (no cgo entry; -benchmem)
#   C -> library     .build/abi_cost                     (cmd/libsymmem/testdata/abi_cost.c)
#   Python           python/bench/host_cost.py           (ctypes floor, ctypes args ready, the package)
#   torch path       python/bench/torch_path.py          (Python work on fake tensors vs a pynccl-style wrapper)
# Every layer: best and median of 7 rounds, calls timed in batches of 200
# (the Python rows and the C rows interleaved, round by round).
# Usage: scripts/python-cost.sh [calls per round, default 20000]
set -eu
cd "$(dirname "$0")/.."
N=${1:-20000}
mkdir -p .build
go build -buildmode=c-shared -o .build/libsymmem.so ./cmd/libsymmem
go build -o .build/symmem ./cmd/symmem
cc -O2 -std=c11 -Wall -I include cmd/libsymmem/testdata/abi_cost.c -L .build -lsymmem -Wl,-rpath,'$ORIGIN' -ldl \
  -o .build/abi_cost
echo "== $(date -u +%FT%TZ) $(uname -m), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== $(go version | cut -d' ' -f3), $(python3 --version), $(cc --version | head -1)"
echo "== Go: symmem.Group.AllReduce, and the C ABI's Go side (7 x $N calls)"
go test -c -o .build/libsymmem.test ./cmd/libsymmem
# Seven runs of one count each: the variants' rounds alternate (-count 7 runs
# a variant's seven back to back).
for i in 1 2 3 4 5 6 7; do
  .build/libsymmem.test -test.run XXX -test.bench 'GoAllReduce/cpu|ABIAllReduce/cpu' -test.benchmem \
    -test.benchtime "${N}x" -test.count 1
done | python3 scripts/bench-cost-rows.py
echo "== C calling libsymmem.so"
.build/symmem launch -n 1 --no-prefix .build/abi_cost cpu "$N"
echo "== Python"
SYMMEM_LIBRARY=$PWD/.build/libsymmem.so PYTHONPATH=$PWD/python .build/symmem launch -n 1 --no-prefix \
  python3 python/bench/host_cost.py "$N"
echo "== Python work on the torch path (fake tensors, library calls no-ops)"
SYMMEM_LIBRARY=$PWD/.build/libsymmem.so PYTHONPATH=$PWD/python python3 python/bench/torch_path.py "$N"
