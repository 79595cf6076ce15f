#!/usr/bin/env bash
# build.sh [variant...]: builds of the CLI and the root test binary on the
# build machine (Go + cgo), one per variant, into .build/kv/<variant>/
# (gzip'ed, about 9 MB each; carry .build/kv, ~45 MB):
#   base         HEAD as is
#   ar-prefetch  HEAD with ar-prefetch.patch
#   ll-t512      HEAD with ll-t512.patch
#   ll-rows      HEAD with ll-rows.patch
#   stamps       HEAD with stamps.patch (instrumentation, README.md)
# (default: all five). Each patched tree must pass the cuda package's
# tests (the generated PTX is its generator's output, goldens updated)
# before it is built. run.sh compares them on the GPU host (README.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$root/.build/kv"
for v in "${@:-base ar-prefetch ll-t512 ll-rows stamps}"; do
  for v1 in $v; do
    wt=$(mktemp -d)
    git -C "$root" worktree add -q --detach "$wt" HEAD
    [ "$v1" = base ] || git -C "$wt" apply "$here/$v1.patch"
    mkdir -p "$out/$v1"
    (cd "$wt" && go test ./internal/backend/cuda/... >/dev/null &&
      CGO_ENABLED=1 go build -ldflags="-s -w" -o "$out/$v1/symmem" ./cmd/symmem &&
      CGO_ENABLED=1 go test -c -ldflags="-s -w" -o "$out/$v1/symmem.test" .)
    git -C "$root" worktree remove --force "$wt"
    gzip -9 -f "$out/$v1/symmem" "$out/$v1/symmem.test"
  done
done
ls -l "$out"/*/
