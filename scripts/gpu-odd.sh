#!/usr/bin/env bash
# gpu-odd.sh [outdir]: time per call of odd per-rank counts (bf16: per-rank
# bytes not a multiple of 16) on every path, side by side in one run, for
# RANKS ranks (default 2): symmem's kernels take such counts in their
# element mode, NCCL's symmetric kernels take a slow path (or are wrong:
# repro/nccl-symmetric). Per-rank counts 2^k+1 for k in KS (default
# 9 13 17 21). Logs to outdir/odd-<RANKS>.log; rank 0's rows last.
set -u
OUTDIR=${1:-${OUT:-./gpu-odd-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
. scripts/gpu-lib.sh
RANKS=${RANKS:-2}
BIN=${BIN:-.build/symmem}
LOG="$OUTDIR/odd-$RANKS.log"
gpu_env >>"$LOG" 2>&1
for k in ${KS:-9 13 17 21}; do
  per=$(( (1 << k) + 1 ))
  for oa in all_gather=auto,kernel,ce,nccl,nccl-window reduce_scatter=auto,kernel,lc,nccl,nccl-window \
    all_reduce=auto,kernel,two-shot,lc,nccl,nccl-window; do
    op=${oa%%=*}
    bytes=$(( 2 * per * RANKS )) # all-gather output, reduce-scatter input, all-reduce whole (count n x per)
    timeout -k 10 200 .build/symmem launch --nproc-per-node "$RANKS" --timeout 120s -- $BIN bench --backend cuda --budget 50ms -d bfloat16 --ops $op \
      --algo "${oa#*=}" -b $bytes -e $bytes >>"$LOG" 2>&1 || echo "### rc=$? ($op $bytes)" >>"$LOG"
  done
done
grep -E '^\[rank 0\] +[0-9]+ |^\[rank 0\] # [a-z_]+, algo|^\[rank 0\] #   path|### rc' "$LOG" | head -300
