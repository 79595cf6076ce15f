#!/usr/bin/env bash
# gpu-tp-decode.sh [outdir]: the tensor-parallel decode benchmark
# (bench/e2e/tp_decode.py: NCCL, torch symmetric memory one-shot and
# two-shot, symmem; CUDA-graph replays of one decode step per batch size)
# on 2 GPUs and, where there are 4 or more, on 4 (SIZES overrides; the
# ranks use the first n of CUDA_VISIBLE_DEVICES when it is set). ARGS adds
# arguments (e.g. "--layers 4 --batches 1,64"; "--modes
# nccl,torch-two-shot,symmem,symmem:ll,symmem:nccl-window" for symmem's
# paths side by side; a mode "none" adds the step without all-reduces, the
# ceiling). T bounds each run (default 600 s). Build first:
# scripts/build-gpu.sh (.build/libsymmem.so). Logs: outdir/tp-<n>.log; a
# table per run is printed last. Runs: results/gpu-2026-11-26d.md.
set -u
OUTDIR=${1:-${OUT:-./gpu-tp-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
. scripts/gpu-lib.sh
use_libsymmem
torch_env >"$OUTDIR/env.log" 2>&1
for n in $(lane_sizes); do
  devs=$(lane_devs "$n")
  # shellcheck disable=SC2086
  CUDA_VISIBLE_DEVICES=$devs step "tp-$n" "${T:-600}" torchrun --standalone --nproc-per-node "$n" bench/e2e/tp_decode.py ${ARGS:-}
done
python3 - "$OUTDIR" <<'PY'
import glob, json, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "tp-*.log"))):
    rows = [json.loads(l) for l in open(path) if l.startswith("{") and '"bench": "tp_decode"' in l]
    if not rows:
        continue
    modes = list(dict.fromkeys(m for j in rows for m in list(j["us_per_step"]) + list(j.get("refused", {}))))
    print("GPUs | batch | AR bytes | " + " | ".join(modes) + " (us/step) | symmem modes vs best other | symmem's path (auto)")
    for j in rows:
        t, vs = j["us_per_step"], j.get("vs_best_other") or {}
        cells = " | ".join(f"{t[m]:.1f}" if m in t else ("refused" if m in j.get("refused", {}) else "-") for m in modes)
        ratios = ", ".join(f"{m} {r:.3f}" for m, r in vs.items()) or "-"
        print(f"{j['world']} | {j['batch']} | {j['allreduce_bytes']} | {cells} | {ratios} | {j.get('symmem_path') or '-'}")
PY
