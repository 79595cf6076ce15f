#!/usr/bin/env bash
# gpu-plan40.sh CALL [outdir] | list: issue 40's GPU runs on a 2- or 4-GPU
# machine, one device call per CALL (each within CALL_S, default 560 s:
# the device tool kills a command at 600 s), through the topical scripts
# (gpu-check.sh, gpu-tune.sh, gpu-moe.sh, gpu-overlap.sh, gpu-tp-decode.sh,
# gpu-e2e.sh). `list` prints the plan: call, step, expected seconds on 4
# H100s, what it is (scripts/plan_test.go checks each call's sum against
# CALL_S). Parts that need 4 GPUs are skipped on 2 with a line saying so.
# Every log goes into outdir/logs.tgz ($OUT, else ./gpu-plan40-out), and
# a short table (outdir/summary.txt) is printed last.
#
# Order (a session runs as many calls as its device time allows, in order):
#   tree, hosts, stress (twice: >= 10 min of stress2 and stress4)   item 1
#   tune4a, tune4b (4 GPUs), tune2 (all-to-all, 2 GPUs)              item 2
#     -> on the build machine: the new tables into results/auto/, then
#        `go generate ./internal/backend/cuda` and scripts/build-gpu.sh
#   check4 (auto against every path, 4 ranks), a2a, overlap         items 2-4
#   e2e2, e2e4                                                       item 4
# Carry: .build/ (build-gpu.sh; symmem, symmem.test, nccl-backend.test,
# native-cuda.test, native-cublas.test, libsymmem.so as the calls need).
# (The one-GPU checks of a tree are scripts/gpu-tree1.sh's.) Each
# session writes its results/gpu-<date>.md from the tables and logs.
# Not covered (no script has them): NCCL windows and torch's
# all_to_all_single / all_to_all_vdev over 1 KiB-1 GiB (moe_dispatch.py
# has them at one shape), and torch's own set_symm_mem_for_comm FSDP path
# (bench/e2e/fsdp_train.py has no such variant).
set -u
cd "$(dirname "$0")/.."
PLAN='
tree    world2          70   every GPU test of the user API, 2 ranks
tree    world4          170  the same, 4 ranks (4 GPUs)
tree    nccl            30   internal/backend/nccl
tree    world3          110  the same, 3 ranks on GPUs 0-2 (on 2 GPUs ranks share them)
tree    cestop          30   TestGPUCopyEngineMismatch, 2 and 3 ranks
hosts   hosts           220  the world tests, 4 ranks as 2 hosts of 2 GPUs (TestGPUWorldHostsHierMix among them)
hosts   hostsdie        60   TestGPUWorldPeerDies across hosts, 5 runs (< 1 s on every survivor)
hosts   die4            60   TestGPUWorldPeerDies, 4 ranks, 5 runs (4 GPUs)
stress  stress4         420  TestGPUStress 4 ranks, 330 s (4 GPUs), beside stress2 on GPUs 2-3 (run the call twice)
stress  stress2         0    TestGPUStress 2 ranks, 330 s, at the same time as stress4
tune4a  tune-ag4        150  symmem tune all_gather, 4 ranks, bf16, ROUNDS=3, graph rows (4 GPUs)
tune4a  tune-a2a4       280  symmem tune all_to_all, 4 ranks, bf16 and fp32, ROUNDS=3, graph rows (4 GPUs)
tune4b  tune-rs4        230  symmem tune reduce_scatter, 4 ranks, bf16 and fp32, ROUNDS=3, graph rows (4 GPUs)
tune4b  tune-ar4        230  symmem tune all_reduce, the same (4 GPUs)
tune2   tune-a2a2       200  symmem tune all_to_all, 2 ranks, bf16 and fp32, ROUNDS=3, graph rows
check4  bench4-eager    280  symmem bench, 4 ranks, every op and path + auto, bf16, 1K-1G: auto/best (4 GPUs)
check4  bench4-graph    220  the same replayed in CUDA graphs (-G 20), out of place (4 GPUs)
a2a     bench2-a2a      40   symmem bench all_to_all, 2 ranks, auto/ce/nccl, 1K-1G, eager
a2a     bench2-a2a-G    40   the same in CUDA graphs
a2a     moe             190  gpu-moe.sh MODES=full: unit, 2 ranks sharing GPU 0, 2 and 4 GPUs (nccl, symmem paths, symmem-dev, torch-vdev)
overlap gpus-2          120  gpu-overlap.sh STEPS=gpus: bench overlap (ce all-gather beside GEMMs, FSDP case), 2 GPUs
overlap gpus-4          120  the same, 4 GPUs
overlap tp-4            90   gpu-tp-decode.sh, 4 GPUs, --layers 32, graphs, with symmem:ll and the no-comm ceiling (4 GPUs)
e2e2    e2e-2           360  gpu-e2e.sh 2 GPUs: nccl, symmem auto, symmem:all_gather=ce, local (the ceiling), 2 rounds
e2e2    e2e-2-exposed   140  the same, --seq 1024 (comm exposed), 1 round
e2e4    e2e-4           360  gpu-e2e.sh 4 GPUs, as e2e2 (4 GPUs)
e2e4    e2e-4-exposed   140  the same, --seq 1024, 1 round (4 GPUs)
'
CALL=${1:-list}
if [ "$CALL" = list ]; then echo "$PLAN" | grep .; exit 0; fi
echo "$PLAN" | awk '{print $1}' | grep -qx -- "$CALL" || {
  echo "gpu-plan40.sh: no call $CALL; calls: $(echo "$PLAN" | awk 'NF {print $1}' | uniq | tr '\n' ' ')"; exit 2; }
O=${2:-${OUT:-./gpu-plan40-out}}
mkdir -p "$O"; O=$(cd "$O" && pwd)
OUTDIR=$O
. scripts/gpu-lib.sh # GPUS, step, CALL_T0/CALL_S (shared with the scripts below), pack_logs
four() { # four STEP: true with 4 GPUs, else a line saying STEP was skipped
  [ "$GPUS" -ge 4 ] && return 0
  echo "$1: skipped, $GPUS GPUs (needs 4)" >>"$O/skipped.log"; return 1
}
if [ "$GPUS" -lt 2 ]; then
  echo "$CALL: skipped, $GPUS GPU(s): issue 40's calls need 2 or 4 (one GPU: scripts/gpu-tree1.sh)" | tee "$O/summary.txt"; exit 0
fi
# Bench rows: auto beside every path (paths that do not serve an op are skipped rows).
ALL=auto,kernel,ll,two-shot,lc,ce,nccl,nccl-window
BENCH=(.build/symmem bench --backend cuda --budget 50ms --progress --timeout 120s -b 1K -e 1G -f 2)
tune() { # tune SUB N OPS DTYPES T: gpu-tune.sh into O/SUB, ROUNDS=3, graph rows
  PACK=0 N=$2 OPS=$3 DTYPES=$4 T=$5 ROUNDS=3 GRAPH=20 CUDA_VISIBLE_DEVICES=$(lane_devs "$2") \
    scripts/gpu-tune.sh "$O/$1" >"$O/$1.out" 2>&1
}

case $CALL in
tree)
  W="env world2"; [ "$GPUS" -ge 4 ] && W+=" world4" || four world4
  STEPS="$W nccl" scripts/gpu-check.sh "$O/check" >"$O/check.out" 2>&1
  # world3 on 3 GPUs where there are (on 2 its ranks share them)
  CUDA_VISIBLE_DEVICES=$(lane_devs $((GPUS >= 3 ? 3 : 2))) STEPS=world3 scripts/gpu-check.sh "$O/world3" >"$O/world3.out" 2>&1
  STEPS=cestop scripts/gpu-check.sh "$O/cestop" >"$O/cestop.out" 2>&1 ;;
hosts)
  STEPS="hosts hostsdie" scripts/gpu-check.sh "$O/hosts" >"$O/hosts.out" 2>&1
  four die4 && SYMMEM_GPU_TEST_RANKS=4 step die4 200 .build/symmem.test -test.v -test.count=5 \
    -test.run '^TestGPUWorldPeerDies$' -test.timeout 190s ;;
stress)
  # Correctness only: with 4 GPUs stress2 shares GPUs 2-3 with stress4.
  S=330
  if four stress4; then
    STEPS=stress4 STRESS_SECONDS=$S scripts/gpu-check.sh "$O/s4" >"$O/s4.out" 2>&1 &
    CUDA_VISIBLE_DEVICES=2,3 STEPS=stress2 STRESS_SECONDS=$S scripts/gpu-check.sh "$O/s2" >"$O/s2.out" 2>&1 &
    wait
  else
    STEPS=stress2 STRESS_SECONDS=$S scripts/gpu-check.sh "$O/s2" >"$O/s2.out" 2>&1
  fi ;;
tune4a)
  if four "tune-ag4 tune-a2a4"; then
    tune tune-ag4 4 all_gather bfloat16 200 # all-gather rows stand for every dtype class
    tune tune-a2a4 4 all_to_all bfloat16,float 320
  fi ;;
tune4b)
  if four "tune-rs4 tune-ar4"; then
    tune tune-rs4 4 reduce_scatter bfloat16,float 260
    tune tune-ar4 4 all_reduce bfloat16,float 260
  fi ;;
tune2)
  tune tune-a2a2 2 all_to_all bfloat16,float 300 ;;
check4)
  if four "bench4-eager bench4-graph"; then
    step bench4-eager 300 "${BENCH[@]}" --nproc-per-node 4 --ops all_gather,reduce_scatter,all_reduce,all_to_all \
      -d bfloat16 --algo $ALL -J "$O/bench4-eager.json"
    step bench4-graph 240 "${BENCH[@]}" --nproc-per-node 4 --ops all_gather,reduce_scatter,all_reduce,all_to_all \
      -d bfloat16 --algo $ALL --inplace no -G 20 -J "$O/bench4-graph.json"
  fi ;;
a2a)
  CUDA_VISIBLE_DEVICES=$(lane_devs 2) step bench2-a2a 90 "${BENCH[@]}" --nproc-per-node 2 --ops all_to_all \
    -d bfloat16 --algo auto,ce,nccl -J "$O/bench2-a2a.json"
  CUDA_VISIBLE_DEVICES=$(lane_devs 2) step bench2-a2a-G 90 "${BENCH[@]}" --nproc-per-node 2 --ops all_to_all \
    -d bfloat16 --algo auto,ce,nccl -G 20 -J "$O/bench2-a2a-G.json"
  [ "$GPUS" -ge 4 ] || four full-4
  MODES=full scripts/gpu-moe.sh "$O/moe" >"$O/moe.out" 2>&1 ;;
overlap)
  [ "$GPUS" -ge 4 ] || four gpus-4
  STEPS=gpus MPS=0 scripts/gpu-overlap.sh "$O/overlap" >"$O/overlap.out" 2>&1
  four tp-4 && SIZES=4 T=200 ARGS="--layers 32 --modes nccl,torch-one-shot,torch-two-shot,symmem,symmem:ll,none" \
    scripts/gpu-tp-decode.sh "$O/tp" >"$O/tp.out" 2>&1 ;;
e2e2 | e2e4)
  n=${CALL#e2e}
  if [ "$n" = 2 ] || four "e2e-4 e2e-4-exposed"; then
    SIZES=$n T=150 ROUNDS=2 COMMS="nccl symmem symmem:all_gather=ce local" scripts/gpu-e2e.sh "$O/e2e-$n" >"$O/e2e-$n.out" 2>&1
    SIZES=$n T=120 ROUNDS=1 COMMS="nccl symmem symmem:all_gather=ce local" ARGS="--seq 1024" \
      scripts/gpu-e2e.sh "$O/e2e-$n-exposed" >"$O/e2e-$n-exposed.out" 2>&1
  fi ;;
esac

# ---- short table, last ----
autobest() { # FILE...: per op, the sizes where auto is below 0.97 of the best path
  awk 'match($0, /# auto\/best, [a-z_]+/) { op = substr($0, RSTART + 13, RLENGTH - 13) }
    /#   auto\/best / { split($0, f, "auto/best"); split(f[2], g, " "); b = g[1]; s = f[2]
      while (match(s, /(out-of-place|in-place) [0-9.]+/)) {
        split(substr(s, RSTART, RLENGTH), a, " "); n[op]++
        if (a[2] < 0.97) bad[op]++
        if (!(op in w) || a[2] < w[op]) { w[op] = a[2]; wb[op] = b " " a[1] }
        s = substr(s, RSTART + RLENGTH) } }
    END { for (o in n) printf "  %s: %d points, %d below 0.97, worst %.2f at %s\n", o, n[o], bad[o], w[o], wb[o] }' "$@"
}
{
  echo "==================== gpu-plan40 $CALL ($(date -u +%FT%TZ), $GPUS GPU(s), $(( $(date +%s) - CALL_T0 ))s of ${CALL_S}s) ===================="
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sort | uniq -c
  cat "$O/skipped.log" 2>/dev/null
  # every step of every script: name, rc, seconds
  grep -r --include='*.log' -E '^=== [^ ]+: (rc=|skipped)' "$O" 2>/dev/null | sed "s|^$O/||; s|\.log:=== [^ ]*: | |" | sort
  # test outcomes per step log, and the stress totals
  for f in $(find "$O" -name '*.log' | sort); do
    c=$(grep -h -E '^--- (FAIL|PASS|SKIP)' "$f" | sed -E 's/ \([0-9.]+s\)//' | sort | uniq -c | tr -s ' ' | tr '\n' ';')
    [ -n "$c" ] && echo "$(basename "$f" .log): $c" | cut -c1-400
  done
  grep -rh -o -E 'STRESS total.*' "$O" --include='*.log' 2>/dev/null
  case $CALL in
  tune*) for f in "$O"/tune-*/summary.txt; do [ -f "$f" ] && grep -h '^--- ' "$f"; done
    for f in "$O"/tune-*/tune-*.log; do [ -f "$f" ] && { echo "$(basename "$f" .log):"; autobest "$f"; }; done ;;
  check4 | a2a) for f in "$O"/bench*.log; do [ -f "$f" ] && { echo "$(basename "$f" .log): auto/best"; autobest "$f"; }; done ;;
  esac
  [ -f "$O/moe.out" ] && grep -E '^== |ok|FAIL|skip|refused' "$O/moe.out" | head -40
  [ -f "$O/overlap.out" ] && sed -n '/gpu-overlap summary/,$p' "$O/overlap.out" | head -50
  for f in "$O"/tp.out "$O"/e2e-*.out; do [ -f "$f" ] && { echo "--- $(basename "$f" .out)"; grep -E ' \| ' "$f" | head -20; }; done
  # FSDP2: the share of NCCL's exposed communication (its step time over local's, the ceiling) each variant removes
  for f in "$O"/e2e-*.out; do [ -f "$f" ] && awk -v n="$(basename "$f" .out)" -F' [|] ' '$3 ~ /^[0-9]+$/ && $4 ~ /^[0-9.]+$/ { t[$2] = $4 }
    END { if (("nccl" in t) && ("local" in t) && t["nccl"] > t["local"]) for (c in t) if (c != "nccl" && c != "local")
      printf "  %s: %s removes %.0f%% of the exposed comm (nccl %.1f ms, %s %.1f, local %.1f)\n", n, c,
        100 * (t["nccl"] - t[c]) / (t["nccl"] - t["local"]), t["nccl"], c, t[c], t["local"] }' "$f"; done
} >"$O/summary.txt" 2>&1
pack_logs
cat "$O/summary.txt"
exit 0
