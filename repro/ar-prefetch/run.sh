#!/usr/bin/env bash
# run.sh [outdir]: on the GPU host, the builds of build.sh: the prefetch
# build's reductions (bit-exact), graphs and mismatches, its stress (STRESS
# seconds, default 45), then the kernel's reduce-scatter and all-reduce
# beside NCCL (a control: its ratio shows the run's noise), 1 MiB-1 GiB,
# both builds alternated per round (scripts/gpu-ab.sh, ROUNDS, default 3),
# on RANKS ranks (default 2). Carry .build/arp only. Tables last.
set -u
OUTDIR=${1:-${OUT:-./ar-prefetch-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/../.."
. scripts/gpu-lib.sh
for v in base prefetch; do
  for b in symmem symmem.test; do
    [ -x .build/arp/$v/$b ] || gzip -dkf .build/arp/$v/$b.gz || exit 2
  done
done
N=${RANKS:-2}
SYMMEM_GPU_TEST_RANKS=$N step checks 240 .build/arp/prefetch/symmem.test -test.v -test.count=1 \
  -test.run '^TestGPUWorld(ReduceKernel|Graph|KernelMismatch)$' -test.timeout 230s
SYMMEM_GPU_TEST_RANKS=$N SYMMEM_STRESS_SECONDS=${STRESS:-45} step stress 240 .build/arp/prefetch/symmem.test -test.v -test.count=1 \
  -test.run '^TestGPUStress$' -test.timeout 230s
S="--ops reduce_scatter,all_reduce -d bfloat16 --algo kernel,nccl -b 1M -e 1G -f 4 -c 0 --inplace no"
LAUNCHER=.build/arp/base/symmem RANKS=$N BUILDS="base=.build/arp/base/symmem prefetch=.build/arp/prefetch/symmem" \
  BENCHES="$S" scripts/gpu-ab.sh "$OUTDIR" "${ROUNDS:-3}" >"$OUTDIR/ab-table.txt" 2>&1
grep -h -E "^--- (FAIL|PASS)|STRESS total|GPU reduction kernels" "$OUTDIR"/checks.log "$OUTDIR"/stress.log | sort | uniq -c
cat "$OUTDIR/ab-table.txt"
