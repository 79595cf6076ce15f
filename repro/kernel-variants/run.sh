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
#   ll-rows      ll of every op, 64 KiB-2 MiB, eager and in CUDA graphs
#                (a layout change: its checks matter, not its times)
#   stamps       no checks, no A/B: the kernel path's all-gather,
#                reduce-scatter and all-reduce at 1 KiB-16 MiB, eager and
#                in graphs, and the median of each stage its kernels print
# Carry .build/kv only. Tables last.
set -u
OUTDIR=${1:-${OUT:-./kernel-variants-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/../.."
. scripts/gpu-lib.sh
VARIANTS=${VARIANTS:-ar-prefetch ll-t512 ll-rows stamps}
for v in base $VARIANTS; do
  for b in symmem symmem.test; do
    [ -x .build/kv/$v/$b ] || gzip -dkf .build/kv/$v/$b.gz || exit 2
  done
done
N=${RANKS:-2}
stages() { # the stamps build's benches and the median of every stage per kernel, grid and mode
  for G in "" "-G 20"; do
    .build/kv/stamps/symmem bench --backend cuda --nproc-per-node "$N" --ops all_gather,reduce_scatter,all_reduce \
      -d bfloat16 --algo kernel -b 1K -e 16M -f 16 -n 3000 --budget 0 --samples 0 -c 0 --inplace no $G
  done >"$OUTDIR/stamps.log" 2>&1
  python3 - "$OUTDIR/stamps.log" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.search(r"STAGES (\w+) e=\d+ ctas=(\d+) setup=(\d+) ready=(\d+) data=(\d+) done=(\d+) total=(\d+)", line)
    if m:
        rows.setdefault((m.group(1), int(m.group(2))), []).append([int(x) for x in m.groups()[2:]])
print("kernel | CTAs | launches | setup | ready | data | done | total (median ns, the printing thread of CTA 0)")
for (k, c), v in sorted(rows.items()):
    med = [statistics.median(col) for col in zip(*v)]
    print(f"{k} | {c} | {len(v)} | " + " | ".join(f"{x:.0f}" for x in med))
PY
}
for v in $VARIANTS; do
  if [ "$v" = stamps ]; then
    stages >"$OUTDIR/stamps-table.txt" 2>&1
    continue
  fi
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
    ll-rows)
      S="--ops all_gather,reduce_scatter,all_reduce -d bfloat16 --algo ll -b 64K -e 2M -f 4"
      B="$S;$S -G 20" ;;
  esac
  mkdir -p "$OUTDIR/ab-$v"
  LAUNCHER=.build/kv/base/symmem RANKS=$N BUILDS="base=.build/kv/base/symmem $v=.build/kv/$v/symmem" \
    BENCHES="$B" scripts/gpu-ab.sh "$OUTDIR/ab-$v" "${ROUNDS:-3}" >"$OUTDIR/ab-$v.txt" 2>&1
done
grep -h -E "^--- (FAIL|PASS)|STRESS total|GPU reduction kernels" "$OUTDIR"/checks-*.log "$OUTDIR"/stress-*.log | sort | uniq -c
for v in $VARIANTS; do
  if [ "$v" = stamps ]; then echo "== stamps"; cat "$OUTDIR/stamps-table.txt"; else echo "== $v"; tail -30 "$OUTDIR/ab-$v.txt"; fi
done
