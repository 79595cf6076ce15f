#!/usr/bin/env bash
# build.sh: the all-reduce kernel's prefetch variant as builds of the CLI and
# the root test binary, on the build machine (Go + cgo), into
# .build/arp/<variant>/ (gzip'ed; carry .build/arp, about 18 MB):
#   base      HEAD as is
#   prefetch  HEAD with prefetch.patch (README.md)
# run.sh compares them on the GPU host. Issue 24 items 3 and 4.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$root/.build/arp"
declare -A PATCHES=([base]="" [prefetch]="prefetch")
for v in base prefetch; do
  wt=$(mktemp -d)
  git -C "$root" worktree add -q --detach "$wt" HEAD
  for p in ${PATCHES[$v]}; do git -C "$wt" apply "$here/$p.patch"; done
  mkdir -p "$out/$v"
  (cd "$wt" && go test ./internal/backend/cuda/... >/dev/null && # the generated PTX matches its generator
    CGO_ENABLED=1 go build -ldflags="-s -w" -o "$out/$v/symmem" ./cmd/symmem &&
    CGO_ENABLED=1 go test -c -ldflags="-s -w" -o "$out/$v/symmem.test" .)
  git -C "$root" worktree remove --force "$wt"
  gzip -9 -f "$out/$v/symmem" "$out/$v/symmem.test"
done
ls -l "$out"/*/
