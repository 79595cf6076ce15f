#!/usr/bin/env bash
# gpu-scale.sh: symmem on every GPU of the host (issue 5) in one go: the
# user-API GPU test (world + TP x DP subgroups on 4 GPUs), the user-API GPU
# correctness roles (gpu_world_test.go) and the CLI benches with all GPUs as ranks, plus a 2-rank
# all-gather bench on the same host for comparison. Build first on the build
# machine (GPU hosts have no Go toolchain):
#
#   CGO_ENABLED=1 go test -c -o .build/symmem.test .
#   CGO_ENABLED=1 go build -o .build/symmem ./cmd/symmem
#
# then `scripts/gpu-scale.sh [outdir]` there; logs go to outdir ($OUT), a
# short table is printed last.
set -u
OUTDIR=${1:-${OUT:-./gpu-scale-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
. scripts/gpu-lib.sh # the venv first in PATH, its NCCL, multicast off, step
N=${NRANKS:-$GPUS}
{
  date -u; uname -a
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv
  nvidia-smi topo -m
  echo "SYMMEM_NCCL_LIB=${SYMMEM_NCCL_LIB:-unset} ranks=$N"
} >"$OUTDIR/env.log" 2>&1

L=".build/symmem launch -n $N -timeout"
step api 130 env SYMMEM_GPU_TEST_RANKS=$N .build/symmem.test -test.run '^TestGPUUserAPI$' -test.v -test.count=1 -test.timeout 120s
step usercost 60 .build/symmem.test -test.run '^TestGPUUserHostCost$' -test.v -test.count=1 -test.timeout 55s
# Correctness roles of the root test binary, all GPUs as ranks.
: >"$OUTDIR/correct.log"
for r in gpuag gputwo gpugraph gpuark promises-cuda; do
  echo "=== role $r" >>"$OUTDIR/correct.log"
  env SYMMEM_TEST_ROLE=$r timeout -k 10 120 $L 110s -- .build/symmem.test -test.run '^$' >>"$OUTDIR/correct.log" 2>&1
  rc=$?; echo "=== role $r rc=$rc" >>"$OUTDIR/correct.log"; ORDER+=("$r"); RC[$r]=$rc
done
B=".build/symmem bench -backend cuda -dtype bfloat16 -b 64K -e 1G -f 4 -budget 100ms -timeout 30s"
step ag 120 $L 110s -- $B -ops all_gather -algo nccl,nccl-window,ce,kernel,auto -json "$OUTDIR/ag-n$N.json"
if [ "${FULL:-1}" = 1 ]; then # reduce-scatter / all-reduce and plain NCCL (unchanged by the kernel work)
  step rsar 100 $L 90s -- $B -ops reduce_scatter,all_reduce -algo nccl,nccl-window,auto -json "$OUTDIR/rsar-n$N.json"
  step plain 70 $L 60s -- $B -ops all_gather,reduce_scatter,all_reduce -algo nccl -plain -inplace no -json "$OUTDIR/plain-n$N.json"
fi
if [ "$N" -gt 2 ]; then
  step ag2 60 .build/symmem launch -n 2 -timeout 55s -- $B -ops all_gather -algo nccl,ce,kernel,auto -inplace no -json "$OUTDIR/ag-n2.json"
fi

{
  echo "==================== gpu-scale summary ($(date -u +%FT%TZ)), $N ranks ===================="
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null
  for s in "${ORDER[@]}"; do printf '%-8s rc=%s\n' "$s" "${RC[$s]:-?}"; done
  grep -h -E -- '--- (PASS|FAIL|SKIP)' "$OUTDIR"/api.log "$OUTDIR"/usercost.log "$OUTDIR"/correct.log | sort | uniq -c
  grep -h -E 'GPU |USERCOST|FAIL:|WRONG' "$OUTDIR"/api.log "$OUTDIR"/usercost.log "$OUTDIR"/correct.log | grep -v '=== RUN' | head -30
  for s in ag rsar plain ag2; do
    [ -f "$OUTDIR/$s.log" ] || continue
    echo "--- bench $s"
    grep -E '^\[rank 0\] +[0-9]+ ' "$OUTDIR/$s.log" | sed 's/^\[rank 0\] //' | awk '$1>=65536' | head -60
  done
} | tee "$OUTDIR/summary.txt"
# The device tool returns at most 8 files: pack everything but the summary.
if [ -n "${PACK:-}" ]; then pack_logs; fi
