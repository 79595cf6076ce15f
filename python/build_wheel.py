#!/usr/bin/env python3
"""Builds the symmem wheel: the Python package with libsymmem.so inside.

    python3 python/build_wheel.py [--out DIR] [--go GO] [--library SO]

from anywhere in the repository (it finds the root from its own path). It
runs

    go build -trimpath -ldflags "-s -w" -buildmode=c-shared ./cmd/libsymmem

into a temporary directory (CGO_ENABLED=1, GOPROXY=off, GOTOOLCHAIN=local:
it never downloads; the module cache must hold the dependencies), and writes
DIR/symmem-<version>-py3-none-<platform>.whl (DIR: dist/ in the repository
root) with the package's .py files, the library as symmem/libsymmem.so and
the .dist-info (METADATA, WHEEL, RECORD with sha256 hashes), per the binary
distribution format (packaging.python.org, "Binary distribution format").
The last line printed is the wheel's path.

The version is __version__ in python/symmem/__init__.py (the one place).
The platform tag is manylinux_<major>_<minor>_<arch>: the highest GLIBC_x.y
symbol version the library needs, read from its ELF .gnu.version_r section,
and the ELF machine. pip installs it where glibc is at least that version.
A library needing a shared library outside the manylinux policy's list
stops the build (give --plat to tag it anyway). --library packages an
already built library instead of building one.

Standard library only; Python 3.8 or later.
"""

import argparse
import base64
import csv
import hashlib
import io
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "python", "symmem")
NAME = "symmem"
SUMMARY = "Symmetric-memory collectives (all-gather, reduce-scatter, all-reduce, broadcast) for CPU and CUDA over ctypes"
REQUIRES_PYTHON = ">=3.8"
LIBRARY = "libsymmem.so"

# Shared libraries a manylinux wheel may need from the system (PEP 600:
# the manylinux2014 policy's list, which later manylinux_x_y policies keep).
SYSTEM_LIBS = {
    "libc.so.6", "libpthread.so.0", "libdl.so.2", "libm.so.6", "librt.so.1", "libutil.so.1", "libnsl.so.1",
    "libcrypt.so.1", "libgcc_s.so.1", "libstdc++.so.6", "libresolv.so.2",
    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "ld64.so.2", "ld64.so.1", "ld-linux.so.2",
    "libX11.so.6", "libXext.so.6", "libXrender.so.1", "libICE.so.6", "libSM.so.6", "libGL.so.1",
    "libgobject-2.0.so.0", "libgthread-2.0.so.0", "libglib-2.0.so.0",
}

# ELF e_machine -> the platform tag's architecture.
MACHINES = {62: "x86_64", 183: "aarch64", 3: "i686", 21: "ppc64", 22: "s390x", 243: "riscv64"}

# PEP 440 public version, optionally with a local label.
VERSION_RE = re.compile(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[a-z0-9]+(\.[a-z0-9]+)*)?$")


def version():
    """__version__ from python/symmem/__init__.py."""
    with open(os.path.join(PKG, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__\s*=\s*["\']([^"\']+)["\']', f.read(), re.M)
    if not m:
        sys.exit(f"build_wheel: no __version__ = \"...\" in {os.path.join(PKG, '__init__.py')}")
    v = m.group(1)
    if not VERSION_RE.match(v):
        sys.exit(f"build_wheel: __version__ {v!r} is not a normalized PEP 440 version")
    return v


def build_library(go, out):
    """go build -buildmode=c-shared of ./cmd/libsymmem into out."""
    env = dict(os.environ, CGO_ENABLED="1", GOPROXY="off", GOTOOLCHAIN="local")
    cmd = [go, "build", "-trimpath", "-ldflags", "-s -w", "-buildmode=c-shared", "-o", out, "./cmd/libsymmem"]
    print("build_wheel:", shlex.join(cmd), file=sys.stderr)
    # go's messages are shown as they come (a cold build takes a while) and
    # kept, to recognise a missing dependency below.
    lines = []
    with subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True) as p:
        for line in p.stderr:
            sys.stderr.write(line)
            lines.append(line)
    r = subprocess.CompletedProcess(cmd, p.returncode, stderr="".join(lines))
    if r.returncode != 0:
        # GOPROXY=off (the build must not fetch): a module cache without
        # symmem's dependencies fails in a second, naming only a file.
        if any(s in r.stderr for s in MISSING_MODULES):
            sys.exit(f"build_wheel: go build failed (exit {r.returncode}): Go's module cache "
                     f"({go_env(go, 'GOMODCACHE') or '$GOMODCACHE'}) lacks symmem's dependencies, and this build "
                     f"does not download (GOPROXY=off). Run `go mod download` in {ROOT} (with network "
                     f"access, once), then run build_wheel again.")
        sys.exit(f"build_wheel: go build failed (exit {r.returncode})")


# What go build says when a dependency is not in the module cache.
MISSING_MODULES = ("module lookup disabled by GOPROXY=off", "missing go.sum entry",
                   "no required module provides package", "cannot find module providing package")


def go_env(go, name):
    """go env NAME, or "" where it cannot be read."""
    try:
        return subprocess.run([go, "env", name], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


class ELF:
    """The parts of an ELF shared object a platform tag needs: machine,
    DT_NEEDED libraries and versions needed from each (.gnu.version_r)."""

    SHT_DYNAMIC, SHT_GNU_VERNEED = 6, 0x6FFFFFFE
    DT_NULL, DT_NEEDED = 0, 1

    def __init__(self, data):
        if data[:4] != b"\x7fELF":
            raise ValueError("not an ELF file")
        cls, enc = data[4], data[5]
        if cls not in (1, 2) or enc not in (1, 2):
            raise ValueError(f"unknown ELF class {cls} or encoding {enc}")
        self.is64, e = cls == 2, "<" if enc == 1 else ">"
        self.data, self.e = data, e
        if self.is64:
            (self.machine,) = struct.unpack_from(e + "H", data, 18)
            shoff, = struct.unpack_from(e + "Q", data, 40)
            shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", data, 58)
        else:
            (self.machine,) = struct.unpack_from(e + "H", data, 18)
            shoff, = struct.unpack_from(e + "I", data, 32)
            shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", data, 46)
        self.little = enc == 1
        self.sections = []
        for i in range(shnum):
            off = shoff + i * shentsize
            if self.is64:
                name, typ, _, _, offset, size, link, _, _, entsize = struct.unpack_from(e + "IIQQQQIIQQ", data, off)
            else:
                name, typ, _, _, offset, size, link, _, _, entsize = struct.unpack_from(e + "IIIIIIIIII", data, off)
            self.sections.append((typ, offset, size, link, entsize))

    def _str(self, section, off):
        base = self.sections[section][1] + off
        end = self.data.index(b"\0", base)
        return self.data[base:end].decode()

    def needed(self):
        """DT_NEEDED entries of the dynamic section."""
        out = []
        for typ, offset, size, link, _ in self.sections:
            if typ != self.SHT_DYNAMIC:
                continue
            fmt, step = (self.e + "qQ", 16) if self.is64 else (self.e + "iI", 8)
            for off in range(offset, offset + size, step):
                tag, val = struct.unpack_from(fmt, self.data, off)
                if tag == self.DT_NULL:
                    break
                if tag == self.DT_NEEDED:
                    out.append(self._str(link, val))
        return out

    def version_needs(self):
        """{library file: [version names]} from .gnu.version_r (Elf_Verneed
        and Elf_Vernaux entries, the same layout in ELF32 and ELF64)."""
        out = {}
        for typ, offset, size, link, _ in self.sections:
            if typ != self.SHT_GNU_VERNEED:
                continue
            off = offset
            while True:
                _, cnt, file_, aux, nxt = struct.unpack_from(self.e + "HHIII", self.data, off)
                names = out.setdefault(self._str(link, file_), [])
                a = off + aux
                for _ in range(cnt):
                    _, _, _, name, anext = struct.unpack_from(self.e + "IHHII", self.data, a)
                    names.append(self._str(link, name))
                    if not anext:
                        break
                    a += anext
                if not nxt:
                    break
                off += nxt
        return out


def glibc_versions_objdump(path):
    """GLIBC_x.y versions in `objdump -T` (a cross-check; None without objdump)."""
    objdump = shutil.which("objdump")
    if not objdump:
        return None
    r = subprocess.run([objdump, "-T", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if r.returncode != 0:
        return None
    return set(re.findall(r"\bGLIBC_(\d+(?:\.\d+)+)\b", r.stdout))


def vkey(v):
    return tuple(int(x) for x in v.split("."))


def platform_tag(path):
    """manylinux_<maj>_<min>_<arch> for the library at path, and a line
    saying why."""
    with open(path, "rb") as f:
        elf = ELF(f.read())
    arch = MACHINES.get(elf.machine)
    if arch == "ppc64" and elf.little:
        arch = "ppc64le"
    if arch is None:
        sys.exit(f"build_wheel: {path}: ELF machine {elf.machine} has no known platform tag (give --plat)")
    outside = [n for n in elf.needed() if n not in SYSTEM_LIBS]
    if outside:
        sys.exit(f"build_wheel: {path} needs {', '.join(outside)}, outside the manylinux list of system "
                 f"libraries: a manylinux tag would be false (give --plat linux_{arch} to tag it anyway)")
    glibc = set()
    for names in elf.version_needs().values():
        glibc.update(n[len("GLIBC_"):] for n in names if re.fullmatch(r"GLIBC_\d+(\.\d+)+", n))
    other = glibc_versions_objdump(path)
    if other is not None and max(other | {"0"}, key=vkey) != max(glibc | {"0"}, key=vkey):
        sys.exit(f"build_wheel: the ELF reader found GLIBC versions {sorted(glibc, key=vkey)}, objdump -T "
                 f"{sorted(other, key=vkey)}: their highest differ")
    # manylinux_2_17 (manylinux2014) is the oldest tag pip's glibc check
    # starts from for x86_64; a library needing less still gets it.
    top = max(glibc | {"2.17"}, key=vkey)
    major, minor = vkey(top)[:2]
    why = (f"highest GLIBC symbol version needed: {max(glibc, key=vkey) if glibc else 'none'} "
           f"(all: {', '.join(sorted(glibc, key=vkey))}); needed libraries: {', '.join(elf.needed())}")
    return f"manylinux_{major}_{minor}_{arch}", why


def record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def metadata(ver):
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {ver}\nSummary: {SUMMARY}\n"
            f"Requires-Python: {REQUIRES_PYTHON}\nDescription-Content-Type: text/markdown\n\n"
            "symmem for Python: symmetric-memory collectives over ctypes, with the library\n"
            "(libsymmem.so, built from the Go sources with `go build -buildmode=c-shared`)\n"
            "inside the package. torch is optional. Check an install with\n"
            "`python -m symmem doctor`.\n")


def wheel_file(tag):
    return (f"Wheel-Version: 1.0\nGenerator: symmem python/build_wheel.py\nRoot-Is-Purelib: false\n"
            f"Tag: {tag}\n")


def package_files():
    """(archive name, path) of the package's .py files (not __pycache__ or
    a library built into the source tree)."""
    out = []
    for dirpath, dirs, files in os.walk(PKG):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                p = os.path.join(dirpath, f)
                out.append((NAME + "/" + os.path.relpath(p, PKG).replace(os.sep, "/"), p))
    return out


def write_wheel(path, entries, dist_info):
    """entries: (archive name, bytes, mode); RECORD is written last."""
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))  # 1980-01-01: zip's earliest
    stamp = time.gmtime(max(epoch, 315532800))[:6]
    rec = io.StringIO()
    w = csv.writer(rec, lineterminator="\n")
    with zipfile.ZipFile(path + ".tmp", "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in entries:
            zi = zipfile.ZipInfo(name, stamp)
            zi.external_attr = (0o100000 | mode) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
            w.writerow([name, record_hash(data), len(data)])
        w.writerow([dist_info + "/RECORD", "", ""])
        zi = zipfile.ZipInfo(dist_info + "/RECORD", stamp)
        zi.external_attr = 0o100644 << 16
        zi.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(zi, rec.getvalue())
    os.replace(path + ".tmp", path)


def main(argv):
    ap = argparse.ArgumentParser(description="Build the symmem wheel (package + libsymmem.so).")
    ap.add_argument("--out", default=os.path.join(ROOT, "dist"), help="directory for the wheel (default: dist/)")
    ap.add_argument("--go", default=os.environ.get("GO", "go"), help="the go command (default: $GO, else go)")
    ap.add_argument("--library", help="package this libsymmem.so instead of building one")
    ap.add_argument("--plat", help="platform tag to use instead of the one derived from the library")
    a = ap.parse_args(argv)
    ver = version()
    tmp = tempfile.mkdtemp(prefix="symmem-wheel-")
    try:
        lib = a.library
        if not lib:
            lib = os.path.join(tmp, LIBRARY)
            build_library(a.go, lib)
        tag, why = platform_tag(lib)
        if a.plat:
            tag, why = a.plat, f"given with --plat (derived: {tag}; {why})"
        print(f"build_wheel: platform tag {tag}: {why}", file=sys.stderr)
        full = f"py3-none-{tag}"
        dist_info = f"{NAME}-{ver}.dist-info"
        with open(lib, "rb") as f:
            so = f.read()
        entries = []
        for name, p in package_files():
            with open(p, "rb") as f:
                entries.append((name, f.read(), 0o644))
        entries.append((f"{NAME}/{LIBRARY}", so, 0o755))
        entries.append((dist_info + "/METADATA", metadata(ver).encode(), 0o644))
        entries.append((dist_info + "/WHEEL", wheel_file(full).encode(), 0o644))
        entries.append((dist_info + "/top_level.txt", (NAME + "\n").encode(), 0o644))
        os.makedirs(a.out, exist_ok=True)
        out = os.path.join(os.path.abspath(a.out), f"{NAME}-{ver}-{full}.whl")
        write_wheel(out, entries, dist_info)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
