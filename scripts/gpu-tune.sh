#!/usr/bin/env bash
# gpu-tune.sh [outdir]: `symmem tune` on the GPUs at hand, one op per run
# (each bounded by T seconds, default 150, so one slow op does not cost the
# others), for auto's built-in table (docs/gpu.md, "auto and tuning").
# N ranks (default 2), DTYPES (default bfloat16), OPS (default all_gather
# reduce_scatter all_reduce), sizes -b MIN to -e MAX (1K, 1G) by factor F
# (2), BUDGET per size and path (50ms), ROUNDS (1; fastest of ROUNDS
# measurements: at 1 MiB and below one round is noise-level, see
# results/tune-2026-11-26.md), GRAPH (0; N: also CUDA-graph replays of N
# calls up to GRAPH_MAX, default 16M: the table's graph rows, their
# reports <name>-<op>.<dtype>.graph.bench.json). Writes outdir/<name>-<op>.json (the
# table) and outdir/<name>-<op>.<dtype>.bench.json (the measurements,
# inputs of go generate in results/auto/), name = NAME (default
# <gpu>x<N>, e.g. h100x2). SYMMEM is the CLI (default .build/symmem).
# Everything but summary.txt is packed into outdir/logs.tgz (PACK=0 keeps
# the files: the device tool returns ~8).
# Build first: scripts/build-gpu.sh.
set -u
OUTDIR=${1:-${OUT:-./gpu-tune-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
. scripts/gpu-lib.sh
N=${N:-2}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i "$(echo "${CUDA_VISIBLE_DEVICES:-0}" | cut -d, -f1)" 2>/dev/null | head -1 | grep -o -i -E 'h100|h200|a100|b200|l40s?' | head -1 | tr 'A-Z' 'a-z')
NAME=${NAME:-${gpu:-gpu}x$N}
gpu_env >"$OUTDIR/env-$NAME.log" 2>&1
for op in ${OPS:-all_gather reduce_scatter all_reduce}; do
  step "tune-$NAME-$op" "${T:-150}" "${SYMMEM:-.build/symmem}" tune --backend cuda --nproc-per-node "$N" \
    --dtypes "${DTYPES:-bfloat16}" --ops "$op" -b "${MIN:-1K}" -e "${MAX:-1G}" -f "${F:-2}" \
    --budget "${BUDGET:-50ms}" --rounds "${ROUNDS:-1}" -G "${GRAPH:-0}" --graph-max "${GRAPH_MAX:-16M}" \
    --progress -o "$OUTDIR/$NAME-$op.json"
done
for op in ${OPS:-all_gather reduce_scatter all_reduce}; do
  echo "--- $NAME $op: auto/best per size (rc=${RC[tune-$NAME-$op]:-?})"
  grep -h -E 'auto/best|^#' "$OUTDIR/tune-$NAME-$op.log" | tail -30
done | tee "$OUTDIR/summary.txt"
# The tables, reports and logs come back in logs.tgz (PACK=0: as files).
[ "${PACK:-1}" = 1 ] && pack_logs
exit 0
