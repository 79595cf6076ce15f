#!/usr/bin/env bash
# Call 2 (tree at 0baf0ec): why FSDP2 on symmem fails on one H100 with 2
# ranks (call 1: bf16 and --algo kernel end in "ranks disagree" at a
# reduce-scatter): the same runs in checked mode (the record exchange names
# the differing argument) with every reduce-scatter's buffers logged.
set -u
cd "$(dirname "$0")/../../.."
. scripts/gpu-lib.sh
use_libsymmem
O=$OUT; mkdir -p $O
cat > /tmp/diag.py <<'PY'
import os, sys, runpy, torch, symmem
from symmem import _ops
symmem.init(checked=os.environ.get("DIAG_CHECKED") == "1")
rank = int(os.environ["RANK"])
for name in ("all_gather_into_tensor", "reduce_scatter_tensor"):
    f = getattr(_ops, name)
    def wrap(*a, _f=f, _n=name, **kw):
        o, i = a[0], a[1]
        print(f"DIAG rank {rank} {_n} out {o.data_ptr():#x} {o.numel()} {o.dtype} in {i.data_ptr():#x} {i.numel()} {i.dtype} "
              f"algo {kw.get('algo')}", flush=True)
        return _f(*a, **kw)
    setattr(_ops, name, wrap)
sys.argv = ["fsdp2_symmem.py"] + sys.argv[1:]
runpy.run_path("examples/python/fsdp2_symmem.py", run_name="__main__")
PY
for c in 1 0; do
  for a in "--bf16" "--algo kernel"; do
    n=$(echo "c$c $a" | tr -d ' -')
    echo "=== $n" >> $O/diag.log
    DIAG_CHECKED=$c SYMMEM_SHARE_DEVICE=1 timeout 120 .build/symmem launch -n 2 python3 /tmp/diag.py --probe $a >> $O/diag.log 2>&1
    echo "=== $n rc=$?" >> $O/diag.log
  done
done
grep -E "^=== |Error|differ" $O/diag.log | cut -c1-600
