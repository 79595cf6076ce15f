#!/usr/bin/env bash
# build.sh: the ll kernel's variants as builds of the CLI and the root test
# binary, on the build machine (Go + cgo), into .build/llv/<variant>/
# (gzip'ed; carry .build/llv):
#   base      HEAD as is
#   prefetch  HEAD with prefetch.patch: each thread's first input vector is
#             loaded before thread 0 reads the launch word (the two global
#             loads overlap instead of following each other)
# run.sh compares them on the GPU host. Issue 25: ll's time in CUDA graphs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$root/.build/llv"
declare -A PATCHES=([base]="" [prefetch]="prefetch")
for v in base prefetch; do
  wt=$(mktemp -d)
  git -C "$root" worktree add -q --detach "$wt" HEAD
  for p in ${PATCHES[$v]}; do git -C "$wt" apply "$here/$p.patch"; done
  mkdir -p "$out/$v"
  (cd "$wt" && CGO_ENABLED=1 go build -ldflags="-s -w" -o "$out/$v/symmem" ./cmd/symmem &&
    CGO_ENABLED=1 go test -c -ldflags="-s -w" -o "$out/$v/symmem.test" .)
  git -C "$root" worktree remove --force "$wt"
  gzip -9 -f "$out/$v/symmem" "$out/$v/symmem.test"
done
ls -l "$out"/*/
