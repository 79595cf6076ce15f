#!/usr/bin/env bash
# gpu-world.sh: the GPU checks of issue 10 ("One World"): every GPU path
# through the user API, on one GPU shared by 2 ranks (`symmem launch -n 2`),
# plus the 2-GPU tests where 2 GPUs are visible. Build on the build machine
# first (no Go toolchain on the GPU host):
#
#   CGO_ENABLED=1 go build -o .build/symmem ./cmd/symmem
#   CGO_ENABLED=1 go test -c -o .build/symmem.test .
#   CGO_ENABLED=1 go test -c -o .build/nccl-backend.test ./backend/nccl
#   CGO_ENABLED=1 go build -o .build/allreduce ./examples/allreduce
#
# then run `scripts/gpu-world.sh [outdir]` there. Logs go to outdir ($OUT,
# else ./gpu-world-out); a short table is printed last. Steps can be chosen
# with STEPS="env doctor promises ag two graph ark api cost dies bench example nccl2".
# EXTRA_ENV="K=V ..." is added to every rank (e.g. the switch that lets
# several ranks share one GPU, if the build needs one).
set -u
OUTDIR=${1:-${OUT:-./gpu-world-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
# NVLink multicast stays off in everything of ours (symmem sets it only
# when unset; doctor must report "set by the user, kept").
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for kv in ${EXTRA_ENV:-}; do export "$kv"; done
STEPS=${STEPS:-"env doctor promises ag two graph ark api cost dies bench example nccl2"}
if [ -z "${SYMMEM_NCCL_LIB:-}" ]; then
  for f in /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2; do
    [ -e "$f" ] && export SYMMEM_NCCL_LIB="$f"
  done
fi
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
declare -A RC NOTE
ORDER=()
step() { # name timeout_s cmd...
  local name=$1 t=$2; shift 2
  local t0=$(date +%s)
  ORDER+=("$name")
  echo "=== $name: $*" | tee -a "$OUTDIR/$name.log"
  timeout -k 10 "$t" "$@" >>"$OUTDIR/$name.log" 2>&1
  RC[$name]=$?
  echo "=== $name: rc=${RC[$name]} in $(( $(date +%s) - t0 ))s" | tee -a "$OUTDIR/$name.log"
}
has() { [[ " $STEPS " == *" $1 "* ]]; }
# A root-package test role on 2 ranks sharing the GPU(s): the role is named
# by SYMMEM_TEST_ROLE (TestMain runs it instead of the tests).
RANKS=(.build/symmem launch -n 2 -- .build/symmem.test -test.run '^$')

if has env; then
  { date -u; uname -a; nvidia-smi; echo "SYMMEM_NCCL_LIB=${SYMMEM_NCCL_LIB:-unset}"; ls -l .build/; } >"$OUTDIR/env.log" 2>&1
  ORDER+=(env); RC[env]=0
fi
# doctor through the user API on the GPU (it was the backend's own Target).
has doctor && step doctor 120 .build/symmem doctor -n 2 -backend cuda -all
# Every documented sentinel on the GPU backend (errors.Is through the layers).
has promises && step promises 120 env SYMMEM_TEST_ROLE=promises-cuda "${RANKS[@]}"
# All-gather on auto and every declared algorithm, fresh data, checked.
has ag && step ag 200 env SYMMEM_TEST_ROLE=gpuag "${RANKS[@]}"
has two && step two 120 env SYMMEM_TEST_ROLE=gputwo "${RANKS[@]}"
has graph && step graph 150 env SYMMEM_TEST_ROLE=gpugraph "${RANKS[@]}"
has ark && step ark 150 env SYMMEM_TEST_ROLE=gpuark "${RANKS[@]}"
# The user-API suite of TestGPUUserAPI (world group; subgroups need 4
# ranks) forces NCCL paths: only where each rank has its own GPU.
if has api && [ "$NGPU" -ge 2 ]; then step api 200 env SYMMEM_TEST_ROLE=gpu "${RANKS[@]}"; fi
has cost && step cost 120 env SYMMEM_TEST_ROLE=gpucost "${RANKS[@]}"
# A peer dies: the kernel's watchdog (3 s) fails rank 0's stream; rank 0
# exits 0 when it saw the failure in time.
has dies && step dies 120 env SYMMEM_TEST_ROLE=gpudie "${RANKS[@]}"
# symmem bench on the user API (bench/worldtarget), GPU backend; NCCL only
# where each rank has its own GPU.
if has bench; then
  ALGOS=auto,kernel,ce
  [ "$NGPU" -ge 2 ] && ALGOS=auto,kernel,ce,nccl,nccl-window
  step bench 400 .build/symmem bench -n 2 -backend cuda -ops ag,rs,ar,bc -b 4K -e 256M -f 4 -algo "$ALGOS" -json "$OUTDIR/bench.json"
fi
has example && step example 120 .build/symmem launch -n 2 -- .build/allreduce
if has nccl2; then
  if [ "$NGPU" -ge 2 ]; then
    step nccl2 300 .build/nccl-backend.test -test.v -test.count=1 -test.timeout 290s
    step api2 300 .build/symmem.test -test.v -test.count=1 -test.run '^(TestGPU|TestErrorPromisesGPU)' -test.timeout 290s
  else
    ORDER+=(nccl2); RC[nccl2]=skip; NOTE[nccl2]="needs 2 GPUs ($NGPU visible): NCCL refuses two ranks on one GPU"
  fi
fi

echo
echo "== gpu-world summary ($NGPU GPU(s); logs in $OUTDIR)"
printf '%-10s %-6s %s\n' step rc note
for s in "${ORDER[@]}"; do
  n=${NOTE[$s]:-}
  [ -z "$n" ] && [ -f "$OUTDIR/$s.log" ] && n=$(grep -hE '^(\[rank 0\] )?(GPU |ok |USERCOST|SKIP|WRONG|symmem doctor|cuda: nccl)' "$OUTDIR/$s.log" | head -3 | tr '\n' ' ' | cut -c1-150)
  printf '%-10s %-6s %s\n' "$s" "${RC[$s]}" "$n"
done
