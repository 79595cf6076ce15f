#!/usr/bin/env bash
# build.sh: the copy-engine all-gather's variants as CLI builds, on the build
# machine (Go + cgo), into .build/cev/<variant>/symmem.gz (carry .build/cev;
# compressed: four builds would not fit the device tool's 64 MiB):
#   push             HEAD as is: push into the peers' outputs, one stream per peer
#   sequential       push, every transfer on the call's stream in turn
#   pull             every rank reads its peers' slices, one stream per peer
#   pull-sequential  pull, in turn on one stream (what PyTorch's
#                    _low_contention_all_gather does)
# Each is HEAD with the patches in this folder (pull.patch, sequential.patch);
# run.sh compares them on the GPU host. Issue 24 item 2: why the copy-engine
# all-gather reaches 223 GB/s on 4 H100 and 382 on 2.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$root/.build/cev"
declare -A PATCHES=([push]="" [sequential]="sequential" [pull]="pull" [pull-sequential]="pull sequential")
for v in push sequential pull pull-sequential; do
  wt=$(mktemp -d)
  git -C "$root" worktree add -q --detach "$wt" HEAD
  for p in ${PATCHES[$v]}; do git -C "$wt" apply "$here/$p.patch"; done
  mkdir -p "$out/$v"
  (cd "$wt" && CGO_ENABLED=1 go build -ldflags="-s -w" -o "$out/$v/symmem" ./cmd/symmem)
  git -C "$root" worktree remove --force "$wt"
  gzip -9 -f "$out/$v/symmem"
done
ls -l "$out"/*/symmem.gz
