#!/usr/bin/env bash
# cpu-compare.sh: CPU all-reduce and all-gather, Open MPI 4.1.6 (mpi4py,
# shared memory through the vader BTL) vs `symmem bench -backend cpu` for
# float32, bfloat16 and float16, 2 ranks on one host, 1 MiB..256 MiB, in one
# run (issue 16). Build first on the build machine (no Go toolchain here;
# scripts/build-gpu.sh builds both):
#
#   go build -o .build/symmem ./cmd/symmem
#   go test -c -o .build/shm.test ./internal/backend/shm
#
# and, optionally, an older commit to time in the same run (the "before"
# tables; BASE=6f03d07 is the code of run 10, before the fixed-cost work):
#
#   BASE=6f03d07; rm -rf /tmp/symmem-base && mkdir /tmp/symmem-base && git archive $BASE | tar -x -C /tmp/symmem-base &&
#     (cd /tmp/symmem-base && go build -o "$OLDPWD/.build/symmem-base" ./cmd/symmem &&
#      go test -c -o "$OLDPWD/.build/shm-base.test" ./internal/backend/shm)
#
# then `scripts/cpu-compare.sh [outdir]` on the 16-core host. Logs go to
# outdir ($OUT). Printed last: BenchmarkCrew (one stage handed to a crew of
# 8 workers in a process of 16 Ps, as a rank of two has: hand-off cost and
# one core against the crew for 256 KiB-1 MiB), the executor variants of
# BenchmarkLocal side by side (scripts/cpu_compare.py local; with
# .build/shm-base.test also its crew column, before/after), the before
# table when .build/symmem-base exists, and the comparison with Open MPI
# (scripts/cpu_compare.py table). Environment: MIN, MAX (sizes, default
# 1M, 256M), NRANKS (default 2), MPIRUN_ARGS (extra mpirun flags), PYTHON
# (default python3), LOCAL=0 skips BenchmarkLocal and BenchmarkCrew.
set -u
OUTDIR=${1:-${OUT:-./cpu-compare-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
MIN=${MIN:-1M} MAX=${MAX:-256M} N=${NRANKS:-2} PY=${PYTHON:-python3}
SYMMEM=${SYMMEM_BIN:-.build/symmem}
BASE=${SYMMEM_BASE:-.build/symmem-base}
SHMTEST=.build/shm.test
SHMBASE=${SHM_BASE:-.build/shm-base.test}
[ -x "$SYMMEM" ] || { echo "missing $SYMMEM: run 'go build -o .build/symmem ./cmd/symmem' on the build machine" >&2; exit 2; }
{
  date -u; uname -a; lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Socket|NUMA node\(s\)'
  # reduce picks its AVX-512BW bf16 kernel where the CPU (and the VM) has it.
  echo "AVX-512BW: $(grep -q -w avx512bw /proc/cpuinfo && echo yes || echo no)"
  mpirun --version 2>&1 | head -1
  $PY -c 'import mpi4py, sys; print("mpi4py", mpi4py.__version__, "python", sys.version.split()[0])'
  $SYMMEM version 2>&1 | head -3
} | tee "$OUTDIR/host.txt"

echo "=== Open MPI float32 (all_reduce sum, all_gather)"
# --bind-to none: symmem's ranks are not pinned either; vader is Open MPI's
# shared-memory transport.
mpirun --allow-run-as-root -np "$N" --bind-to none --mca btl self,vader ${MPIRUN_ARGS:-} \
  $PY scripts/cpu_compare.py mpi --min "$MIN" --max "$MAX" --out "$OUTDIR/mpi.jsonl" \
  >"$OUTDIR/mpi.log" 2>&1
echo "rc=$? ($(wc -l <"$OUTDIR/mpi.jsonl" 2>/dev/null || echo 0) rows)"

# sweep BIN DTYPE NAME: one symmem sweep. --nproc-per-node is the rank
# count (-n is nccl-tests' iteration count: runs 7 and 9 passed -n 2 and
# timed 2 calls per size). The budget and warmup match the MPI side's
# (0.5 s of timed calls, 3 warmup calls); -n only caps the calls.
sweep() {
  "$1" bench -backend cpu --nproc-per-node "$N" --budget 500ms -n 20000 -w 3 -ops all_reduce,all_gather \
    -b "$MIN" -e "$MAX" -f 2 -dtype "$2" -inplace no -json "$OUTDIR/$3.json" >"$OUTDIR/$3.log" 2>&1
  echo "rc=$?"
}

JSONS=()
for dt in float32 bfloat16 float16; do
  echo "=== symmem $dt"
  sweep "$SYMMEM" "$dt" "symmem-$dt"
  JSONS+=("$OUTDIR/symmem-$dt.json")
  if [ -x "$BASE" ] && [ "$dt" != float16 ]; then
    # Right after the new code's sweep, so both meet the same moment of
    # the host.
    echo "=== symmem-base $dt"
    sweep "$BASE" "$dt" "base-$dt"
  fi
done

if [ "${LOCAL:-1}" != 0 ]; then
  if [ -x "$SHMTEST" ]; then
    echo "=== BenchmarkLocal (executor variants, 2 ranks in one process)"
    "$SHMTEST" -test.run '^$' -test.bench Local -test.benchtime 0.3s -test.count 2 >"$OUTDIR/local-bench.txt" 2>&1
    echo "rc=$?"
    if [ -x "$SHMBASE" ]; then
      echo "=== BenchmarkLocal of the base build"
      # One count (the sweep above runs two): it only adds the base's crew column.
      "$SHMBASE" -test.run '^$' -test.bench Local -test.benchtime 0.3s -test.count 1 >"$OUTDIR/local-bench-base.txt" 2>&1
      echo "rc=$?"
    fi
    echo "=== BenchmarkCrew ($(( $(nproc) / N )) workers, GOMAXPROCS $(nproc): one rank's share of the CPUs)"
    SHM_BENCH_WORKERS=$(( $(nproc) / N )) "$SHMTEST" -test.run '^$' -test.bench Crew -test.benchtime 3000x -test.count 3 \
      -test.benchmem >"$OUTDIR/crew-bench.txt" 2>&1
    echo "rc=$?"
  else
    echo "=== BenchmarkLocal skipped: missing $SHMTEST (go test -c -o $SHMTEST ./internal/backend/shm)"
  fi
fi

echo
if [ -s "$OUTDIR/crew-bench.txt" ]; then
  $PY scripts/cpu_compare.py crew "$OUTDIR/crew-bench.txt" | tee "$OUTDIR/crew-table.txt"
  echo
fi
if [ -s "$OUTDIR/local-bench.txt" ]; then
  BASEARG=()
  [ -s "$OUTDIR/local-bench-base.txt" ] && BASEARG=(--base "$OUTDIR/local-bench-base.txt")
  $PY scripts/cpu_compare.py local "${BASEARG[@]}" "$OUTDIR/local-bench.txt" | tee "$OUTDIR/local-table.txt"
  echo
fi
if [ -s "$OUTDIR/base-float32.json" ]; then
  BJ=("$OUTDIR/base-float32.json")
  [ -s "$OUTDIR/base-bfloat16.json" ] && BJ+=("$OUTDIR/base-bfloat16.json")
  echo "# BEFORE: .build/symmem-base"
  $PY scripts/cpu_compare.py table --mpi "$OUTDIR/mpi.jsonl" --symmem "${BJ[@]}" | tee "$OUTDIR/base-table.txt"
  echo
  echo "# AFTER: .build/symmem"
fi
$PY scripts/cpu_compare.py table --mpi "$OUTDIR/mpi.jsonl" --symmem "${JSONS[@]}" | tee "$OUTDIR/table.txt"
