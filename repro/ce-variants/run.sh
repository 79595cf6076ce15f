#!/usr/bin/env bash
# run.sh [outdir]: on the GPU host, the variants built by build.sh side by
# side (scripts/gpu-ab.sh, alternated per round): the copy-engine all-gather
# in and out of place, 1 MiB to 1 GiB, on RANKS ranks (default 4), then the
# overlap bench's all-gather (1 GiB beside 8192^3 GEMMs, and the FSDP-shaped
# case) per variant. Tables last. Carry .build/cev only (the push build
# launches the ranks).
set -u
OUTDIR=${1:-${OUT:-./ce-variants-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/../.."
. scripts/gpu-lib.sh
for v in push sequential pull pull-sequential; do
  [ -x .build/cev/$v/symmem ] || gzip -dkf .build/cev/$v/symmem.gz || exit 2
done
B=""
for v in push sequential pull pull-sequential; do B+="$v=.build/cev/$v/symmem "; done
LAUNCHER=.build/cev/push/symmem AB_IN_PLACE=1 RANKS=${RANKS:-4} BUILDS="$B" BENCHES="--ops all_gather -d bfloat16 --algo ce -b 1M -e 1G -f 4" \
  scripts/gpu-ab.sh "$OUTDIR" "${ROUNDS:-2}" >"$OUTDIR/ab-table.txt" 2>&1
for v in push sequential pull pull-sequential; do
  step "overlap-$v" 240 .build/cev/$v/symmem bench overlap --backend cuda --nproc-per-node "${RANKS:-4}" \
    --algo ce --ops all_gather --reps 3 -J "$OUTDIR/overlap-$v.json"
done
{ cat "$OUTDIR/ab-table.txt"; grep -h -E "hidden|slowdown|FSDP|ce " "$OUTDIR"/overlap-*.log | head -40; } | tee "$OUTDIR/summary.txt"
pack_logs # the device tool returns ~8 files: the rest in logs.tgz
exit 0
