#!/usr/bin/env bash
# gpu-fsdp-diag.sh [outdir]: why FSDP2 on symmem fails on one GPU with 2
# ranks (results/gpu-2026-12-07.md: --bf16 and --algo kernel end in "ranks
# disagree" at a reduce-scatter): the same runs in checked mode (the
# record exchange names the argument that differs), every collective's
# buffers logged by rank. Steps bounded by gpu-lib.sh's CALL_S.
set -u
OUTDIR=${1:-${OUT:-./gpu-fsdp-diag-out}}; mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
. scripts/gpu-lib.sh
use_libsymmem
cat > "$OUTDIR/diag.py" <<'PY'
import os, sys, runpy, symmem
from symmem import _ops
symmem.init(checked=True)
rank = int(os.environ["RANK"])
for name in ("all_gather_into_tensor", "reduce_scatter_tensor"):
    f = getattr(_ops, name)
    def wrap(*a, _f=f, _n=name, **kw):
        o, i = a[0], a[1]
        print(f"DIAG rank {rank} {_n} out {o.data_ptr():#x} {o.numel()} {o.dtype} "
              f"in {i.data_ptr():#x} {i.numel()} {i.dtype} algo {kw.get('algo')}", flush=True)
        return _f(*a, **kw)
    setattr(_ops, name, wrap)
sys.argv = ["fsdp2_symmem.py"] + sys.argv[1:]
runpy.run_path("examples/python/fsdp2_symmem.py", run_name="__main__")
PY
for a in "--bf16" "--algo kernel"; do
  n=$(echo "$a" | tr -d ' -')
  SYMMEM_SHARE_DEVICE=1 step "diag-$n" 100 .build/symmem launch -n 2 python3 "$OUTDIR/diag.py" --probe $a
  mv "$OUTDIR/diag-$n.log" "$OUTDIR/$n.log"
  grep -h -o -E "(differ|MismatchError|ranks disagree).{0,400}" "$OUTDIR/$n.log" | head -3
done
