"""Syncopate's fused compute/communication ops (libsyncopate.so's C ABI) for Python.

    import syncopate
    group = syncopate.Group("tp0", rank=r, world=4, device=r)
    with syncopate.AllGatherMatmul(group, max_m=8192, n=7168, k=4096) as op:
        op.run(a_shard, w, out)          # torch tensors, __cuda_array_interface__ or DLPack
        op.synchronize()

The library is loaded on first use (SYNCOPATE_LIBRARY, then next to the installed package, then
the loader's path). Standard library only; torch is optional: syncopate.torch_ops (imported
explicitly) registers torch.ops.syncopate.* mirroring torch.ops.symm_mem's fused ops.
"""

from ._lib import abi_version, library_path
from .errors import SyncopateError
from .ops import (AllGatherMatmul, Group, MatmulAllReduce, MatmulReduceScatter, PathInfo,
                  check_config, check_run_shapes, choose_path, torch_allgather)
from .tensors import TensorInfo, current_stream, tensor_info

__version__ = "0.1.0"

__all__ = [
    "AllGatherMatmul",
    "Group",
    "MatmulAllReduce",
    "MatmulReduceScatter",
    "PathInfo",
    "SyncopateError",
    "TensorInfo",
    "abi_version",
    "check_config",
    "check_run_shapes",
    "choose_path",
    "current_stream",
    "library_path",
    "tensor_info",
    "torch_allgather",
    "__version__",
]
