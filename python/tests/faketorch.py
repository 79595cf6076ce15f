"""A stand-in for the few parts of torch that symmem's collectives read, for
tests and benchmarks of the package's torch path on machines without torch
(the build machine and CI have the standard library only).

It is pure logic: a Tensor holds an address, a count, a dtype, a device and
contiguity, nothing else; no memory is touched, so it is used with the
library call replaced (a recorder, a no-op). Its reads are C-level callables
(bound methods of int and bool), like torch's, but cheaper than torch's own
(which check for __torch_function__ overrides): a benchmark on it measures
the package's Python work with the floor of a tensor read, not torch's cost.

    torch = faketorch.install()      # before the first tensor reaches symmem
    t = torch.Tensor(0x1000, 1024, torch.float32)
"""

import collections
import sys
import types

_SIZES = {"int8": 1, "uint8": 1, "int32": 4, "int64": 8, "float16": 2, "float32": 4, "float64": 8, "bfloat16": 2,
          "complex64": 8}


class dtype:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "torch." + self.name


class Tensor:
    # symmem recognises a torch type by its module and a data_ptr attribute.
    data_ptr = None

    def __init__(self, addr, numel, dt, device=0, contiguous=True):
        self.data_ptr = addr.__int__
        self.numel = numel.__int__
        self.get_device = device.__int__
        self.is_contiguous = contiguous.__bool__
        self.dtype = dt
        self.nbytes = numel * _SIZES[dt.name]

    def __repr__(self):
        return f"Tensor({self.data_ptr():#x}, {self.numel()}, {self.dtype}, device={self.get_device()})"


Tensor.__module__ = "torch"


class Parameter(Tensor):
    """A subclass, as torch.nn.Parameter is one."""


Parameter.__module__ = "torch.nn.parameter"

# The current raw stream per device (torch._C._cuda_getCurrentRawStream):
# 0 is the default (legacy) stream; tests set another value for a side stream.
current = collections.defaultdict(int)


def install():
    """Puts the fake module in sys.modules as torch and returns it."""
    m = types.ModuleType("torch")
    for name in _SIZES:
        setattr(m, name, dtype(name))
    m.Tensor = Tensor
    m.Parameter = Parameter
    m._C = types.SimpleNamespace(_cuda_getCurrentRawStream=current.__getitem__)
    sys.modules["torch"] = m
    return m
