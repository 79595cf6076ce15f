#!/usr/bin/env bash
# gpu-tree1.sh PART: the current tree on one GPU, ranks sharing it, in two
# device calls of at most 600 s each (CALL_S bounds the steps):
#   ranks   env, native, doctor, world2, world3, stress2, stress3
#           (STRESS_SECONDS each, default 120) under MPS, then the MoE
#           benchmark's smoke run (gpu-moe.sh);
#   python  gpu-python.sh, gpu-fsdp.sh, the FSDP diagnosis in checked mode
#           (gpu-fsdp-diag.sh), gpu-wheel.sh, then cestop alone (its traps
#           end every context on the GPU, so nothing runs beside it).
# Steps run one after another: independent jobs at once on one GPU starve
# each other (a rank's kernel waiting for its peer holds SMs another job's
# kernels need; results/gpu-2026-12-07b.md). Logs go to $OUT/logs.tgz; a
# short table is printed last.
set -u
cd "$(dirname "$0")/.."
PART=${1:?usage: gpu-tree1.sh ranks|python}
O=$OUT/r; mkdir -p $O
export CALL_S=${CALL_S:-570} CALL_T0=$(date +%s)
case $PART in
ranks)
  MPS=1 STEPS="env native doctor world2 world3 stress2 stress3" STRESS_SECONDS=${STRESS_SECONDS:-120} \
    scripts/gpu-check.sh $O/c > $O/c.out 2>&1
  MODES=smoke scripts/gpu-moe.sh $O/moe > $O/moe.out 2>&1 ;;
python)
  STEPS=python scripts/gpu-check.sh $O/py > $O/py.out 2>&1
  scripts/gpu-fsdp.sh $O/fsdp > $O/fsdp.out 2>&1
  scripts/gpu-fsdp-diag.sh $O/diag > $O/diag.out 2>&1
  scripts/gpu-wheel.sh $O/wheel > $O/wheel.out 2>&1
  rm -rf $O/wheel/venv
  STEPS=cestop scripts/gpu-check.sh $O/ce > $O/ce.out 2>&1 ;;
*) echo "gpu-tree1.sh: unknown part $PART (want ranks or python)" >&2; exit 2 ;;
esac
for f in c py ce; do [ -f $O/$f/summary.txt ] && { echo "== $f"; grep -E "rc=|STRESS total|^world|^native|^python|^cestop" $O/$f/summary.txt | cut -c1-400 | head -14; }; done
for f in fsdp wheel diag moe; do [ -f $O/$f.out ] && { echo "== $f"; tail -12 $O/$f.out | cut -c1-240; }; done
# One tarball: the device tool returns few files.
tar -C $O -czf "$OUT/logs.tgz" . && rm -rf $O
