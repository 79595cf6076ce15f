#!/usr/bin/env bash
# gpu-kernel-tune.sh: the all-gather kernel on 4 GPUs (correctness, graph
# capture), its CTA count on 4 and 2 ranks, and a 4-rank bench against NCCL
# windows. Build as for gpu-scale.sh; logs go to $OUT.
export NCCL_NVLS_ENABLE=0; for f in /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2; do export SYMMEM_NCCL_LIB=$f; done
O=$OUT; L=".build/symmem launch -n 4 -timeout"
timeout 150 $L 140s -- .build/cuda-backend.test -test.v -test.count=1 -test.timeout 135s -test.run '^TestGPU(AllGatherCorrect|GraphCapture)$' > $O/correct4.log 2>&1; echo correct4 rc=$?
SYMMEM_TUNE_VARIANTS=kernel-4,kernel-8,kernel-16,kernel-32,kernel-64 SYMMEM_TUNE_SIZES=64K,256K,1M,4M,16M,64M timeout 120 $L 110s -- .build/cuda-backend.test -test.v -test.count=1 -test.timeout 100s -test.run '^TestGPUCETune$' > $O/tune4.log 2>&1; echo tune4 rc=$?
SYMMEM_TUNE_VARIANTS=kernel-4,kernel-8,kernel-16,kernel-32,kernel-64 SYMMEM_TUNE_SIZES=64K,256K,1M,4M,16M,64M timeout 120 .build/symmem launch -n 2 -timeout 110s -- .build/cuda-backend.test -test.v -test.count=1 -test.timeout 100s -test.run '^TestGPUCETune$' > $O/tune2.log 2>&1; echo tune2 rc=$?
B=".build/symmem bench -backend cuda -dtype bfloat16 -b 64K -e 64M -f 4 -budget 100ms -timeout 30s -ops all_gather"
timeout 100 $L 90s -- $B -algo nccl-window,kernel,auto > $O/ag4.log 2>&1; echo ag4 rc=$?
grep -h "CORRECTNESS\|GRAPH\|FAIL" $O/correct4.log | head -20
grep -h "CETUNE" $O/tune4.log $O/tune2.log | grep -v variant | sed 's/^\[rank 0\] //' | awk '{print $2, $3, $4, $5, $9}' | paste - - | column -t
grep -E '^\[rank 0\] +[0-9]+ ' $O/ag4.log | sed 's/^\[rank 0\] //' | awk '{print $1, $6, $10, $NF}' | column -t
