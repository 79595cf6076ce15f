#!/usr/bin/env bash
# gpu-wheel.sh: the wheel installed like a Python package on the GPU host
# (issue 26 item 4): no Go toolchain, no `symmem` binary, no SYMMEM_LIBRARY
# or PYTHONPATH. Build the wheel first on the build machine:
#
#   python3 python/build_wheel.py        # dist/symmem-<version>-py3-none-manylinux_2_XX_x86_64.whl
#
# carry the checkout with dist/ (and .build/symmem, for the optional
# launcher step) to the GPU host, and run there
#
#   scripts/gpu-wheel.sh [outdir]
#
# PY: the Python to build the venv from (default /opt/torch/.venv/bin/python3,
# else python3); WHEEL: the wheel (default the newest dist/symmem-*.whl).
# Logs go to outdir ($OUT, else ./gpu-wheel-out); a short table is printed
# last.
#
# Steps:
#   venv        a fresh venv (outdir/venv) with --system-site-packages; when
#               PY is itself a venv (the torch venv is), whose packages
#               --system-site-packages does not reach, a .pth file adds that
#               venv's site-packages after the new venv's own, so torch is
#               visible and symmem comes from the new venv.
#   install     pip install --no-index --no-deps the wheel (the venv's pip; without
#               ensurepip, PY's pip with --python, else uv pip).
#   import      from outdir: import symmem and torch; symmem's package and
#               libsymmem.so must be the venv's. Success: "import ok".
#   doctor      python -m symmem doctor (world of one, backend auto): JSON
#               with package, library, why and detail (driver, device, NCCL).
#               Success: rc 0 and "backend": "cuda".
#   doctor-cpu  the same with --backend cpu.
#   torchrun-doctor  python -m torch.distributed.run --standalone
#               --nproc-per-node 1 -m symmem doctor: the job from torchrun's
#               variables. Success: rc 0, "world_from": "the job's ...".
#   checks-n1   python/tests/gpu_torch.py checks under torchrun, 1 rank, with
#               the installed package (every CHECK ok or refused).
#   checks-n2   the same, 2 ranks on one GPU (SYMMEM_SHARE_DEVICE=1).
#   launch-n2   (only with .build/symmem) the same under `symmem launch -n 2`,
#               as scripts/gpu-python.sh runs it.
set -u
OUTDIR=${1:-${OUT:-./gpu-wheel-out}}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
cd "$(dirname "$0")/.."
REPO=$PWD
unset SYMMEM_LIBRARY PYTHONPATH PYTHONHOME VIRTUAL_ENV
if [ -z "${PY:-}" ]; then
  PY=$(command -v python3)
  [ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
fi
WHEEL=${WHEEL:-$(ls -t "$REPO"/dist/symmem-*.whl 2>/dev/null | head -1)}
[ -n "$WHEEL" ] && [ -e "$WHEEL" ] || { echo "no wheel: run python3 python/build_wheel.py on the build machine and carry dist/"; exit 2; }
VENV=$OUTDIR/venv
VP=$VENV/bin/python
# The torch venv, its NCCL for symmem too, multicast off, step; the steps
# run in OUTDIR, away from the repo's python/ (every path below is
# absolute), so `import symmem` finds the installed package only.
. "$REPO/scripts/gpu-lib.sh"
cd "$OUTDIR"
{
  date -u; uname -a; ldd --version | head -1
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  echo "PY=$PY"; "$PY" -c 'import sys, torch; print(sys.version, "torch", torch.__version__, "cuda", torch.version.cuda)'
  echo "WHEEL=$WHEEL"; ls -l "$WHEEL"; sha256sum "$WHEEL"
} >"$OUTDIR/env.log" 2>&1

step venv 180 bash -c '
  rm -rf "$1"
  if ! "$2" -m venv --system-site-packages "$1"; then
    echo "venv with pip failed (no ensurepip?): a venv without pip; install uses another pip"
    rm -rf "$1" && "$2" -m venv --system-site-packages --without-pip "$1" || exit
  fi
  parent=$("$2" -c "import site, sys; print(site.getsitepackages()[0] if sys.prefix != sys.base_prefix else \"\")") || exit
  if [ -n "$parent" ]; then
    mine=$("$1/bin/python" -c "import sysconfig; print(sysconfig.get_paths()[\"purelib\"])") || exit
    echo "$parent" >"$mine/_symmem_parent_venv.pth"; echo "added $parent to $mine through _symmem_parent_venv.pth"
  fi' venv "$VENV" "$PY"
# pip: the venv's own; else PY's pip aimed at the venv (pip >= 22.3); else uv's.
step install 180 bash -c '
  if "$1" -m pip --version; then "$1" -m pip install --no-index --no-deps --disable-pip-version-check "$3"
  elif "$2" -m pip --version; then "$2" -m pip --python "$1" install --no-index --no-deps --disable-pip-version-check "$3"
  elif command -v uv; then uv pip install --python "$1" --no-index --no-deps "$3"
  else echo "no pip in the venv or in $2, and no uv"; exit 2; fi' install "$VP" "$PY" "$WHEEL"
step import 60 "$VP" -c '
import os, sys, symmem
from symmem import _lib
venv = os.path.realpath(sys.prefix)
print("symmem", symmem.__version__, symmem.__file__, "library", _lib.path, "ABI", _lib.lib.symmem_abi_version())
assert os.path.realpath(symmem.__file__).startswith(venv + os.sep), "symmem is not the venv one"
assert os.path.realpath(_lib.path) == os.path.join(os.path.dirname(os.path.realpath(symmem.__file__)), "libsymmem.so"), "not the wheel library"
import torch
print("torch", torch.__version__, torch.__file__, "cuda available", torch.cuda.is_available())
print("import ok")'
step doctor 120 "$VP" -m symmem doctor
step doctor-cpu 120 "$VP" -m symmem doctor --backend cpu
step torchrun-doctor 180 "$VP" -m torch.distributed.run --standalone --nproc-per-node 1 -m symmem doctor
T=$REPO/python/tests/gpu_torch.py
step checks-n1 ${T_CHECKS:-400} "$VP" -m torch.distributed.run --standalone --nproc-per-node 1 "$T" checks
SYMMEM_SHARE_DEVICE=1 step checks-n2 ${T_CHECKS:-500} "$VP" -m torch.distributed.run --standalone --nproc-per-node 2 "$T" checks
if [ -x "$REPO/.build/symmem" ]; then
  SYMMEM_SHARE_DEVICE=1 step launch-n2 ${T_CHECKS:-500} "$REPO/.build/symmem" launch -n 2 "$VP" "$T" checks
fi

echo
echo "step            rc   notes"
for s in "${ORDER[@]}"; do
  f="$OUTDIR/$s.log"
  case $s in
    import) n="$(grep -c '^import ok' "$f") ok; $(grep -m1 '^symmem ' "$f" | cut -c1-120)" ;;
    doctor|doctor-cpu) n="backend $(grep -o '"backend": "[a-z]*"' "$f" | head -1 | cut -d'"' -f4), library $(grep -o '"library": "[^"]*"' "$f" | head -1 | cut -d'"' -f4)" ;;
    torchrun-doctor) n="$(grep -o '"world_from": "[^"]*"' "$f" | head -1 | cut -d'"' -f4); backend $(grep -o '"backend": "[a-z]*"' "$f" | head -1 | cut -d'"' -f4)" ;;
    checks-*|launch-*) n="checks ok $(grep -c 'CHECK .* ok' "$f") / FAIL $(grep -c 'CHECK .* FAIL' "$f") / refused $(grep -c 'CHECK .* refused' "$f")" ;;
    *) n=$(tail -2 "$f" | head -1 | cut -c1-100) ;;
  esac
  printf "%-15s %-4s %s\n" "$s" "${RC[$s]:-?}" "$n"
done
echo
grep -h '"why"' "$OUTDIR/doctor.log" 2>/dev/null | cut -c1-300
grep -ho 'cuda: [^\\]*' "$OUTDIR/doctor.log" 2>/dev/null | head -8 | cut -c1-300
grep -h "FAIL" "$OUTDIR"/checks-*.log "$OUTDIR"/launch-*.log 2>/dev/null | head -20
