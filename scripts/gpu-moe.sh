#!/usr/bin/env bash
# gpu-moe.sh [outdir]: the MoE dispatch/combine benchmark
# (bench/e2e/moe_dispatch.py: all-to-all on NCCL, symmem's paths with host
# and device split counts, torch's all_to_all_vdev; eager and CUDA-graph
# times, outputs checked bit for bit) on 2 ranks (and 4, one GPU each,
# where there are 4 GPUs; SIZES chooses). One logged step per mode and
# placement:
#   unit          python/tests/test_moe_dispatch.py (the routing logic, no torch)
#   smoke-shared  --smoke (256 tokens x 512), 2 ranks sharing GPU 0 under MPS
#                 (`symmem launch -n 2 --share-device`: NCCL and torch-vdev skipped)
#   full-shared   the default sizes (4096 tokens x 7168 bf16, top-8 of 256), the same placement
#   smoke-N, full-N  where there are 2 GPUs: torchrun, one GPU per rank (NCCL runs),
#                 N ranks for each N of SIZES (default 2, and 4 where there are 4)
# MODES picks modes (default "smoke full"); ARGS adds arguments (e.g.
# "--algos auto,ce,kernel --iters 50"); MPS_HELD=1: MPS is the caller's
# (on already, left on). Build first: scripts/build-gpu.sh
# (.build/libsymmem.so, .build/symmem). Success: every step rc 0 (a
# mismatch exits 1), each table's rows "ok" or a skip/refusal with its
# reason. The tables are printed last.
set -u
OUTDIR=${1:-${OUT:-./gpu-moe-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
. scripts/gpu-lib.sh
use_libsymmem
torch_env >"$OUTDIR/env.log" 2>&1
B=bench/e2e/moe_dispatch.py
step unit 60 python3 python/tests/test_moe_dispatch.py
for mode in ${MODES:-smoke full}; do
  flag=; [ "$mode" = smoke ] && flag=--smoke
  t=300; [ "$mode" = smoke ] && t=120
  [ "${MPS_HELD:-0}" = 1 ] || mps_on >>"$OUTDIR/env.log" 2>&1
  # shellcheck disable=SC2086
  step "$mode-shared" $t .build/symmem launch -n 2 --share-device python3 $B $flag ${ARGS:-}
  [ "${MPS_HELD:-0}" = 1 ] || mps_off >>"$OUTDIR/env.log" 2>&1
  if [ "$GPUS" -ge 2 ]; then
    for n in $(lane_sizes); do
      # shellcheck disable=SC2086
      CUDA_VISIBLE_DEVICES=$(lane_devs "$n") step "$mode-$n" $t torchrun --standalone --nproc-per-node "$n" $B $flag ${ARGS:-}
    done
  fi
done
echo
for s in "${ORDER[@]}"; do
  echo "== $s: rc=${RC[$s]}"
  # rank 0's table (symmem launch prefixes "[rank 0] "), without the JSON line
  sed -n 's/^\[rank 0\] //; /^moe_dispatch: /,/^{"bench"/p' "$OUTDIR/$s.log" | grep -v '^{"bench"'
done
