#!/usr/bin/env bash
# gpu-verify.sh: issue 11's GPU checks (verified scope ends, ErrFreed, the
# device memory check, one-rank collectives, NCCL init/registration bounded
# by the timeout). Build on the build machine first with
# scripts/build-gpu.sh (no Go toolchain on the GPU host);
# then run `scripts/gpu-verify.sh [outdir]` there (logs in outdir, else $OUT,
# else ./gpu-verify-out; a short table is printed last).
#
# Steps:
#   one     TestGPUOneRank: all-gather, reduce-scatter, all-reduce (auto, in and
#           out of place, ordinary memory) in a world of one rank, checked on
#           the host. Runs on one GPU.
#   verify  TestGPUVerify: 2 ranks (SYMMEM_GPU_TEST_RANKS), Scope.End after
#           allocations in another order / of different sizes fails on every
#           rank within seconds; Free twice -> ErrFreed; CheckFits(64 TiB) ->
#           ErrNoMemory naming device memory. With one GPU the ranks share it
#           (the test sets SYMMEM_SHARE_DEVICE=1).
#   nccl    internal/backend/nccl TestGPUTwoRanks, whose last checks are a peer dead
#           inside a blocking communicator's window registration and init:
#           both must fail with ErrTimeout within ~5 s. NCCL refuses two
#           ranks on one GPU, so this needs 2 GPUs: on a 1-GPU host it SKIPs
#           (that is expected, not a failure).
#   exit    TestGPUScopeEndPeerExits: 3 ranks (SYMMEM_GPU_TEST_RANKS) sharing the
#           GPU; rank 1 exits, ranks 0 and 2's next Scope.End fails naming it
#           within about a second ("VERIFY ok peer exit reported by
#           Scope.End in ..."), not at the 30 s timeout.
#   mismatch  TestGPUWorldKernelMismatch with 2 then 3 ranks sharing the GPU:
#           a kernel call with another dtype / count on rank 0 fails on every
#           rank with ErrMismatch naming the argument and both values ("GPU
#           mismatch (type) ...: ... called all_reduce with dtype=bfloat16,
#           rank 0 with dtype=float32 ..."). Not a default step: gpu-check.sh's
#           world2/world3 run the same test.
#   cost    Scope.End creating no segment on the GPU backend (2 ranks sharing
#           the GPU, compared in-band by members.HostAgreement): the user API
#           (BenchmarkLoop2Ranks/scope-end, 20000 calls, 5 runs), and the
#           agreement alone and with the pool's scope end in 2 processes
#           (members BenchmarkHostAgreementProcs). Issue 11's bound: 1 us.
set -u
OUTDIR=${1:-${OUT:-./gpu-verify-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
if [ -z "${SYMMEM_NCCL_LIB:-}" ]; then
  for f in /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2; do
    [ -e "$f" ] && export SYMMEM_NCCL_LIB="$f"
  done
fi
STEPS=${STEPS:-"one verify exit nccl cost"}
declare -A RC
step() { # name timeout_s cmd...
  local name=$1 t=$2; shift 2
  echo "=== $name: $*" | tee -a "$OUTDIR/$name.log"
  timeout -k 10 "$t" "$@" >>"$OUTDIR/$name.log" 2>&1
  RC[$name]=$?
  echo "=== $name: rc=${RC[$name]}" | tee -a "$OUTDIR/$name.log"
}
has() { [[ " $STEPS " == *" $1 "* ]]; }
nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv >"$OUTDIR/env.log" 2>&1
has one && step one 120 .build/symmem.test -test.v -test.count=1 -test.run '^TestGPUOneRank$' -test.timeout 110s
has verify && step verify 120 .build/symmem.test -test.v -test.count=1 -test.run '^TestGPUVerify$' -test.timeout 110s
has exit && SYMMEM_GPU_TEST_RANKS=3 step exit 120 .build/symmem.test -test.v -test.count=1 -test.run '^TestGPUScopeEndPeerExits$' -test.timeout 110s
if has mismatch; then
  SYMMEM_GPU_TEST_RANKS=2 step mismatch 150 .build/symmem.test -test.v -test.count=1 -test.run '^TestGPUWorldKernelMismatch$' -test.timeout 140s
  RC2=${RC[mismatch]}
  SYMMEM_GPU_TEST_RANKS=3 step mismatch 150 .build/symmem.test -test.v -test.count=1 -test.run '^TestGPUWorldKernelMismatch$' -test.timeout 140s
  [ "$RC2" = 0 ] || RC[mismatch]=$RC2
fi
if has cost; then
  SYMMEM_VB_BACKEND=cuda SYMMEM_SHARE_DEVICE=1 step cost 150 .build/symmem.test -test.run '^$' -test.bench 'BenchmarkLoop2Ranks/scope-end' -test.benchtime 20000x -test.count 5
  RC1=${RC[cost]}
  step cost 120 .build/members.test -test.run '^$' -test.bench 'BenchmarkHostAgreementProcs' -test.benchtime 200000x -test.count 5
  [ "$RC1" = 0 ] || RC[cost]=$RC1
fi
has nccl && step nccl 300 .build/nccl-backend.test -test.v -test.count=1 -test.run '^TestGPUTwoRanks$' -test.timeout 290s
{
  echo "==================== gpu-verify summary ($(date -u +%FT%TZ)) ===================="
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null
  for s in $STEPS; do printf '%-7s rc=%s\n' "$s" "${RC[$s]:-?}"; done
  grep -h -E -- '--- (PASS|FAIL|SKIP)' "$OUTDIR"/*.log 2>/dev/null
  grep -h -E 'ONE RANK|VERIFY ok' "$OUTDIR"/one.log "$OUTDIR"/verify.log "$OUTDIR"/exit.log 2>/dev/null | sed 's/^ *//' | sort | uniq
  grep -h -E 'dead in (init|registration)' "$OUTDIR"/nccl.log 2>/dev/null
  grep -h -E 'GPU mismatch' "$OUTDIR"/mismatch.log 2>/dev/null | sed 's/^ *//' | cut -c1-260
  grep -h -E '^Benchmark' "$OUTDIR"/cost.log 2>/dev/null
} | tee "$OUTDIR/summary.txt"
