#!/usr/bin/env bash
# gpu-check.sh: symmem's GPU checks and benchmarks on a GPU host, in one go,
# on any number of GPUs: with fewer GPUs than ranks the ranks share them
# (SYMMEM_SHARE_DEVICE=1; NCCL paths are then unavailable and skipped).
# GPU hosts have no Go toolchain; build on the build machine first:
#
#   scripts/build-gpu.sh          # test binaries and the CLI into .build/
#
# then run `scripts/gpu-check.sh [outdir]` there. Full logs go to outdir
# ($OUT, else ./gpu-check-out); a short table is printed last.
# STEPS chooses steps (default: all below, in order):
#   env native doctor world2 world3 [world4] ag10 stress2 stress3 [stress4]
#   nccl mps verify python ecosystem cpu cestop
# (world4 and stress4 by default where 4 or more GPUs are visible; hosts,
# hostsstress, hostsdie and hostsbench, 4 ranks as 2 hosts (2 ranks with 1
# GPU), only when named: hostsdie
# runs the peer-exit test across hosts 5 times).
# world2/world3/world4 run every GPU test of the user API (root package) with
# 2, 3 and 4 ranks; stress2/3/4 run TestGPUStress (random odd and aligned
# counts on every path, forced and auto, two groups, graph replays) with as
# many ranks; nccl runs internal/backend/nccl's tests (2+ GPUs only: NCCL refuses two
# ranks on one GPU); verify, python, ecosystem and cpu run the topical
# scripts (gpu-verify.sh: one rank, verification, bounded NCCL init;
# gpu-python.sh: the Python package with torch; gpu-ecosystem.sh: torchrun
# both ways, -G graphs, a GPU sweep with its plot; cpu-compare.sh: the CPU
# backend against Open MPI) with logs in subfolders. cestop runs the
# copy-engine mismatch test with 2 and 3 ranks (TestGPUCopyEngineMismatch): its
# handshake traps, which ends the contexts of every process on the GPU under
# MPS, so it runs last and alone. PACK=1 packs every log
# but the summary into logs.tgz (the device tool returns few files).
# MPS=1 runs the rank steps under NVIDIA MPS (started and stopped here; needs
# root), so ranks sharing a GPU run their kernels concurrently instead of
# time-slicing. STRESS_SECONDS bounds each stress run (default 120).
set -u
OUTDIR=${1:-${OUT:-./gpu-check-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The torch venv first in PATH, its NCCL, GPUS, mps_on/mps_off, step.
. scripts/gpu-lib.sh
WIDE=""
[ "$GPUS" -ge 4 ] && WIDE="world4 stress4"
STEPS=${STEPS:-"env native doctor world2 world3 ag10 stress2 stress3 $WIDE nccl mps verify python ecosystem cpu cestop"}
export -n STEPS # the topical scripts have steps of their own
[ "${MPS:-0}" = 1 ] && mps_on >>"$OUTDIR/env.log" 2>&1
has() { [[ " $STEPS " == *" $1 "* ]]; }
WORLD_TESTS='^(TestGPUWorld.*|TestGPUUserAPI|TestGPUUserHostCost|TestErrorPromisesGPU)$'
SHARE=()
[ "$GPUS" -lt 2 ] && SHARE=(env SYMMEM_SHARE_DEVICE=1)

if has env; then
  { gpu_env; ls -l .build/; } >>"$OUTDIR/env.log" 2>&1
  RC[env]=0
fi
has native && step native 120 .build/native-cuda.test -test.v -test.count=1
has doctor && step doctor 120 "${SHARE[@]}" .build/symmem doctor --nproc-per-node 2 --backend cuda --all
has world2 && SYMMEM_GPU_TEST_RANKS=2 step world2 300 .build/symmem.test -test.v -test.count=1 -test.run "$WORLD_TESTS" -test.timeout 290s
has world3 && SYMMEM_GPU_TEST_RANKS=3 step world3 300 .build/symmem.test -test.v -test.count=1 -test.run "$WORLD_TESTS" -test.timeout 290s
has world4 && SYMMEM_GPU_TEST_RANKS=4 step world4 300 .build/symmem.test -test.v -test.count=1 -test.run "$WORLD_TESTS" -test.timeout 290s
# 10 consecutive all-gather correctness runs (the pageable-copy ordering bug
# showed in 4 of 5 runs).
has ag10 && SYMMEM_GPU_TEST_RANKS=2 step ag10 400 .build/symmem.test -test.v -test.count=10 -test.run '^TestGPUWorldAllGather$' -test.timeout 390s
S=${STRESS_SECONDS:-120}
has stress2 && SYMMEM_GPU_TEST_RANKS=2 SYMMEM_STRESS_SECONDS=$S step stress2 $((S+150)) .build/symmem.test -test.v -test.count=1 -test.run '^TestGPUStress$' -test.timeout $((S+140))s
has stress3 && SYMMEM_GPU_TEST_RANKS=3 SYMMEM_STRESS_SECONDS=$S step stress3 $((S+150)) .build/symmem.test -test.v -test.count=1 -test.run '^TestGPUStress$' -test.timeout $((S+140))s
has stress4 && SYMMEM_GPU_TEST_RANKS=4 SYMMEM_STRESS_SECONDS=$S step stress4 $((S+150)) .build/symmem.test -test.v -test.count=1 -test.run '^TestGPUStress$' -test.timeout $((S+140))s
# 4 ranks as 2 hosts of 2 GPUs (docs/multihost.md: SYMMEM_HOST and
# NCCL_HOSTID per host, so NCCL moves data between them over its network
# transport): the world tests and the stress test on groups that span hosts.
# With 2 or 3 GPUs every "host" gets GPUs 0 and 1 (launch.RankEnv: a GPU
# serves one rank of each host, in separate contexts, time-sliced: right for
# correctness, not for timing); with 1 GPU, 2 ranks as 2 hosts of 1 rank.
HR=4; HDEV=()
if [ "$GPUS" -lt 2 ]; then HR=2; HDEV=(CUDA_VISIBLE_DEVICES=0)
elif [ "$GPUS" -lt 4 ]; then HDEV=(CUDA_VISIBLE_DEVICES=0,1); fi
has hosts && SYMMEM_TEST_HOSTS=2 SYMMEM_GPU_TEST_RANKS=$HR step hosts 400 env "${HDEV[@]}" .build/symmem.test -test.v -test.count=1 -test.run "$WORLD_TESTS" -test.timeout 390s
has hostsdie && SYMMEM_TEST_HOSTS=2 SYMMEM_GPU_TEST_RANKS=$HR step hostsdie 300 env "${HDEV[@]}" .build/symmem.test -test.v -test.count=5 -test.run '^TestGPUWorldPeerDies$' -test.timeout 290s
# hostsbench: hier beside NCCL alone across 2 "hosts" of 2 GPUs (issue 27
# item 4); 4 GPUs only (with 2, each GPU time-slices two ranks: no timing).
if has hostsbench; then
  if [ "$GPUS" -ge 4 ]; then step hostsbench 590 .build/symmem launch --hosts 2 -n 4 --timeout 580s -- .build/symmem bench --backend cuda \
    --ops all_gather,reduce_scatter,all_reduce -d bfloat16 --algo hier,nccl-window,nccl,auto -b 1M -e 1G -f 4 --rounds 2 -J "$OUTDIR/hostsbench.json"
  else echo "hostsbench: skipped, $GPUS GPUs (2 hosts of 2 GPUs need 4)" >"$OUTDIR/hostsbench.log"; RC[hostsbench]=skip; fi
fi
has hostsstress && SYMMEM_TEST_HOSTS=2 SYMMEM_GPU_TEST_RANKS=$HR SYMMEM_STRESS_SECONDS=$S step hostsstress $((S+150)) env "${HDEV[@]}" .build/symmem.test -test.v -test.count=1 -test.run '^TestGPUStress$' -test.timeout $((S+140))s
if has nccl; then
  # From the package's folder, as go test runs it: TestFakeOneRank builds its
  # fake libnccl from testdata/ (run 29 ran it from the root: not found).
  if [ "$GPUS" -ge 2 ]; then step nccl 300 bash -c 'cd internal/backend/nccl && ../../../.build/nccl-backend.test -test.v -test.count=1 -test.timeout 290s'
  else echo "nccl: skipped, $GPUS GPU visible (NCCL refuses two ranks on one GPU)" >"$OUTDIR/nccl.log"; RC[nccl]=skip; fi
fi
if has mps; then
  # Two ranks on one GPU, time-sliced vs under MPS: the kernel and the
  # copy-engine all-gather, and the kernel all-reduce.
  B=".build/symmem launch --share-device --nproc-per-node 2 --timeout 120s -- .build/symmem bench --backend cuda --budget 50ms --rounds 1"
  run_mps() {
    echo "--- $1"
    $B --ops all_gather -d bfloat16 --algo kernel,ce -b 64K -e 16M -f 4
    $B --ops all_reduce -d bfloat16 --algo kernel -b 16K -e 1M -f 4
  }
  [ "${MPS:-0}" = 1 ] && mps_off
  step mps 400 bash -c "$(declare -f run_mps); B='$B'; run_mps 'time-sliced (no MPS)'; \
    mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY; nvidia-cuda-mps-control -d && echo 'MPS on'; \
    run_mps 'under MPS'; echo quit | nvidia-cuda-mps-control; sleep 1"
  [ "${MPS:-0}" = 1 ] && mps_on >/dev/null 2>&1
fi
has verify && step verify 300 scripts/gpu-verify.sh "$OUTDIR/verify"
has python && step python 500 scripts/gpu-python.sh "$OUTDIR/python"
has ecosystem && step ecosystem 590 "${SHARE[@]}" scripts/gpu-ecosystem.sh "$OUTDIR/eco"
has cpu && step cpu 400 scripts/cpu-compare.sh "$OUTDIR/cpu"
has cestop && step cestop 590 bash -c 'for n in 2 3; do SYMMEM_GPU_TEST_RANKS=$n .build/symmem.test -test.v -test.count=1 \
  -test.run "^TestGPUCopyEngineMismatch$" -test.timeout 300s || exit 1; done'
[ "${MPS:-0}" = 1 ] && mps_off >>"$OUTDIR/env.log" 2>&1

# ---- short table, last ----
{
  echo "==================== gpu-check summary ($(date -u +%FT%TZ), $GPUS GPU(s), MPS=${MPS:-0}) ===================="
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null
  for s in $STEPS; do printf '%-8s rc=%s\n' "$s" "${RC[$s]:-?}"; done
  for f in "$OUTDIR"/*.log; do
    c=$(grep -h -E '^--- (FAIL|PASS|SKIP)' "$f" 2>/dev/null | sed -E 's/ \([0-9.]+s\)//' | sort | uniq -c | tr -s ' ' | tr '\n' ';')
    [ -n "$c" ] && echo "$(basename "$f" .log): $c"
  done
  grep -h -E 'ranks share|GPU |USERCOST|^ok |^refused ' "$OUTDIR"/*.log 2>/dev/null | grep -v '=== RUN' | sort | uniq -c | head -60
  grep -h -o -E 'STRESS (seed|total).*' "$OUTDIR"/stress*.log "$OUTDIR"/hostsstress.log 2>/dev/null # indented under -test.v
  grep -h -E '^(---|\[rank 0\] +[0-9]+ )' "$OUTDIR"/mps.log 2>/dev/null | head -60
  for t in verify python ecosystem cpu; do [ -f "$OUTDIR/$t.log" ] && { echo "--- $t"; tail -25 "$OUTDIR/$t.log"; }; done
} | tee "$OUTDIR/summary.txt"
[ "${PACK:-0}" = 1 ] && pack_logs
exit 0 # the summary says how each step ended
