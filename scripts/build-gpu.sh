#!/usr/bin/env bash
# build-gpu.sh: build, on the build machine (Go + cgo), everything the GPU
# scripts run on a GPU host (which has no Go toolchain) into .build/
# (git-ignored). Binaries are stripped (-s -w), yet all of them with the
# tracked tree pass the device tool's 64 MiB: carry the files a call runs
# (docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .build
export CGO_ENABLED=1
go test -c -ldflags="-s -w" -o .build/native-cuda.test ./internal/native/cudadrv
go test -c -ldflags="-s -w" -o .build/native-cublas.test ./internal/native/cublas
go test -c -ldflags="-s -w" -o .build/nccl-backend.test ./internal/backend/nccl
go test -c -ldflags="-s -w" -o .build/symmem.test .
go test -c -ldflags="-s -w" -o .build/shm.test ./internal/backend/shm
go test -c -ldflags="-s -w" -o .build/members.test ./internal/backend/internal/members
go build -ldflags="-s -w" -o .build/symmem ./cmd/symmem
go build -ldflags="-s -w" -o .build/allreduce ./examples/allreduce
go build -buildmode=c-shared -o .build/libsymmem.so ./cmd/libsymmem
go test -c -ldflags="-s -w" -o .build/libsymmem.test ./cmd/libsymmem
cc -O2 -std=c11 -I include cmd/libsymmem/testdata/abi_cost.c -L .build -lsymmem -Wl,-rpath,'$ORIGIN' -ldl -o .build/abi_cost
python3 python/build_wheel.py # dist/symmem-*.whl, for scripts/gpu-wheel.sh
ls -l .build
