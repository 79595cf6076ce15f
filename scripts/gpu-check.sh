#!/usr/bin/env bash
# gpu-check.sh: every GPU check and benchmark of symmem, run on the GPU host
# in one go. Build first on the build machine (no Go toolchain on GPU hosts):
#
#   CGO_ENABLED=1 go test -c -o .build/native-cuda.test ./internal/native/cuda
#   CGO_ENABLED=1 go test -c -o .build/cuda-backend.test ./backend/cuda
#   CGO_ENABLED=1 go build -o .build/symmem ./cmd/symmem
#   CGO_ENABLED=1 go test -c -o .build/symmem.test .
#
# then run `scripts/gpu-check.sh [outdir]` there. Full logs go to outdir
# ($OUT, else ./gpu-check-out); a short table is printed last.
# Steps can be chosen with STEPS="env native tune hostcost graph correct bench launch".
set -u
OUTDIR=${1:-${OUT:-./gpu-check-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
STEPS=${STEPS:-"env native tune hostcost api ar graph correct bench launch"}
# Prefer the NCCL wheel of the Python venv (2.28.9, what torch uses here);
# else the loader's libnccl.so.2.
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
has() { [[ " $STEPS " == *" $1 "* ]]; }

if has env; then
  {
    date -u; uname -a
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv
    nvidia-smi topo -m
    echo "SYMMEM_NCCL_LIB=${SYMMEM_NCCL_LIB:-unset}"
    ls -l /usr/lib/x86_64-linux-gnu/libnccl.so* 2>/dev/null
    ls -l .build/
  } >"$OUTDIR/env.log" 2>&1
  RC[env]=0
fi
has native && step native ${T_NATIVE:-120} .build/native-cuda.test -test.v -test.count=1
# Kernel CTA counts and copy-engine variants: GPU time, wall time and host
# issue time per call (SYMMEM_TUNE_VARIANTS / SYMMEM_TUNE_SIZES narrow it).
has tune && step tune ${T_TUNE:-200} .build/cuda-backend.test -test.v -test.count=1 -test.run '^TestGPUCETune$' -test.timeout 190s
has hostcost && step hostcost ${T_HOSTCOST:-120} .build/cuda-backend.test -test.v -test.count=1 -test.run '^TestGPUHostCost$' -test.timeout 110s
has api && step api ${T_API:-150} .build/symmem.test -test.v -test.count=1 -test.run '^TestGPUUser(API|HostCost)$' -test.timeout 140s
has ar && step ar ${T_AR:-120} .build/cuda-backend.test -test.v -test.count=1 -test.run '^TestGPUAllReduceKernel$' -test.timeout 110s
has graph && step graph ${T_GRAPH:-120} .build/cuda-backend.test -test.v -test.count=1 -test.run '^TestGPUGraphCapture$' -test.timeout 110s
has correct && step correct ${T_CORRECT:-300} .build/cuda-backend.test -test.v -test.count=1 -test.run '^TestGPU(AllGatherCorrect|TwoGroupsOnePool|RegistrationMismatch|PeerDies)$' -test.timeout 290s
if has bench; then
  SYMMEM_BENCH_DIR="$OUTDIR" step bench ${T_BENCH:-300} .build/cuda-backend.test -test.v -test.count=1 -test.run '^TestGPUBench$' -test.timeout 290s
fi
if has launch; then
  # The GPU tests as ranks of `symmem launch -n 2` (launcher-hosted store),
  # then the CLI bench with the cuda backend (works once the root package
  # wires backend/cuda; until then it reports why and fails fast).
  step launch ${T_LAUNCH:-120} bash -c ".build/symmem launch -n 2 -timeout 100s -- .build/cuda-backend.test -test.v -test.count=1 -test.run '^TestGPU(TwoGroupsOnePool|RegistrationMismatch)\$';
    echo '--- symmem bench -backend cuda'; .build/symmem launch -n 2 -timeout 60s -- .build/symmem bench -backend cuda -ops all_gather -dtype bfloat16 -algo nccl,nccl-window,ce,kernel,auto -b 64K -e 1G -f 4 -budget 100ms;
    echo '--- symmem bench -backend cuda -plain'; .build/symmem launch -n 2 -timeout 60s -- .build/symmem bench -backend cuda -ops all_gather -dtype bfloat16 -algo nccl -plain -b 64K -e 1G -f 4 -budget 100ms;
    echo '--- symmem bench -backend cuda all_reduce'; .build/symmem launch -n 2 -timeout 60s -- .build/symmem bench -backend cuda -ops all_reduce -dtype bfloat16 -algo nccl,nccl-window,kernel,auto -b 16K -e 2M -f 2 -budget 100ms;
    .build/symmem launch -n 2 -timeout 60s -- .build/symmem bench -backend cuda -ops all_reduce -dtype bfloat16 -algo nccl,nccl-window,auto -b 4M -e 64M -f 4 -budget 100ms;
    echo '--- symmem bench -backend cuda reduce_scatter'; .build/symmem launch -n 2 -timeout 60s -- .build/symmem bench -backend cuda -ops reduce_scatter -dtype bfloat16 -algo nccl,nccl-window,kernel,auto -b 32K -e 4M -f 2 -budget 100ms;
    .build/symmem launch -n 2 -timeout 60s -- .build/symmem bench -backend cuda -ops reduce_scatter -dtype bfloat16 -algo nccl -plain -b 32K -e 4M -f 2 -budget 100ms;
    .build/symmem launch -n 2 -timeout 60s -- .build/symmem bench -backend cuda -ops all_reduce -dtype bfloat16 -algo nccl -plain -b 16K -e 64M -f 4 -budget 100ms"
fi

# ---- short table, last ----
{
  echo "==================== gpu-check summary ($(date -u +%FT%TZ)) ===================="
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null
  grep -h -m1 'cuda: nccl' "$OUTDIR"/tune.log "$OUTDIR"/correct.log 2>/dev/null | head -1
  for s in $STEPS; do printf '%-8s rc=%s\n' "$s" "${RC[$s]:-?}"; done
  grep -h -E '^--- (FAIL|PASS|SKIP)' "$OUTDIR"/native.log "$OUTDIR"/correct.log "$OUTDIR"/bench.log "$OUTDIR"/tune.log "$OUTDIR"/graph.log "$OUTDIR"/hostcost.log "$OUTDIR"/ar.log 2>/dev/null | sort | uniq -c
  grep -h '^GRAPH' "$OUTDIR"/graph.log 2>/dev/null
  grep -h '^ALLREDUCE KERNEL' "$OUTDIR"/ar.log 2>/dev/null
  grep -h -E '^(LAUNCHCOST|HOSTCOST)' "$OUTDIR"/native.log "$OUTDIR"/hostcost.log 2>/dev/null
  grep -h -E '^ +USERCOST|--- (PASS|FAIL): TestGPUUser' "$OUTDIR"/api.log 2>/dev/null
  grep -h -E '(CORRECTNESS|TWO GROUPS|REGISTRATION MISMATCH|PEER DIES)' "$OUTDIR"/correct.log "$OUTDIR"/launch.log 2>/dev/null | grep -v '=== RUN'
  grep -h -E 'symmem bench|Init|not wired' "$OUTDIR"/launch.log 2>/dev/null | head -5
  echo "--- kernel / copy-engine variants (busbw GB/s, time us, host issue us) ---"
  grep -h '^CETUNE' "$OUTDIR"/tune.log 2>/dev/null
  echo "--- bench (symmetric buffers) ---"
  sed -n '/^BENCH sym/,/^BENCH plain/p' "$OUTDIR"/bench.log 2>/dev/null | grep -v '^BENCH plain' | head -60
  echo "--- bench (plain NCCL, ordinary buffers) ---"
  sed -n '/^BENCH plain/,/^---/p' "$OUTDIR"/bench.log 2>/dev/null | head -30
} | tee "$OUTDIR/summary.txt"
# The device tool returns at most 8 files: pack everything but the summary.
if [ -n "${PACK:-}" ]; then
  tar -C "$OUTDIR" -czf /tmp/gpu-check-logs.tgz --exclude=summary.txt . && \
    find "$OUTDIR" -type f ! -name summary.txt -delete && mv /tmp/gpu-check-logs.tgz "$OUTDIR/logs.tgz"
fi
