"""python3 -m symmem doctor: what this install is and what this rank would
do, as JSON.

Under `symmem launch -n N` or torchrun (RANK set) it joins the job
(collective like init); otherwise it starts a world of one rank on this
host by itself, so it needs no launcher and no `symmem` binary (an install
from the wheel has only the library). It prints the package (version, file,
the library it loaded and that library's ABI version) and the library's
doctor report: backend and why auto chose it, the backend's description
(on cuda: driver, device, peers, NCCL), ranks, groups, pool and the path
each op would take. If the world does not start, it prints the package part
and the error, and exits 1."""

import argparse
import json
import os
import secrets
import socket
import sys

import symmem
from symmem import _lib


def package():
    return {"version": symmem.__version__, "file": os.path.dirname(os.path.abspath(symmem.__file__)),
            "library": _lib.path, "abi_version": _lib.lib.symmem_abi_version(),
            "library_env": os.environ.get(_lib.LIBRARY_ENV), "python": sys.version.split()[0],
            "executable": sys.executable}


def _free_port():
    """A free port whose successor is free too: rank 0 hosts symmem's store
    on master_port+1 (symmem_init_explicit)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port >= 65534:
            continue
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port + 1))
        except OSError:
            continue
        return port
    return port


def main(argv):
    ap = argparse.ArgumentParser(prog="python3 -m symmem", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    d = sub.add_parser("doctor", help="print the package and this rank's doctor report as JSON")
    d.add_argument("--backend", default="auto", help="auto (default), cpu or cuda")
    d.add_argument("--timeout", type=float, default=None, help="seconds every wait may take (default 60)")
    a = ap.parse_args(argv[1:])
    if a.cmd != "doctor":
        ap.print_usage(sys.stderr)
        return 2
    out = {"package": package()}
    try:
        if os.environ.get("RANK") is not None:
            out["world_from"] = "the job's environment (RANK set)"
            w = symmem.init(backend=a.backend, timeout=a.timeout)
        else:
            out["world_from"] = "a world of one rank started by the doctor (RANK unset)"
            w = symmem.init(backend=a.backend, timeout=a.timeout, rank=0, world_size=1, local_rank=0,
                            local_world_size=1, master_addr="127.0.0.1", master_port=_free_port(),
                            token=secrets.token_hex(16), job_id=f"doctor-{os.getpid()}")
    except symmem.SymmemError as e:
        out["error"] = str(e)
        print(json.dumps(out, indent=1))
        return 1
    try:
        out.update(w.doctor())
    finally:
        w.close()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
