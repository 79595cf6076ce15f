#!/usr/bin/env bash
# gpu-ecosystem.sh: symmem with torchrun both ways, and a GPU sweep with its
# plot, on the GPU host (issue 12). Build first on the build machine (no Go
# toolchain on GPU hosts):
#
#   CGO_ENABLED=1 go build -o .build/symmem ./cmd/symmem
#
# then run `scripts/gpu-ecosystem.sh [outdir]` there with the torch venv's
# python3 and torchrun on PATH. Logs, the JSON and the plot go to outdir
# ($OUT, else ./gpu-ecosystem-out); a short table is printed last.
#
# Steps:
#   torchrun-cpu   torchrun --standalone --nproc-per-node 2 --no-python runs
#                  `symmem bench` (CPU backend) with only torchrun's variables:
#                  torchrun's agent store holds MASTER_PORT, symmem's rank 0
#                  hosts its own store on MASTER_PORT+1 (token derived from
#                  TORCHELASTIC_RUN_ID). Success: rc 0 and "# Out of bounds
#                  values : 0 OK" in the log.
#   torchrun-doctor the same with `symmem doctor -all` (rank-prefixed lines).
#   torchrun-cuda  1 rank on the GPU under torchrun: `symmem doctor` and a
#                  small all-gather sweep (1 rank: busbw is 0 by definition,
#                  the rows still check correctness).
#   torch-launch   `symmem launch --nproc-per-node 2 python3
#                  scripts/torch-env-allreduce.py`: torch's
#                  init_process_group("env://") binds MASTER_PORT, which symmem
#                  launch leaves free. Success: rc 0 and "ok=True" twice.
#   gpu-graph      `symmem bench --backend cuda -G 10`: replays of CUDA graphs
#                  of 10 captured calls, 1 rank (world 1 works with or without
#                  the same-GPU sharing of issue 9). Needs the user-API bench
#                  target on the GPU (issue 10a); before that merge it fails
#                  at once with "-G 10: the cuda target cannot capture CUDA
#                  graphs". Success: rc 0, rows with 0 wrong.
#   gpu-sweep      `symmem bench -backend cuda` with a plot: with 2+ GPUs one
#                  rank per GPU and -algo auto,nccl (plain NCCL of the same run
#                  is the plot's baseline); with one GPU two ranks share it and
#                  -algo auto only (NCCL refuses two ranks on one GPU).
set -u
OUTDIR=${1:-${OUT:-./gpu-ecosystem-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ -z "${SYMMEM_NCCL_LIB:-}" ]; then
  for f in /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2; do
    [ -e "$f" ] && export SYMMEM_NCCL_LIB="$f"
  done
fi
SYMMEM=$PWD/.build/symmem
[ -x "$SYMMEM" ] || { echo "missing $SYMMEM: build it first (see the top of this script)"; exit 2; }
TORCHRUN=$(command -v torchrun || true)
[ -n "$TORCHRUN" ] || { for f in /opt/torch/.venv/bin/torchrun; do [ -x "$f" ] && TORCHRUN=$f; done; }
PY=$(command -v python3)
[ -n "$TORCHRUN" ] && PY=$(dirname "$TORCHRUN")/python3
declare -A RC NOTE
ORDER=()
step() { # name timeout_s cmd...
  local name=$1 t=$2; shift 2
  ORDER+=("$name")
  local t0=$(date +%s)
  echo "=== $name: $*" | tee -a "$OUTDIR/$name.log"
  timeout -k 10 "$t" "$@" >>"$OUTDIR/$name.log" 2>&1
  RC[$name]=$?
  echo "=== $name: rc=${RC[$name]} in $(( $(date +%s) - t0 ))s" | tee -a "$OUTDIR/$name.log"
}
{
  date -u; uname -a
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  "$SYMMEM" --version
  echo "torchrun: $TORCHRUN"; "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} >"$OUTDIR/env.log" 2>&1

step torchrun-cpu 300 "$TORCHRUN" --standalone --nproc-per-node 2 --no-python \
  "$SYMMEM" bench --backend cpu --ops all_reduce,all_gather -b 1K -e 16M -f 4 -J "$OUTDIR/torchrun-cpu.json"
NOTE[torchrun-cpu]=$(grep -c '^# Out of bounds values : 0 OK' "$OUTDIR/torchrun-cpu.log")" blocks 0 OK"
step torchrun-doctor 120 "$TORCHRUN" --standalone --nproc-per-node 2 --no-python "$SYMMEM" doctor --backend cpu --all
NOTE[torchrun-doctor]=$(grep -c '^\[rank 1\]' "$OUTDIR/torchrun-doctor.log")" lines from rank 1"
step torchrun-cuda 300 bash -c "'$TORCHRUN' --standalone --nproc-per-node 1 --no-python '$SYMMEM' doctor --backend cuda &&
  '$TORCHRUN' --standalone --nproc-per-node 1 --no-python '$SYMMEM' bench --backend cuda --ops all_gather -b 1K -e 16M -f 4"
NOTE[torchrun-cuda]=$(grep -c '^# Out of bounds values : 0 OK' "$OUTDIR/torchrun-cuda.log")" blocks 0 OK"
step torch-launch 180 "$SYMMEM" launch --nproc-per-node 2 "$PY" scripts/torch-env-allreduce.py
NOTE[torch-launch]=$(grep -c 'ok=True' "$OUTDIR/torch-launch.log")" ranks ok"

step gpu-graph 300 "$SYMMEM" bench --backend cuda --nproc-per-node 1 --ops all_gather,all_reduce --inplace only \
  -d bfloat16 -b 64K -e 16M -f 4 -G 10 -J "$OUTDIR/gpu-graph.json"
NOTE[gpu-graph]=$(grep -c '^# Out of bounds values : 0 OK' "$OUTDIR/gpu-graph.log")" blocks 0 OK"

NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$NGPU" -ge 2 ]; then
  SWEEP=(--nproc-per-node "$NGPU" --algo auto,nccl)
else
  SWEEP=(--nproc-per-node 2 --algo auto)
fi
step gpu-sweep 600 "$SYMMEM" bench --backend cuda "${SWEEP[@]}" -d bfloat16 -b 1K -e 1G -f 4 \
  -J "$OUTDIR/gpu-sweep.json" --plot "$OUTDIR/gpu-sweep.png"
NOTE[gpu-sweep]="$NGPU GPU(s): ${SWEEP[*]}; plot $( [ -s "$OUTDIR/gpu-sweep.png" ] && echo written || echo missing)"

echo
printf '%-16s %-4s %s\n' step rc note
for s in "${ORDER[@]}"; do printf '%-16s %-4s %s\n' "$s" "${RC[$s]}" "${NOTE[$s]:-}"; done
