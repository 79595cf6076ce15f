#!/usr/bin/env bash
# gpu-ab-paths.sh [outdir] [rounds]: gpu-ab.sh over every GPU path of every
# op (bf16, out-of-place busbw, SIZES: default 1K..256M by 16x), the two
# builds in BUILDS alternated in one run: "nothing got slower" for a change
# to a GPU path. ll's rows above its area (240 KiB per rank on 2 ranks) are
# refused rows; a build without ll fails its ll runs (rc in the log, no A
# column for them). Same environment as gpu-ab.sh (BUILDS, RANKS).
set -u
S=${SIZES:-"-b 1K -e 256M -f 16"}
B=""
for p in auto kernel ll ce nccl nccl-window; do B+="--ops all_gather -d bfloat16 --algo $p $S;"; done
for p in auto kernel ll lc nccl nccl-window; do B+="--ops reduce_scatter -d bfloat16 --algo $p $S;"; done
for p in auto kernel ll two-shot lc nccl nccl-window; do B+="--ops all_reduce -d bfloat16 --algo $p $S;"; done
BENCHES=${B%;} exec "$(dirname "$0")/gpu-ab.sh" "$@"
