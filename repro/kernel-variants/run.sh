#!/usr/bin/env bash
# run.sh [outdir]: on the GPU host, the builds of build.sh. For each
# variant in VARIANTS (default "ar-prefetch ll-t512"): its bit-exact
# reduction, graph and mismatch tests and its stress (STRESS seconds,
# default 40); then each variant against base, alternated per round
# (scripts/gpu-ab.sh, ROUNDS, default 3), on RANKS ranks (default 2):
#   ar-prefetch  the kernel's reduce-scatter and all-reduce, 1 MiB-1 GiB,
#                and NCCL's all-reduce as the control (the same in both
#                builds: its ratio is the run's noise)
#   ll-t512      ll of every op, 4-256 KiB, eager and in CUDA graphs
# Carry .build/kv only. Tables last.
set -u
OUTDIR=${1:-${OUT:-./kernel-variants-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/../.."
. scripts/gpu-lib.sh
VARIANTS=${VARIANTS:-ar-prefetch ll-t512}
for v in base $VARIANTS; do
  for b in symmem symmem.test; do
    [ -x .build/kv/$v/$b ] || gzip -dkf .build/kv/$v/$b.gz || exit 2
  done
done
N=${RANKS:-2}
for v in $VARIANTS; do
  SYMMEM_GPU_TEST_RANKS=$N step "checks-$v" 240 .build/kv/$v/symmem.test -test.v -test.count=1 \
    -test.run '^TestGPUWorld(ReduceKernel|Graph|KernelMismatch)$' -test.timeout 230s
  SYMMEM_GPU_TEST_RANKS=$N SYMMEM_STRESS_SECONDS=${STRESS:-40} step "stress-$v" 240 .build/kv/$v/symmem.test -test.v -test.count=1 \
    -test.run '^TestGPUStress$' -test.timeout 230s
  case $v in
    ar-prefetch)
      S="-d bfloat16 -b 1M -e 1G -f 4 -c 0 --inplace no"
      B="--ops reduce_scatter --algo kernel $S;--ops all_reduce --algo kernel $S;--ops all_reduce --algo nccl $S" ;;
    ll-t512)
      S="--ops all_gather,reduce_scatter,all_reduce -d bfloat16 --algo ll -b 4K -e 256K -f 4"
      B="$S;$S -G 20" ;;
  esac
  mkdir -p "$OUTDIR/ab-$v"
  LAUNCHER=.build/kv/base/symmem RANKS=$N BUILDS="base=.build/kv/base/symmem $v=.build/kv/$v/symmem" \
    BENCHES="$B" scripts/gpu-ab.sh "$OUTDIR/ab-$v" "${ROUNDS:-3}" >"$OUTDIR/ab-$v.txt" 2>&1
done
grep -h -E "^--- (FAIL|PASS)|STRESS total|GPU reduction kernels" "$OUTDIR"/checks-*.log "$OUTDIR"/stress-*.log | sort | uniq -c
for v in $VARIANTS; do echo "== $v"; tail -30 "$OUTDIR/ab-$v.txt"; done
