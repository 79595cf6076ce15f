#!/usr/bin/env bash
# gpu-fsdp-diag.sh [outdir]: FSDP2 on symmem, one GPU, 2 ranks, in checked
# mode (the record exchange names the argument that differs), every
# collective's buffers logged by rank: the runs that ended in "ranks
# disagree" at a reduce-scatter before the backend ordered a group's calls
# across streams (results/gpu-2026-12-07c.md: the two ranks ran FSDP2's
# all-gather and reduce-scatter streams in opposite orders). Steps bounded
# by gpu-lib.sh's CALL_S.
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
