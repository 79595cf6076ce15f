#!/usr/bin/env bash
# gpu-overlap.sh: issue 14's overlap benchmark on a GPU host: bf16 GEMMs
# (cuBLAS, f32 accumulation) on one stream, collectives on another, per
# algorithm the world offers: GEMMs alone, collectives alone, together, the
# hidden fraction and the GEMM slowdown; then the FSDP case (64 MiB per rank
# all-gather beside one 8192^3 GEMM per iteration). GPU hosts have no Go
# toolchain: build on the build machine first with
#
#   scripts/build-gpu.sh    # .build/symmem and .build/native-cublas.test, among others
#
# then run `scripts/gpu-overlap.sh [outdir]` there (logs and JSON in outdir,
# else $OUT, else ./gpu-overlap-out; a short table is printed last).
#
# Steps (STEPS, default all, in order):
#   gemm   internal/native/cublas tests: the library is found, and bf16 GEMMs
#          (f32 and bf16 output, A plain and transposed) match a float64
#          host reference element by element.
#   smoke  2 ranks sharing the GPU, small sizes (16 MiB, 2048^3 GEMMs, 2
#          reps): every path runs and checks before the long runs.
#   one    a world of 1 rank, the defaults (1 GiB all-gather and
#          reduce-scatter, 10 calls beside 30 GEMMs of 8192^3; FSDP case).
#   two    2 ranks sharing the GPU (SYMMEM_SHARE_DEVICE, `symmem launch
#          --share-device`) under MPS, the defaults. Both ranks' GEMMs share
#          the one GPU's SMs, so gemm_ms is about twice the 1-rank value;
#          NCCL refuses two ranks on one GPU (its rows say refused). The
#          2-GPU numbers come from the measurement issue.
#   gpus   (named only) one GPU per rank, the defaults, with N ranks for
#          each N of SIZES (default 2, and 4 where there are 4 GPUs; the
#          first N of CUDA_VISIBLE_DEVICES when set): the copy-engine
#          all-gather beside GEMMs over NVLink, and the FSDP case. Steps
#          gpus-N, reports gpus-N.json.
# MPS: started here for "smoke" and "two" when MPS=1 (default; needs root)
# and stopped at the end; MPS=0 leaves the GPU time-sliced.
# Extra flags for every run: OVERLAP_FLAGS (e.g. "--reps 9").
# Success: every step rc=0, "Out of bounds values : 0 OK" in each table,
# rows with numbers for the symmem paths (ce, kernel, and the new ones).
set -u
OUTDIR=${1:-${OUT:-./gpu-overlap-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
. scripts/gpu-lib.sh # the venv first in PATH, its NCCL, multicast off, step, mps_on/mps_off
STEPS=${STEPS:-"gemm smoke one two"}
XF=${OVERLAP_FLAGS:-}
# MPS for the 2-rank steps (default on), started once.
MPS_STARTED=0
mps_up() {
  [ "${MPS:-1}" = 1 ] && [ "$MPS_STARTED" = 0 ] || return 0
  if mps_on; then MPS_STARTED=1; else echo "MPS could not start: ranks time-slice"; fi
}
mps_down() { [ "$MPS_STARTED" = 1 ] && { mps_off; MPS_STARTED=0; }; }
has() { [[ " $STEPS " == *" $1 "* ]]; }
{
  date -u; nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used --format=csv
  echo "SYMMEM_NCCL_LIB=${SYMMEM_NCCL_LIB:-unset} SYMMEM_CUBLAS_LIB=${SYMMEM_CUBLAS_LIB:-unset} MPS=${MPS:-1}"
  ls -l .build/
  ls -l /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib/libcublas* \
    /opt/torch/.venv/lib/python3*/site-packages/nvidia/cublas/lib/libcublas* /usr/local/cuda/lib64/libcublas.so* 2>/dev/null
} >"$OUTDIR/env.log" 2>&1

OV=".build/symmem bench overlap --backend cuda --progress --timeout 120s"
L2=".build/symmem launch --share-device --nproc-per-node 2 --timeout 300s --"
has gemm && step gemm 120 .build/native-cublas.test -test.v -test.count=1
if has smoke; then
  mps_up >>"$OUTDIR/env.log" 2>&1
  step smoke 180 $L2 $OV --size 16M --gemm 2048 --gemms 8 --calls 4 --reps 2 --fsdp-size 4M --fsdp-iters 3 -J "$OUTDIR/smoke.json" $XF
fi
if has one; then
  mps_down >>"$OUTDIR/env.log" 2>&1 # one rank: nothing to share
  step one 300 $OV --nproc-per-node 1 -J "$OUTDIR/one.json" $XF
fi
if has two; then
  mps_up >>"$OUTDIR/env.log" 2>&1
  step two 420 $L2 $OV -J "$OUTDIR/two.json" $XF
fi
mps_down >>"$OUTDIR/env.log" 2>&1
if has gpus; then
  if [ "$GPUS" -ge 2 ]; then
    for n in $(lane_sizes); do
      CUDA_VISIBLE_DEVICES=$(lane_devs "$n") step "gpus-$n" 300 $OV --nproc-per-node "$n" -J "$OUTDIR/gpus-$n.json" $XF
    done
  else echo "gpus: skipped, $GPUS GPU visible (one GPU per rank needs 2)" >"$OUTDIR/gpus.log"; RC[gpus]=skip; ORDER+=(gpus); fi
fi

# ---- short table, last ----
{
  echo "==================== gpu-overlap summary ($(date -u +%FT%TZ), MPS=${MPS:-1}) ===================="
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null
  for s in "${ORDER[@]}"; do printf '%-6s rc=%s\n' "$s" "${RC[$s]:-?}"; done
  grep -h -E -- '^--- (PASS|FAIL|SKIP): [A-Za-z]+ |handle version|no (GPU|cuBLAS)' "$OUTDIR"/gemm.log 2>/dev/null | sed 's/^ *//' | cut -c1-300
  for s in smoke one two gpus-2 gpus-4; do
    [ -f "$OUTDIR/$s.log" ] || continue
    echo "--- $s"
    # rank 0's table (launch prefixes lines with [rank N]), without host lines
    sed -E 's/^\[rank [0-9]+\] ?//' "$OUTDIR/$s.log" | grep -E '^(#|  [a-z])' | grep -v -E '^# (host|command):' | head -60
    grep -h -E 'rank [0-9]+\): |Error|error' "$OUTDIR/$s.log" | grep -v '^#' | head -5
  done
} | tee "$OUTDIR/summary.txt"
