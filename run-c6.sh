#!/usr/bin/env bash
# session g call 6 (2 GPUs): the float32 table in force: every path and auto side by side, small eager+graphs, large eager.
export OUT
. scripts/gpu-lib.sh
OUTDIR=$OUT
B=".build/symmem bench --backend cuda --nproc-per-node 2 --ops reduce_scatter,all_reduce -d float32 --inplace no --rounds 2"
step f32-eager 200 $B --algo ll,nccl-window,nccl,kernel,auto -b 1K -e 1M -f 4 -J $OUT/f32-eager.json
step f32-graph 200 $B --algo ll,nccl-window,nccl,kernel,auto -b 1K -e 1M -f 4 -G 20 -J $OUT/f32-graph.json
step f32-large 300 $B --algo nccl-window,nccl,kernel,auto -b 4M -e 1G -f 4 -J $OUT/f32-large.json
python3 scripts/bench-side.py --ref auto $OUT/f32-eager.json $OUT/f32-graph.json $OUT/f32-large.json > $OUT/f32-side-auto.txt 2>&1
cut -c1-130 $OUT/f32-side-auto.txt
