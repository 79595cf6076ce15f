#!/usr/bin/env bash
# gpu-kernels.sh: symmem's PTX kernels (backend/cuda/ptx/*.ptx, written by
# backend/cuda/internal/ptxgen) on the GPU host, as ranks of `symmem launch`
# with 2 and 3 ranks: all-gather correctness (every algorithm, the kernel
# among them), all-reduce / reduce-scatter kernel correctness (bit-exact),
# CUDA graph capture and replay, and (2 ranks) the watchdog when a peer dies.
#
# Build on the build machine first (no Go toolchain on GPU hosts):
#
#   CGO_ENABLED=1 go build -o .build/symmem ./cmd/symmem
#   CGO_ENABLED=1 go test -c -o .build/cuda.test ./backend/cuda
#
# then run `scripts/gpu-kernels.sh [outdir]` there. Logs go to outdir ($OUT,
# else ./gpu-kernels-out); a short table is printed last and kept in
# summary.txt. Success: every row rc=0, every test PASS (none FAIL or SKIP),
# "0 wrong" in the CORRECTNESS and ALLREDUCE KERNEL lines, "0 wrong slices"
# (or [0 0 ...]) in every GRAPH line, and PEER DIES reporting an error after
# about 3 s rather than hanging. Steps: STEPS="n2 n3 peerdies".
set -u
OUTDIR=${1:-${OUT:-./gpu-kernels-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
# Never NVLink multicast on shared hosts.
export NCCL_NVLS_ENABLE=0
# The GPU host has one GPU: let the ranks share it (the lead's same-device
# option of issue "Several ranks on one GPU"; NCCL itself refuses two ranks on
# one GPU, so the NCCL rows drop out and the kernel and copy-engine paths run).
export SYMMEM_SHARE_DEVICE=1
if [ -z "${SYMMEM_NCCL_LIB:-}" ]; then
  for f in /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2; do
    [ -e "$f" ] && export SYMMEM_NCCL_LIB="$f"
  done
fi
STEPS=${STEPS:-"n2 n3 peerdies"}
TESTS='^TestGPU(AllGatherCorrect|AllReduceKernel|GraphCapture)$'
declare -A RC SECS
step() { # name timeout_s cmd...
  local name=$1 t=$2; shift 2
  local t0=$(date +%s)
  echo "=== $name: $*" | tee "$OUTDIR/$name.log"
  timeout -k 10 "$t" "$@" >>"$OUTDIR/$name.log" 2>&1
  RC[$name]=$?
  SECS[$name]=$(( $(date +%s) - t0 ))
  echo "=== $name: rc=${RC[$name]} in ${SECS[$name]}s" | tee -a "$OUTDIR/$name.log"
}
has() { [[ " $STEPS " == *" $1 "* ]]; }
ranks() { # n timeout_s test_regexp
  local n=$1 t=$2 re=$3
  step "n$n" "$t" .build/symmem launch -n "$n" --timeout "$((t - 10))s" -- \
    .build/cuda.test -test.v -test.count=1 -test.timeout "$((t - 20))s" -test.run "$re"
}
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader; ls -l .build/; } >"$OUTDIR/env.log" 2>&1
has n2 && ranks 2 "${T_N2:-220}" "$TESTS"
has n3 && ranks 3 "${T_N3:-280}" "$TESTS"
# Rank 1 exits before a kernel; rank 0's watchdog (3 s) must trap.
has peerdies && step peerdies "${T_PEER:-60}" .build/symmem launch -n 2 --timeout 50s -- \
  .build/cuda.test -test.v -test.count=1 -test.timeout 40s -test.run '^TestGPUPeerDies$'

# ---- short table, last ----
{
  echo "==================== gpu-kernels summary ($(date -u +%FT%TZ)) ===================="
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1
  printf '%-9s %4s %6s  %s\n' step rc secs "tests (rank 0: PASS/FAIL/SKIP)"
  for s in $STEPS; do
    res=$(grep -h -E '^(\[rank 0\] )?--- (PASS|FAIL|SKIP): TestGPU' "$OUTDIR/$s.log" 2>/dev/null |
      sed -E 's/^\[rank 0\] //; s/^--- ([A-Z]+): TestGPU([A-Za-z]+).*/\2=\1/' | tr '\n' ' ')
    printf '%-9s %4s %6s  %s\n' "$s" "${RC[$s]:-?}" "${SECS[$s]:-?}" "${res:-no test result}"
  done
  for s in $STEPS; do
    grep -h -E '(CORRECTNESS|ALLREDUCE KERNEL|^(\[rank 0\] )?GRAPH|PEER DIES)' "$OUTDIR/$s.log" 2>/dev/null |
      grep -v '=== RUN' | sed "s/^/$s: /"
  done
} | tee "$OUTDIR/summary.txt"
