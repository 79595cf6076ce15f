"""symmem for Python: symmetric-memory collectives over ctypes.

    import symmem
    w = symmem.init()                        # under `symmem launch` or with explicit arguments
    buf = symmem.empty_buffer(1024, "float32")   # or symmem.empty(..., torch.float32) for a tensor
    path = symmem.all_reduce(buf)            # Path(algo, staged); group.last_path() has the reason

Pure Python over libsymmem.so (include/symmem.h). torch is optional: it is
imported the first time a tensor or the MemPool is used. On the cpu backend
every call takes torch CPU tensors or any buffer-protocol object (memoryview,
array.array, numpy); on the cuda backend CUDA tensors, on the current stream.
"""

# The package's version, the one place it is set: python/build_wheel.py names
# the wheel after it and `python -m symmem doctor` prints it.
__version__ = "0.1.0"

from ._lib import (BadHandleError, ClosedError, InvalidArgumentError, MismatchError, NoMemoryError, NotMemberError,
                   NotSupportedError, PeerError, SymmemError, SymmemTimeoutError)
from ._core import (Group, Path, Scope, World, doctor, empty_buffer, explain, init, is_symmetric, new_group,
                    world)
from ._ops import (AVG, DTYPES, MAX, MIN, OPS, PROD, SUM, all_gather_into_tensor, all_reduce, all_to_all_single,
                   all_to_all_vdev, broadcast, reduce_scatter_tensor)
from ._torch import empty, mem_pool, set_graph_pool_id, use_symmetric_memory

__all__ = [
    "init", "close", "world", "new_group", "World", "Group", "Scope", "Path", "doctor", "explain", "is_symmetric",
    "empty", "empty_buffer", "use_symmetric_memory", "mem_pool", "set_graph_pool_id",
    "all_gather_into_tensor", "reduce_scatter_tensor", "all_reduce", "broadcast", "all_to_all_single", "all_to_all_vdev",
    "SUM", "PROD", "MAX", "MIN", "AVG", "DTYPES", "OPS",
    "SymmemError", "InvalidArgumentError", "NotSupportedError", "NotMemberError", "MismatchError",
    "ClosedError", "SymmemTimeoutError", "PeerError", "BadHandleError", "NoMemoryError",
]


def close():
    """Closes the open world, if any (collective)."""
    from . import _core as c
    if c._world is not None:
        c._world.close()
