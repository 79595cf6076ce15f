#!/usr/bin/env bash
# gpu-tp-decode.sh [outdir]: the tensor-parallel decode benchmark
# (bench/e2e/tp_decode.py: NCCL, torch symmetric memory one-shot and
# two-shot, symmem; CUDA-graph replays of one decode step per batch size)
# on 2 GPUs and, where there are 4 or more, on 4 (SIZES overrides; the
# ranks use the first n of CUDA_VISIBLE_DEVICES when it is set). ARGS adds
# arguments (e.g. "--layers 4 --batches 1,64" to check the script). T bounds
# each run (default 600 s). Build first: scripts/build-gpu.sh
# (.build/libsymmem.so). Logs: outdir/tp-<n>.log; a table is printed last.
# NOT YET RUN on a GPU host (written 2026-11-26).
set -u
OUTDIR=${1:-${OUT:-./gpu-tp-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
. scripts/gpu-lib.sh
use_libsymmem
gpu_env >"$OUTDIR/env.log" 2>&1
for n in $(lane_sizes); do
  devs=$(lane_devs "$n")
  # shellcheck disable=SC2086
  CUDA_VISIBLE_DEVICES=$devs step "tp-$n" "${T:-600}" torchrun --standalone --nproc-per-node "$n" bench/e2e/tp_decode.py ${ARGS:-}
done
python3 - "$OUTDIR" <<'PY'
import glob, json, os, sys
print("GPUs | batch | AR bytes | " + " | ".join(["nccl", "torch-one-shot", "torch-two-shot", "symmem"]) + " (us/step) | symmem vs best other | symmem path")
for path in sorted(glob.glob(os.path.join(sys.argv[1], "tp-*.log"))):
    for line in open(path):
        if line.startswith("{") and '"bench": "tp_decode"' in line:
            j = json.loads(line)
            t = j["us_per_step"]
            cells = " | ".join(f"{t[m]:.1f}" if m in t else "-" for m in ("nccl", "torch-one-shot", "torch-two-shot", "symmem"))
            r = j.get("symmem_vs_best_other")
            print(f"{j['world']} | {j['batch']} | {j['allreduce_bytes']} | {cells} | {r:.3f} | {j.get('symmem_path')}" if r else
                  f"{j['world']} | {j['batch']} | {j['allreduce_bytes']} | {cells} | - | -")
PY
