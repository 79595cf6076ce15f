#!/usr/bin/env bash
# run.sh [outdir]: builds ncclsym on a GPU host and runs its checks on 2 GPUs
# and on every GPU, the buffers at the window heads, 4098 bytes in (2 past a
# 4-byte boundary: the stress test found wrong results there) and 4100 bytes in, then
# the reduce-scatter timings. Logs to outdir ($OUT, else ./ncclsym-out).
set -u
OUTDIR=${1:-${OUT:-./ncclsym-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
CUDA=${CUDA:-/usr/local/cuda}
NCCL_LIB=${NCCL_LIB:-$(dirname /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2)}
cc -O2 -std=gnu11 -pthread ncclsym.c -I"$CUDA/include" -L"$CUDA/lib64" -lcudart \
  -L"$NCCL_LIB" -l:libnccl.so.2 -Wl,-rpath,"$NCCL_LIB" -o /tmp/ncclsym || exit 1
GPUS=$(nvidia-smi -L | wc -l)
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv; echo "NCCL_LIB=$NCCL_LIB"; } >"$OUTDIR/ncclsym-env.log"
for g in 2 $GPUS; do
  [ "$g" -gt "$GPUS" ] && continue
  devs=$(seq -s, 0 $((g - 1)))
  for off in ${OFFSETS:-0 4098 4100}; do
    log="$OUTDIR/ncclsym-${g}gpu-off$off.log"
    { CUDA_VISIBLE_DEVICES=$devs NCCLSYM_OFFSET=$off timeout 300 /tmp/ncclsym check ${LO:-1} ${HI:-4100}
      for c in ${BIG:-8030 131073 1048577}; do CUDA_VISIBLE_DEVICES=$devs NCCLSYM_OFFSET=$off timeout 120 /tmp/ncclsym check $c $c; done
    } >"$log" 2>&1
    echo "== $g GPUs, offset $off: $(grep -c ^WRONG "$log") wrong lines"; grep -A40 ^summary "$log" | head -40
  done
  CUDA_VISIBLE_DEVICES=$devs timeout 120 /tmp/ncclsym time ${TIMES:-4096 4097 65536 65537 131072 131074 524288 524289} \
    >"$OUTDIR/ncclsym-${g}gpu-time.log" 2>&1
  cat "$OUTDIR/ncclsym-${g}gpu-time.log"
done
