#!/usr/bin/env bash
# run.sh [outdir]: on the GPU host, the variants built by build.sh: the
# prefetch build's reductions, graphs and mismatches (bit-exact), its stress
# (STRESS seconds, default 60), then ll of every op side by side with base,
# eager and in CUDA graphs (-G 20), alternated per round (scripts/gpu-ab.sh),
# on RANKS ranks (default 2). Tables last. Carry .build/llv only.
set -u
OUTDIR=${1:-${OUT:-./ll-variants-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/../.."
. scripts/gpu-lib.sh
for v in base prefetch; do
  for b in symmem symmem.test; do
    [ -x .build/llv/$v/$b ] || gzip -dkf .build/llv/$v/$b.gz || exit 2
  done
done
N=${RANKS:-2}
SYMMEM_GPU_TEST_RANKS=$N step checks 240 .build/llv/prefetch/symmem.test -test.v -test.count=1 \
  -test.run '^TestGPUWorld(ReduceKernel|Graph|KernelMismatch)$' -test.timeout 230s
SYMMEM_GPU_TEST_RANKS=$N SYMMEM_STRESS_SECONDS=${STRESS:-60} step stress 240 .build/llv/prefetch/symmem.test -test.v -test.count=1 \
  -test.run '^TestGPUStress$' -test.timeout 230s
S="--ops all_gather,reduce_scatter,all_reduce -d bfloat16 --algo ll -b 1K -e 64K -f 4"
LAUNCHER=.build/llv/base/symmem RANKS=$N BUILDS="base=.build/llv/base/symmem prefetch=.build/llv/prefetch/symmem" \
  BENCHES="$S;$S -G 20" scripts/gpu-ab.sh "$OUTDIR" "${ROUNDS:-3}" >"$OUTDIR/ab-table.txt" 2>&1
grep -h -E "^--- (FAIL|PASS)|STRESS total|GPU reduction kernels" "$OUTDIR"/checks.log "$OUTDIR"/stress.log | sort | uniq -c
cat "$OUTDIR/ab-table.txt"
