#!/usr/bin/env bash
# gpu-e2e.sh [outdir]: the end-to-end FSDP2 training benchmark
# (bench/e2e/fsdp_train.py) with NCCL and with symmem, alternated ROUNDS
# times (default 2) in one run, on 2 GPUs and, where there are 4 or more,
# on 4: median step time, tokens/s, symmem/NCCL, and how far the losses
# of the two runs drift apart. Build on the build machine first
# (scripts/build-gpu.sh: .build/libsymmem.so). COMMS lists the variants
# run in turn each round (default "nccl symmem"; "symmem:ALGO" forces a
# path, e.g. COMMS="nccl symmem symmem:all_gather=ce" compares auto with
# the copy-engine all-gather in the same run; "local" adds the ceiling: the
# step without communication between GPUs, fsdp_train.py's --comm local).
# ARGS adds arguments to every
# run (e.g. "--preset small" to check the script).
# SIZES chooses the GPU counts (default 2, and 4 where there are 4); the
# ranks use the first n of CUDA_VISIBLE_DEVICES when it is set (a lane of
# a larger machine), else GPUs 0..n-1; T bounds each run (default 900 s).
# Logs: outdir/e2e-<n>-<variant>-<round>.log; the table is printed last.
# Runs: results/gpu-2026-11-26c.md (2 GPUs), results/gpu-2026-11-26d.md (4).
set -u
OUTDIR=${1:-${OUT:-./gpu-e2e-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
. scripts/gpu-lib.sh # the torch venv, its NCCL for symmem too, multicast off, step
use_libsymmem
torch_env >"$OUTDIR/env.log" 2>&1
for n in $(lane_sizes); do
  devs=$(lane_devs "$n")
  for r in $(seq "${ROUNDS:-2}"); do
    for v in ${COMMS:-nccl symmem}; do
      comm=${v%%:*} algo=()
      [ "$v" != "$comm" ] && algo=(--algo "${v#*:}")
      # shellcheck disable=SC2086
      CUDA_VISIBLE_DEVICES=$devs step "e2e-$n-${v/:/-}-$r" "${T:-900}" torchrun --standalone --nproc-per-node "$n" \
        bench/e2e/fsdp_train.py --comm "$comm" "${algo[@]}" ${ARGS:-}
    done
  done
done
python3 - "$OUTDIR" <<'PY'
import glob, json, os, statistics, sys
runs = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "e2e-*.log"))):
    for line in open(path):
        if line.startswith("{") and '"bench": "fsdp_train"' in line:
            j = json.loads(line)
            v = j["comm"] if j["comm"] == "nccl" or j.get("algo") in (None, "auto") else j["comm"] + ":" + j["algo"]
            runs.setdefault((j["world"], v), []).append(j)
print("GPUs | comm | rounds | step ms (median of rounds) | tokens/s | vs NCCL | max |loss - NCCL loss|")
for n in sorted({k[0] for k in runs}):
    base = runs.get((n, "nccl"), [])
    bt = statistics.median(r["step_ms_median"] for r in base) if base else None
    for comm in ["nccl"] + sorted(v for (m, v) in runs if m == n and v != "nccl"):
        rs = runs.get((n, comm), [])
        if not rs:
            print(f"{n} | {comm} | 0 | - | - | - | -"); continue
        t = statistics.median(r["step_ms_median"] for r in rs)
        tps = statistics.median(r["tokens_per_s"] for r in rs)
        drift = max((abs(a - b) for r in rs for a, b in zip(r["losses"], base[0]["losses"])), default=0.0) if base else None
        d = "- (other weights)" if comm == "local" or drift is None else f"{drift:.2e}"
        print(f"{n} | {comm} | {len(rs)} | {t:.1f} | {tps:.0f} | {bt / t:.3f} | {d}" if bt else f"{n} | {comm} | {len(rs)} | {t:.1f} | {tps:.0f} | - | -")
PY
