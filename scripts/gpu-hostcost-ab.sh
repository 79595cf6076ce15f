#!/usr/bin/env bash
# gpu-hostcost-ab.sh [outdir] [rounds]: TestGPUUserHostCost (the CPU time of
# one small all-gather through the user API, 2 ranks) from two builds of
# the root package's test binary, alternated in one run. TESTS lists
# NAME=binary pairs (default "A=.build/base/symmem.test B=.build/symmem.test").
# Logs: outdir/hostcost.log; the table (scripts/hostcost-table.py: every
# round's and rank's median per build, size and mode, ratios to the first
# build, a permutation test of each difference) is printed last.
set -u
OUTDIR=${1:-${OUT:-./gpu-hostcost-out}}
ROUNDS=${2:-3}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
. scripts/gpu-lib.sh
LOG="$OUTDIR/hostcost.log"
gpu_env >>"$LOG" 2>&1
read -ra TESTS <<<"${TESTS:-A=.build/base/symmem.test B=.build/symmem.test}"
for r in $(seq "$ROUNDS"); do
  for vb in "${TESTS[@]}"; do
    echo "### round $r ${vb%%=*}: ${vb#*=}" >>"$LOG"
    SYMMEM_GPU_TEST_RANKS=2 timeout -k 10 120 "${vb#*=}" -test.v -test.count=1 \
      -test.run '^TestGPUUserHostCost$' -test.timeout 110s >>"$LOG" 2>&1 || echo "### rc=$?" >>"$LOG"
  done
done
grep -E "FAIL|### rc=" "$LOG" | head -20
python3 scripts/hostcost-table.py "$LOG" "${TESTS[@]%%=*}"
