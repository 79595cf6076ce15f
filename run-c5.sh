#!/usr/bin/env bash
# session g call 5 (2 GPUs): symmem tune for float32 reductions (auto's 32-bit class had only seeds:
# auto took the kernel at 11 us where ll takes 4.5), small with graphs and large.
export OUT
NAME=h100x2-small N=2 DTYPES=float32 OPS="reduce_scatter all_reduce" MIN=1K MAX=2M F=2 ROUNDS=2 GRAPH=20 GRAPH_MAX=2M T=120 \
  scripts/gpu-tune.sh $OUT/tune 2>&1 | grep -E "rc=" 
NAME=h100x2 N=2 DTYPES=float32 OPS="reduce_scatter all_reduce" MIN=4M MAX=1G F=4 ROUNDS=2 T=200 \
  scripts/gpu-tune.sh $OUT/tune 2>&1 | grep -E "rc="
cd $OUT/tune && mkdir -p ../rest && mv *.log $(ls *.json | grep -v bench.json) ../rest/ && tar czf ../tune-rest.tgz -C .. rest && rm -rf ../rest && ls
