#!/usr/bin/env bash
# One call: the current tree on one GPU, ranks sharing it under MPS, in
# four lanes at once (the device tool bounds a call at 600 s): stress2 and
# stress3 (STRESS_SECONDS each), the world suites with 2 and 3 ranks plus
# native and doctor then the MoE benchmark's smoke run (gpu-moe.sh), and
# the Python lane (gpu-python.sh, gpu-fsdp.sh, the FSDP diagnosis in checked mode, gpu-wheel.sh); then cestop alone (its
# trap ends every context on the GPU under MPS). Timing figures from this
# call are not measurements (four lanes share the GPU).
set -u
cd "$(dirname "$0")/.."
O=$OUT/r; mkdir -p $O
OUTDIR=$OUT
export CALL_S=${CALL_S:-560} CALL_T0=$(date +%s)
. scripts/gpu-lib.sh
mps_on > $O/mps.log 2>&1
S=${STRESS_SECONDS:-300}
if [ "${SHORT:-0}" = 1 ]; then
  # SHORT=1, for a call of a few minutes: the checks of this tree's GPU
  # changes first (world2 and world3 apart, stress2, the Python checks,
  # the FSDP diagnosis); no stress3, MoE, FSDP runs, wheel or cestop.
  PACK=0 STEPS=stress2 STRESS_SECONDS=$S scripts/gpu-check.sh $O/s2 > $O/s2.out 2>&1 &
  PACK=0 STEPS="env native world2" scripts/gpu-check.sh $O/w > $O/w.out 2>&1 &
  PACK=0 STEPS=world3 scripts/gpu-check.sh $O/w3 > $O/w3.out 2>&1 &
  ( PACK=0 STEPS=python scripts/gpu-check.sh $O/py > $O/py.out 2>&1
    scripts/gpu-fsdp-diag.sh $O/diag > $O/diag.out 2>&1 ) &
else
  PACK=0 STEPS=stress2 STRESS_SECONDS=$S scripts/gpu-check.sh $O/s2 > $O/s2.out 2>&1 &
  PACK=0 STEPS=stress3 STRESS_SECONDS=$S scripts/gpu-check.sh $O/s3 > $O/s3.out 2>&1 &
  ( PACK=0 STEPS="env native doctor world2 world3" scripts/gpu-check.sh $O/w > $O/w.out 2>&1
    MPS_HELD=1 MODES=smoke scripts/gpu-moe.sh $O/moe > $O/moe.out 2>&1 ) &
  ( PACK=0 STEPS=python scripts/gpu-check.sh $O/py > $O/py.out 2>&1
    scripts/gpu-fsdp.sh $O/fsdp > $O/fsdp.out 2>&1
    scripts/gpu-fsdp-diag.sh $O/diag > $O/diag.out 2>&1
    scripts/gpu-wheel.sh $O/wheel > $O/wheel.out 2>&1 ) &
fi
wait
mps_off >> $O/mps.log 2>&1
[ "${SHORT:-0}" = 1 ] || PACK=0 STEPS=cestop scripts/gpu-check.sh $O/ce > $O/ce.out 2>&1
rm -rf $O/wheel/venv
tar -C $O -czf "$OUTDIR/logs.tgz" .
for f in s2 s3 w w3 py ce; do echo "== $f"; grep -E "rc=|STRESS total|^world|^native|^python|^cestop" $O/$f/summary.txt 2>/dev/null | head -12; done
grep -h -E "^[a-z0-9=_-]+ +[0-9a-z]+ +" $O/fsdp.out | tail -8
tail -12 $O/wheel.out; tail -8 $O/diag.out; tail -14 $O/moe.out
