#!/usr/bin/env bash
# Call 4 (short: what device time was left): the session's tree on one GPU,
# ranks sharing it under MPS, everything at once: world2 and world3 (every
# GPU test of the user API, all-to-all's included), stress2 and stress3
# (STRESS_SECONDS each, all-to-all cases included), native and doctor, the
# Python checks with real torch on 2 ranks (all-to-all's included), and
# the FSDP diagnosis in checked mode. Timings here are not measurements.
set -u
cd "$(dirname "$0")/../../.."
O=$OUT/r; mkdir -p $O
export CALL_S=${CALL_S:-170} CALL_T0=$(date +%s)
. scripts/gpu-lib.sh
mps_on > $O/mps.log 2>&1
S=${STRESS_SECONDS:-80}
PACK=0 STEPS=stress2 STRESS_SECONDS=$S scripts/gpu-check.sh $O/s2 > $O/s2.out 2>&1 &
PACK=0 STEPS=stress3 STRESS_SECONDS=$S scripts/gpu-check.sh $O/s3 > $O/s3.out 2>&1 &
PACK=0 STEPS="env native doctor world2" scripts/gpu-check.sh $O/w2 > $O/w2.out 2>&1 &
PACK=0 STEPS="world3" scripts/gpu-check.sh $O/w3 > $O/w3.out 2>&1 &
( use_libsymmem
  SYMMEM_SHARE_DEVICE=1 timeout 150 .build/symmem launch -n 2 python3 python/tests/gpu_torch.py checks > $O/py-checks-n2.log 2>&1
  echo "py checks-n2 rc=$?" >> $O/py-checks-n2.log ) &
results/gpu-2026-12-07/call3/fsdp-diag.sh $O/diag > $O/diag.out 2>&1 &
wait
mps_off >> $O/mps.log 2>&1
tar -C $O -czf $OUT/logs.tgz .
for f in s2 s3 w2 w3; do grep -h -E "rc=|STRESS total" $O/$f/summary.txt 2>/dev/null; grep -h -E "^(world|native)[0-9]*: " $O/$f/summary.txt | cut -c1-400; done
for s in ok FAIL refused; do echo "py checks-n2 $s: $(grep -h -c -E "CHECK .* $s( |$)" $O/py-checks-n2.log)"; done; grep -h -E "CHECK .* FAIL|rc=" $O/py-checks-n2.log | head -8 | cut -c1-300
cat $O/diag.out | cut -c1-500
