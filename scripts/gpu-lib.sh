# gpu-lib.sh: what the GPU scripts share (source it after setting OUTDIR):
# the torch venv first in PATH, the venv's NCCL, NCCL multicast off, GPUS,
# MPS on/off, and step (run one logged, bounded command; RC[name] = its
# exit status, ORDER lists the steps run).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
[ -d /opt/torch/.venv/bin ] && export PATH=/opt/torch/.venv/bin:$PATH
if [ -z "${SYMMEM_NCCL_LIB:-}" ]; then # the venv's NCCL (what torch uses), else the loader's
  for f in /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2; do
    [ -e "$f" ] && export SYMMEM_NCCL_LIB="$f"
  done
fi
# GPUS: the GPUs this run may use: those CUDA_VISIBLE_DEVICES lists (a lane
# of a larger machine, or one GPU for the ranks-share-a-GPU suite), else all.
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  GPUS=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
else
  GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
fi
export CUDA_MPS_PIPE_DIRECTORY=/tmp/symmem-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/symmem-mps-log
mps_on() {
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d && echo "MPS on"
}
mps_off() { echo quit | nvidia-cuda-mps-control 2>/dev/null; sleep 1; echo "MPS off"; }
declare -A RC
ORDER=()
# The device tool kills a command after 600 s, and with it the summary and
# the packing that bring the logs back: steps share CALL_S seconds (default
# 560) from the first script's start (CALL_T0, inherited by scripts a step
# runs). A step gets what is left if that is less than its own bound, and
# is skipped (rc=skip) under 30 s.
: "${CALL_T0:=$(date +%s)}" "${CALL_S:=560}"
export CALL_T0 CALL_S
step() { # name timeout_s cmd...
  local name=$1 t=$2; shift 2
  local t0=$(date +%s)
  local left=$(( CALL_T0 + CALL_S - t0 - 10 )) # 10: timeout's -k
  ORDER+=("$name")
  if [ "$left" -lt 30 ]; then
    RC[$name]=skip
    echo "=== $name: skipped, ${left}s left of the call's ${CALL_S}s (CALL_S)" | tee -a "$OUTDIR/$name.log"
    return
  fi
  [ "$t" -gt "$left" ] && t=$left
  echo "=== $name (bound ${t}s): $*" | tee -a "$OUTDIR/$name.log"
  timeout -k 10 "$t" "$@" >>"$OUTDIR/$name.log" 2>&1
  RC[$name]=$?
  echo "=== $name: rc=${RC[$name]} in $(( $(date +%s) - t0 ))s" | tee -a "$OUTDIR/$name.log"
}
gpu_env() { # the machine, for env.log
  date -u; uname -a
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv
  nvidia-smi topo -m
  echo "GPUS=$GPUS MPS=${MPS:-0} SYMMEM_NCCL_LIB=${SYMMEM_NCCL_LIB:-unset}"
}
torch_env() { # gpu_env and the torch stack the Python runs use
  gpu_env
  python3 -c 'import sys, torch; print(sys.executable, "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
}
use_libsymmem() { # Python runs load .build/libsymmem.so and python/ (exits 2 without the library)
  export SYMMEM_LIBRARY="$PWD/.build/libsymmem.so" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
  [ -e "$SYMMEM_LIBRARY" ] || { echo "missing $SYMMEM_LIBRARY: run scripts/build-gpu.sh on the build machine"; exit 2; }
}
lane_sizes() { # GPU counts to run: SIZES, else 2 (and 4 where there are 4)
  if [ -n "${SIZES:-}" ]; then echo "$SIZES"; elif [ "$GPUS" -ge 4 ]; then echo "2 4"; else echo 2; fi
}
lane_devs() { # the GPUs of an n-rank run: the first n of CUDA_VISIBLE_DEVICES (a lane), else 0..n-1
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then echo "$CUDA_VISIBLE_DEVICES" | cut -d, -f1-"$1"; else seq -s, 0 $(($1 - 1)); fi
}
pack_logs() { # [keep...]: every file under OUTDIR but summary.txt and keep into OUTDIR/logs.tgz (the device tool returns ~8 files)
  local ex=(--exclude=./summary.txt) f tgz
  for f in "$@"; do ex+=("--exclude=./$f"); done
  tgz=$(mktemp /tmp/symmem-logs.XXXXXX)
  if tar -C "$OUTDIR" -czf "$tgz" "${ex[@]}" .; then
    for f in "$OUTDIR"/* "$OUTDIR"/.[!.]*; do
      [ -e "$f" ] || continue
      case " summary.txt $* " in *" $(basename "$f") "*) continue;; esac
      rm -rf "$f"
    done
    mv "$tgz" "$OUTDIR/logs.tgz"
  else
    rm -f "$tgz"; echo "pack_logs: tar failed, the logs stay as they are" >&2
  fi
}
