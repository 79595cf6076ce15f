#!/usr/bin/env bash
# python-cost.sh: host cost of a Python collective call next to the Go call
# it wraps, on the CPU backend (world of 1, 1024 float32 in pool memory,
# out of place), in one run. Needs Go and python3 (standard library only).
# Results: results/python-cost-<date>.md.
set -eu
cd "$(dirname "$0")/.."
mkdir -p .build
go build -buildmode=c-shared -o .build/libsymmem.so ./cmd/libsymmem
go build -o .build/symmem ./cmd/symmem
echo "== Go: symmem.Group.AllReduce"
go test -run XXX -bench 'GoAllReduce/cpu' -benchtime 20000x -count 5 ./cmd/libsymmem | grep ns/op
echo "== Python (best of 5 runs of ${1:-20000} calls each)"
SYMMEM_LIBRARY=$PWD/.build/libsymmem.so PYTHONPATH=$PWD/python .build/symmem launch -n 1 --no-prefix \
  python3 python/bench/host_cost.py "${1:-20000}"
