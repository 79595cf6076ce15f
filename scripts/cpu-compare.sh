#!/usr/bin/env bash
# cpu-compare.sh: CPU all-reduce and all-gather, Open MPI 4.1.6 (mpi4py,
# shared memory through the vader BTL) vs `symmem bench -backend cpu` for
# float32, bfloat16 and float16, 2 ranks on one host, 1 MiB..256 MiB, in one
# run (issue 16). Build first on the build machine (no Go toolchain here):
#
#   go build -o .build/symmem ./cmd/symmem
#
# then `scripts/cpu-compare.sh [outdir]` on the 16-core host. Logs go to
# outdir ($OUT); the comparison table (scripts/cpu_compare.py table) is
# printed last. Environment: MIN, MAX (sizes, default 1M, 256M), NRANKS
# (default 2), MPIRUN_ARGS (extra mpirun flags), PYTHON (default python3).
set -u
OUTDIR=${1:-${OUT:-./cpu-compare-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
MIN=${MIN:-1M} MAX=${MAX:-256M} N=${NRANKS:-2} PY=${PYTHON:-python3}
SYMMEM=${SYMMEM_BIN:-.build/symmem}
[ -x "$SYMMEM" ] || { echo "missing $SYMMEM: run 'go build -o .build/symmem ./cmd/symmem' on the build machine" >&2; exit 2; }
{
  date -u; uname -a; lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Socket|NUMA node\(s\)'
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

JSONS=()
for dt in float32 bfloat16 float16; do
  echo "=== symmem $dt"
  # --nproc-per-node is the rank count (-n is nccl-tests' iteration count:
  # runs 7 and 9 passed -n 2 and timed 2 calls per size). The budget and
  # warmup match the MPI side's (0.5 s of timed calls, 3 warmup calls).
  $SYMMEM bench -backend cpu --nproc-per-node "$N" --budget 500ms -w 3 -ops all_reduce,all_gather \
    -b "$MIN" -e "$MAX" -f 2 -dtype "$dt" -inplace no -json "$OUTDIR/symmem-$dt.json" >"$OUTDIR/symmem-$dt.log" 2>&1
  echo "rc=$?"
  JSONS+=("$OUTDIR/symmem-$dt.json")
done

echo
$PY scripts/cpu_compare.py table --mpi "$OUTDIR/mpi.jsonl" --symmem "${JSONS[@]}" | tee "$OUTDIR/table.txt"
