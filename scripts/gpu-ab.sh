#!/usr/bin/env bash
# gpu-ab.sh: the same benchmark rows from two builds of the CLI, alternated
# in one run (A/B ratios from one machine state, not against old numbers).
# Build both on the build machine:
#
#   scripts/build-gpu.sh                                   # .build/symmem (B: now)
#   git archive <commit> | tar -x -C /tmp/a &&
#     (cd /tmp/a && go build -o "$OLDPWD/.build/symmem-before" ./cmd/symmem)   # A
#
# then `scripts/gpu-ab.sh [outdir] [rounds]` on the GPU host. BUILDS lists
# more than two as NAME=binary pairs (default "A=.build/symmem-before
# B=.build/symmem"); ratios are against the first. RANKS ranks
# (default 2) share GPU 0 under MPS when there are fewer GPUs. BENCHES holds
# `symmem bench` argument sets separated by ';'. LAUNCHER is the binary
# whose `symmem launch` starts the ranks (default .build/symmem). Logs:
# outdir/ab.log; the table (scripts/ab-table.py: time per call of each
# build and round, ratios of median times) is printed last, out of place,
# and in place too with AB_IN_PLACE=1.
set -u
OUTDIR=${1:-${OUT:-./gpu-ab-out}}
ROUNDS=${2:-2}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
. scripts/gpu-lib.sh
RANKS=${RANKS:-2}
BENCHES=${BENCHES:-"--ops all_gather -d bfloat16 --algo ce -b 64K -e 256M -f 4;--ops reduce_scatter -d bfloat16 --algo lc -b 1M -e 256M -f 4"}
SHARE=()
if [ "$GPUS" -lt "$RANKS" ]; then SHARE=(--share-device); mps_on >>"$OUTDIR/ab.log" 2>&1; fi
gpu_env >>"$OUTDIR/ab.log" 2>&1
IFS=';' read -ra SETS <<<"$BENCHES"
read -ra BUILDS <<<"${BUILDS:-A=.build/symmem-before B=.build/symmem}"
for r in $(seq "$ROUNDS"); do
  for set in "${SETS[@]}"; do
    for vb in "${BUILDS[@]}"; do
      v=${vb%%=*} bin=${vb#*=}
      echo "### round $r $v: bench $set" >>"$OUTDIR/ab.log"
      # shellcheck disable=SC2086
      timeout -k 10 200 "${LAUNCHER:-.build/symmem}" launch "${SHARE[@]}" --nproc-per-node "$RANKS" --timeout 120s -- \
        $bin bench --backend cuda --budget 50ms --rounds 1 $set >>"$OUTDIR/ab.log" 2>&1 || echo "### rc=$?" >>"$OUTDIR/ab.log"
    done
  done
done
[ ${#SHARE[@]} -gt 0 ] && mps_off >>"$OUTDIR/ab.log" 2>&1
python3 scripts/ab-table.py "$OUTDIR/ab.log" "${BUILDS[@]%%=*}"
if [ -n "${AB_IN_PLACE:-}" ]; then # not `[ ] &&`: the script's status would be 1 without it
  echo "--- in place"
  AB_PLACE=in python3 scripts/ab-table.py "$OUTDIR/ab.log" "${BUILDS[@]%%=*}"
fi
