#!/usr/bin/env bash
# gpu-reduce.sh: symmem's reductions (issue 14) on any GPU host: correctness
# of the kernel, two-shot and lc paths (sum and avg, bit-exact; graph capture
# and replay) and a bench of reduce-scatter and all-reduce through every GPU
# path side by side. Ranks: one per GPU; on a single GPU, 2 ranks share it
# under MPS (NCCL is then unavailable, and every path moves bytes through
# local HBM instead of NVLink: the rows compare the paths' own costs, not
# NVLink). Build first on the build machine (no Go on GPU hosts):
#
#   scripts/build-gpu.sh
#
# then `scripts/gpu-reduce.sh [outdir]`; logs go to outdir ($OUT), a short
# table is printed last.
set -u
OUTDIR=${1:-${OUT:-./gpu-reduce-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
. scripts/gpu-lib.sh
N=$GPUS
SHARE=()
if [ "$GPUS" -lt 2 ]; then
  N=2 SHARE=(--share-device)
  MPS=1 mps_on >>"$OUTDIR/env.log" 2>&1
fi
gpu_env >>"$OUTDIR/env.log" 2>&1
L=(.build/symmem launch --nproc-per-node "$N" "${SHARE[@]}" --timeout)
for r in gpuark gpugraph; do
  step "$r" 200 env SYMMEM_TEST_ROLE=$r "${L[@]}" 190s -- .build/symmem.test -test.run '^$'
done
NCCLS=
[ "$GPUS" -ge 2 ] && NCCLS=nccl,nccl-window,
B=(.build/symmem bench --backend cuda --dtype bfloat16 -b 1M -e 1G -f 4 --budget 100ms --timeout 60s)
step rs 300 "${L[@]}" 290s -- "${B[@]}" --ops reduce_scatter --algo "${NCCLS}kernel,lc,auto" -J "$OUTDIR/rs.json"
step ar 300 "${L[@]}" 290s -- "${B[@]}" --ops all_reduce --algo "${NCCLS}kernel,two-shot,lc,auto" -J "$OUTDIR/ar.json"
# lc's reduction kernel with more or fewer CTAs (Options.GPU.LowContentionCTAs).
for c in ${LC_CTAS:-4 16 32}; do
  step "rs-lc$c" 200 "${L[@]}" 190s -- "${B[@]}" -b 16M --ops reduce_scatter --algo lc --lc-ctas "$c" --inplace no
done
[ "$GPUS" -lt 2 ] && mps_off >>"$OUTDIR/env.log" 2>&1
{
  echo "==================== gpu-reduce summary ($(date -u +%FT%TZ), $GPUS GPU(s), $N ranks) ===================="
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c
  for s in "${ORDER[@]}"; do printf '%-9s rc=%s\n' "$s" "${RC[$s]}"; done
  grep -h "GPU reduction kernels\|GPU graph .*all_reduce\|first call in a capture\|WRONG" "$OUTDIR"/gpuark.log "$OUTDIR"/gpugraph.log | sort | uniq -c
  for s in rs ar $(for c in ${LC_CTAS:-4 16 32}; do echo rs-lc$c; done); do
    echo "--- $s (time us / busbw GB/s, out-of-place | in-place)"
    grep -E "^\[rank 0\] (# [a-z_]+, algo|  +[0-9]+ )" "$OUTDIR/$s.log" | sed 's/^\[rank 0\] //' |
      awk '/algo/ {print; next} {printf "%12s %9s %8s | %9s %8s\n", $1, $6, $8, $10, $12}' 
  done
} | tee "$OUTDIR/summary.txt"
