#!/usr/bin/env bash
# gpu-python.sh: the Python package with PyTorch on the GPU host (1 GPU is
# enough: 2 ranks share it with SYMMEM_SHARE_DEVICE=1). Build first on the
# build machine (no Go toolchain on GPU hosts):
#
#   CGO_ENABLED=1 go build -buildmode=c-shared -o .build/libsymmem.so ./cmd/libsymmem
#   CGO_ENABLED=1 go build -o .build/symmem ./cmd/symmem
#   CGO_ENABLED=1 go test -c -o .build/libsymmem.test ./cmd/libsymmem
#   CGO_ENABLED=1 go test -c -o .build/symmem.test .
#   cc -O2 -std=c11 -I include cmd/libsymmem/testdata/abi_cost.c -L .build -lsymmem -Wl,-rpath,'$ORIGIN' -ldl -o .build/abi_cost
#
# (scripts/build-gpu.sh builds these with the rest.)
# then run `scripts/gpu-python.sh [outdir]` there with the venv's python3
# (torch 2.11) first in PATH. Logs go to outdir ($OUT, else
# ./gpu-python-out); a short table is printed last. Success: every row
# "ok" (checks: 0 failed; "refused" rows name an algorithm the backend
# declined, with its reason), and the host-cost table printed last: one
# all-reduce (1024 float32, world of 1) per layer, best and median us/call,
# bottom up: the Go call (own stream, CU_STREAM_LEGACY), the ABI's Go side,
# C calling the library, ctypes with arguments ready (symmem_collective with
# six c_void_p argtypes: the package's call before ABI 3), the builtin the
# package calls now (symmem_py_collective), the package (its torch path now,
# its torch path before ABI 3 copied into the bench as "before", and its
# general path), its Python work alone, and NCCL through ctypes as vLLM
# calls it; rows of one step are timed interleaved (round by round), so they
# compare side by side. The goal: package row <= Go row of the same stream
# + 3 us (package default stream vs Go cuda-legacy). Step local: ordinary
# (non-pool) buffers must be memory of the rank's GPU, refused otherwise
# (TestGPUWorldLocalBuffers, 1 and 2 ranks). "diag" rows: Python work
# and the ctypes call back to back, and 3 us of spin before the call (does
# host time between calls make the library call dearer?). Step py-work: the
# package's Python work on fake tensors beside a pynccl-style wrapper's
# (python/bench/torch_path.py: no torch, no GPU, library calls no-ops).
set -u
OUTDIR=${1:-${OUT:-./gpu-python-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export SYMMEM_LIBRARY="$PWD/.build/libsymmem.so" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
if [ -z "${SYMMEM_NCCL_LIB:-}" ]; then
  for f in /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2; do
    [ -e "$f" ] && export SYMMEM_NCCL_LIB="$f"
  done
fi
declare -A RC
step() { # name timeout_s cmd...
  local name=$1 t=$2; shift 2
  local t0=$(date +%s)
  echo "=== $name: $*" | tee -a "$OUTDIR/$name.log"
  timeout -k 10 "$t" "$@" >>"$OUTDIR/$name.log" 2>&1
  RC[$name]=$?
  echo "=== $name: rc=${RC[$name]} in $(( $(date +%s) - t0 ))s" | tee -a "$OUTDIR/$name.log"
}
{
  date -u; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  python3 -c 'import torch, sys; print(sys.executable, "torch", torch.__version__, "cuda", torch.version.cuda)'
  echo "SYMMEM_NCCL_LIB=${SYMMEM_NCCL_LIB:-unset}"; ls -l .build/
  # A clock read that is a system call (no vDSO clock source) makes every
  # Go timer and scheduler sample dear: part of the host cost picture.
  echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
  python3 -c 'import time, timeit; n = 200000; print("time.monotonic_ns(): %.0f ns/call" % (min(timeit.repeat(time.monotonic_ns, number=n, repeat=5)) / n * 1e9))'
  nproc; grep -m1 "model name" /proc/cpuinfo
} >"$OUTDIR/env.log" 2>&1
T=tests/gpu_torch.py
# The standard-library suite with torch present (CPU tensors on the CPU backend).
step cpu-suite 200 .build/symmem launch -n 2 python3 -m unittest -v python/tests/test_cpu.py
step checks-n1 ${T_CHECKS:-400} .build/symmem launch -n 1 python3 python/$T checks
SYMMEM_SHARE_DEVICE=1 step checks-n2 ${T_CHECKS:-500} .build/symmem launch -n 2 python3 python/$T checks
SYMMEM_SHARE_DEVICE=1 step mismatch-n2 120 .build/symmem launch -n 2 python3 python/$T mismatch
step cost-n1 200 .build/symmem launch -n 1 python3 python/$T cost
step local 200 bash -c 'for n in 1 2; do SYMMEM_GPU_TEST_RANKS=$n .build/symmem.test -test.v -test.count=1 \
  -test.run "^TestGPUWorldLocalBuffers$" -test.timeout 90s || exit; done'
# Seven runs of one count each rather than -count 7 (which runs a variant's
# seven counts back to back): the variants' rounds alternate, as the other
# steps' rows do.
step go-cost 200 bash -c 'for i in 1 2 3 4 5 6 7; do .build/libsymmem.test -test.run XXX \
  -test.bench "GoAllReduce|ABIAllReduce" -test.benchmem -test.benchtime 20000x -test.count 1 -test.v || exit; done'
# Where the cuda variants' allocation per call comes from (run 21: 4 B/op on
# cuda, not in the user API or the ABI: their cpu variants allocate
# nothing): a memory profile at rate 1, read on the build machine with
#   go tool pprof -sample_index=alloc_space -top .build/libsymmem.test <outdir>/cuda-allocs.prof
step go-allocs 120 .build/libsymmem.test -test.run XXX -test.bench 'GoAllReduce/cuda-legacy' -test.benchmem \
  -test.benchtime 20000x -test.memprofilerate 1 -test.memprofile "$OUTDIR/cuda-allocs.prof"
step abi-cost 120 .build/symmem launch -n 1 .build/abi_cost cuda 20000
# The same layers on the CPU backend in a process without torch: is the
# ctypes floor of cost-n1 the host's, or the torch process's?
step cpu-cost 120 .build/symmem launch -n 1 python3 python/bench/host_cost.py 20000
step cpu-abi-cost 120 .build/symmem launch -n 1 .build/abi_cost cpu 20000
step py-work 120 python3 python/bench/torch_path.py 20000
# The examples, 2 ranks on the one GPU.
SYMMEM_SHARE_DEVICE=1 step example-tp 200 .build/symmem launch -n 2 python3 examples/python/tp_layer.py
SYMMEM_SHARE_DEVICE=1 step example-fsdp 200 .build/symmem launch -n 2 python3 examples/python/fsdp_layer.py

echo
echo "step           rc   checks ok / FAIL / refused   (cpu-suite: unittest, see its log)"
for s in cpu-suite checks-n1 checks-n2 mismatch-n2 cost-n1 local go-cost go-allocs abi-cost cpu-cost cpu-abi-cost py-work example-tp example-fsdp; do
  f="$OUTDIR/$s.log"
  printf "%-14s %-4s %s / %s / %s\n" "$s" "${RC[$s]:-?}" "$(grep -c 'CHECK .* ok' "$f" 2>/dev/null)" \
    "$(grep -c 'CHECK .* FAIL' "$f" 2>/dev/null)" "$(grep -c 'CHECK .* refused' "$f" 2>/dev/null)"
done
echo
grep -h "FAIL" "$OUTDIR"/checks-*.log "$OUTDIR"/mismatch-*.log 2>/dev/null | head -20
echo
echo "host cost per layer (us/call: best, median)"
python3 scripts/bench-cost-rows.py <"$OUTDIR/go-cost.log" 2>/dev/null | grep COST
for f in abi-cost cost-n1 cpu-abi-cost cpu-cost py-work; do grep -h "COST" "$OUTDIR/$f.log" 2>/dev/null | sed 's/^\[rank [0-9]*\] //'; done
