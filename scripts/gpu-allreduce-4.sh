#!/usr/bin/env bash
# gpu-allreduce-4.sh: the all-reduce / reduce-scatter kernel on every GPU of
# the host: its bit-exact correctness suite under `symmem launch -n N`, then
# all-reduce and reduce-scatter benches against NCCL (pool buffers: nccl,
# nccl-window; ordinary memory: plain NCCL) in one run. Build as for
# gpu-scale.sh; logs go to $OUT.
set -u
O=${OUT:-./gpu-allreduce-out}; mkdir -p "$O"
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
for f in /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2; do [ -e "$f" ] && export SYMMEM_NCCL_LIB=$f; done
N=${NRANKS:-$(nvidia-smi -L | wc -l)}
L=".build/symmem launch -n $N -timeout"
SYMMEM_TEST_ROLE=gpuark timeout 130 $L 120s -- .build/symmem.test -test.run '^$' > "$O/ar-n$N.log" 2>&1; echo "correctness rc=$?"
B=".build/symmem bench -backend cuda -dtype bfloat16 -budget 100ms -timeout 30s"
{ timeout 100 $L 90s -- $B -ops all_reduce -algo nccl,nccl-window,kernel,auto -b 16K -e 2M -f 2
  timeout 100 $L 90s -- $B -ops all_reduce -algo nccl -plain -b 16K -e 2M -f 2
  timeout 100 $L 90s -- $B -ops reduce_scatter -algo nccl,nccl-window,kernel,auto -b 32K -e $((2 * N))M -f 2
  timeout 100 $L 90s -- $B -ops reduce_scatter -algo nccl -plain -b 32K -e $((2 * N))M -f 2; } > "$O/arbench-n$N.log" 2>&1; echo "bench rc=$?"
grep -h 'GPU reduction kernels\|WRONG\|FAIL' "$O/ar-n$N.log" | head -5
grep -E '^\[rank 0\] +[0-9]+ |algo' "$O/arbench-n$N.log" | sed 's/^\[rank 0\] //' | grep -v '^#  ' |
  awk '/algo/ {print; next} {printf "%11s %9s %9s  %s\n", $1, $6, $10, $NF}'
