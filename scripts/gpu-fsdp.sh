#!/usr/bin/env bash
# gpu-fsdp.sh: symmem.fsdp (FSDP2's custom all-gather / reduce-scatter on
# symmem, issue 26 item 1) with torch >= 2.11 on the GPU host. Build first on
# the build machine (no Go toolchain on GPU hosts):
#
#   CGO_ENABLED=1 go build -buildmode=c-shared -o .build/libsymmem.so ./cmd/libsymmem
#   CGO_ENABLED=1 go build -o .build/symmem ./cmd/symmem
#
# (scripts/build-gpu.sh builds these with the rest), then run
# `scripts/gpu-fsdp.sh [outdir]` there with the torch venv's python3 (and
# torchrun) first in PATH. Logs go to outdir ($OUT, else ./gpu-fsdp-out); a
# short table is printed last.
#
# Steps:
#   api        the torch facts symmem.fsdp relies on, printed from this torch:
#              version, AllGather / ReduceScatter (abstract methods, __call__
#              signatures), FSDPModule.set_custom_*, the MRO of symmem's
#              classes. Success: rc 0.
#   unit       python/tests/test_fsdp.py (faketorch; torch present is fine).
#   fp32       examples/python/fsdp2_symmem.py --probe, 2 ranks (torchrun with
#              NCCL where there are 2+ GPUs, else `symmem launch` with
#              SYMMEM_SHARE_DEVICE=1 and gloo): float32, auto's paths.
#              Success: rc 0, "ok" from every rank (update error vs the
#              unsharded run within 1e-3), and the probe lines: every
#              all_gather_into_tensor / reduce_scatter_tensor call counted,
#              none on the default stream (FSDP calls them on its own
#              streams).
#   bf16       the same with --bf16 (bfloat16 all-gathers, float32 AVG
#              reduce-scatters; tolerance 5e-2).
#   algo-A     the same, fp32, with --algo A for each path of ALGOS
#              (default "kernel all_gather=ce": copy engines serve only
#              all-gathers, so their step names the op); a path the backend
#              refuses fails the run with its reason.
set -u
OUTDIR=${1:-${OUT:-./gpu-fsdp-out}}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
. scripts/gpu-lib.sh # the torch venv, its NCCL for symmem too, multicast off, step
use_libsymmem
torch_env >"$OUTDIR/env.log" 2>&1
EX=examples/python/fsdp2_symmem.py
if [ "${GPUS:-0}" -ge 2 ] && command -v torchrun >/dev/null; then
  RUN2=(torchrun --standalone --nproc-per-node 2 "$EX")
else
  RUN2=(env SYMMEM_SHARE_DEVICE=1 .build/symmem launch -n 2 python3 "$EX")
fi
step api 120 python3 - <<'EOF'
import inspect, torch
from torch.distributed.fsdp import FSDPModule
from torch.distributed.fsdp._fully_shard import _fsdp_api as api
print("torch", torch.__version__)
for c in (api.AllGather, api.ReduceScatter):
    print(c.__name__, "bases", [b.__name__ for b in c.__mro__], "abstract", sorted(getattr(c, "__abstractmethods__", ())))
    print("  __call__", inspect.signature(c.__call__), " allocate", inspect.signature(c.allocate))
for m in ("set_custom_all_gather", "set_custom_reduce_scatter", "set_force_sum_reduction_for_comms"):
    print("FSDPModule." + m, inspect.signature(getattr(FSDPModule, m)))
import symmem.fsdp as f
print("symmem", [c.__name__ for c in f.SymmemAllGather.__mro__], [c.__name__ for c in f.SymmemReduceScatter.__mro__])
EOF
step unit 120 python3 python/tests/test_fsdp.py -v
step fp32 300 "${RUN2[@]}" --probe
step bf16 300 "${RUN2[@]}" --probe --bf16
for a in ${ALGOS:-kernel all_gather=ce}; do step "algo-$a" 300 "${RUN2[@]}" --probe --algo "$a"; done

echo
printf '%-12s %-4s %s\n' step rc "ok / FAILED lines"
for s in "${ORDER[@]}"; do
  f="$OUTDIR/$s.log"
  printf '%-12s %-4s %s / %s\n' "$s" "${RC[$s]}" "$(grep -c ' ok$' "$f" 2>/dev/null)" "$(grep -c 'FAILED' "$f" 2>/dev/null)"
done
echo
grep -h "calls on\|FSDP modules on symmem" "$OUTDIR"/fp32.log "$OUTDIR"/bf16.log 2>/dev/null | sed 's/^\[rank [0-9]*\] //'
