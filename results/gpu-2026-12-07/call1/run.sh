#!/usr/bin/env bash
# Call 1 (tree at 0baf0ec, before this session's changes): what one H100
# checks with ranks sharing it under MPS. Logs packed into $OUT/logs.tgz.
set -u
cd "$(dirname "$0")/../../.."
O=$OUT/w; mkdir -p $O
export CALL_S=${CALL_S:-540} CALL_T0=$(date +%s)
MPS=1 PACK=0 STEPS="env native doctor world2 world3 python" scripts/gpu-check.sh $O/check > $O/check.out 2>&1
scripts/gpu-fsdp.sh $O/fsdp > $O/fsdp.out 2>&1
scripts/gpu-wheel.sh $O/wheel > $O/wheel.out 2>&1
tar -C $O -czf $OUT/logs.tgz .
for f in check fsdp wheel; do echo "== $f"; tail -25 $O/$f.out; done
