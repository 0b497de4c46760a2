"""torch.library ops in the "syncopate" namespace, mirroring torch.ops.symm_mem's:

  syncopate::fused_all_gather_matmul(Tensor A, Tensor[] Bs, int gather_dim, str group_name, *,
                                     bool return_A=True) -> (Tensor?, Tensor[])
  syncopate::fused_matmul_reduce_scatter(Tensor A, Tensor B, str reduce_op, int scatter_dim,
                                         str group_name) -> Tensor

As in symm_mem, B is [k, n] and the result is A @ B. Syncopate's ops take an nn.Linear-style
weight [n, k], so B must be the transpose of a contiguous [n, k] weight (B = linear.weight.t()).
Only gather_dim / scatter_dim 0 and reduce_op "sum" are supported. Forward only (no autograd).

Register each group name first (every rank, before the first call):

    import syncopate.torch_ops as sto
    sto.register_group("tp0", syncopate.Group("tp0", rank, world, device=rank), max_m=8192)
    out = torch.ops.syncopate.fused_matmul_reduce_scatter(a, w.t(), "sum", 0, "tp0")

An op object is built (collectively: every rank makes the same calls in the same order) on the
first call per (group, kind, n, k, dtype), with max_m from register_group or else that call's M;
a later call with a larger M builds a new one (the old one stays open, for graphs captured with
it, until unregister_group).

Importing this module imports torch; `import syncopate` never does.
"""

import dataclasses
import hashlib
import threading

import torch

from .errors import invalid_argument
from .ops import AllGatherMatmul, Group, MatmulReduceScatter, normalize_dtype

__all__ = ["register_group", "unregister_group", "fused_all_gather_matmul",
           "fused_matmul_reduce_scatter"]

_lock = threading.Lock()
_groups = {}  # group_name -> (Group, max_m or None, op options)
_ops = {}     # (group_name, kind, n, k, dtype) -> op
# Ops a larger M replaced, kept open until unregister_group: a CUDA graph captured with one
# replays into its workspace, which must outlive the graph (syncopate/ops.h).
_retired = {}  # group_name -> [op]
_generation = {}


def register_group(group_name, group, max_m=None, **options):
    """Maps a torch group name to the Syncopate Group (and the op options: backend, path,
    m_buckets, chunks, comm_ctas, timeout_ms, cache_dir) of this rank."""
    if not isinstance(group, Group):
        raise invalid_argument("group must be a syncopate.Group")
    with _lock:
        _groups[group_name] = (group, max_m, dict(options))


def unregister_group(group_name):
    """Forgets a group name and closes its ops."""
    with _lock:
        _groups.pop(group_name, None)
        for key in [key for key in _ops if key[0] == group_name]:
            _ops.pop(key).close()
        for op in _retired.pop(group_name, []):
            op.close()


def _registered(group_name):
    try:
        return _groups[group_name]
    except KeyError:
        raise invalid_argument(
            "group_name %r is not registered: call syncopate.torch_ops.register_group(%r, "
            "syncopate.Group(...)) on every rank first" % (group_name, group_name)) from None


def _world(group_name):
    if group_name in _groups:
        return _groups[group_name][0].world
    import torch.distributed.distributed_c10d as c10d  # tracing before register_group
    return c10d._resolve_process_group(group_name).size()


def _job_name(group, kind, n, k, dtype, generation):
    job = "%s.%s.%dx%d.%s.%d" % (group.job, "ag" if kind == "all_gather_matmul" else "rs",
                                 n, k, dtype, generation)
    if len(job) > 64:
        job = "%s.%s" % (group.job[:40], hashlib.sha256(job.encode()).hexdigest()[:16])
    return job


def _op_for(group_name, cls, n, k, dtype, m):
    with _lock:
        group, max_m, options = _registered(group_name)
        key = (group_name, cls.KIND, n, k, dtype)
        op = _ops.get(key)
        if op is not None and m <= op.max_m:
            return op
        if op is not None:
            _retired.setdefault(group_name, []).append(_ops.pop(key))
        generation = _generation.get(key, 0)
        _generation[key] = generation + 1
        # The registered group with its own job per op: everything else (the allgather
        # bootstrap included) carries over.
        op_group = dataclasses.replace(
            group, job=_job_name(group, cls.KIND, n, k, dtype, generation))
        op_max_m = max(m, max_m or 0)
        op = cls(op_group, op_max_m, n, k, dtype=dtype, **options)
        _ops[key] = op
        return op


def _weight(B, name):
    """B [k, n] -> the contiguous [n, k] weight it transposes."""
    if B.dim() != 2:
        raise invalid_argument("%s must be 2-D [k, n]; it has shape %s" % (name, list(B.shape)))
    W = B.t()
    if not W.is_contiguous():
        raise invalid_argument(
            "%s (shape %s, strides %s) must be the transpose of a contiguous [n, k] weight "
            "(e.g. linear.weight.t()); pass B.t().contiguous().t() to convert" %
            (name, list(B.shape), list(B.stride())))
    return W


def _flat_rows(A, name):
    if A.dim() < 2:
        raise invalid_argument("%s must have at least 2 dimensions" % name)
    if not A.is_contiguous():
        raise invalid_argument("%s must be contiguous" % name)
    return A.reshape(-1, A.shape[-1])


_TAGS = ((torch._C.Tag.needs_fixed_stride_order,)
         if hasattr(torch._C, "Tag") and hasattr(torch._C.Tag, "needs_fixed_stride_order")
         else ())

_library = torch.library.Library("syncopate", "DEF")
_library.define(
    "fused_all_gather_matmul(Tensor A, Tensor[] Bs, int gather_dim, str group_name, *, "
    "bool return_A=True) -> (Tensor?, Tensor[])", tags=_TAGS)
_library.define(
    "fused_matmul_reduce_scatter(Tensor A, Tensor B, str reduce_op, int scatter_dim, "
    "str group_name) -> Tensor", tags=_TAGS)


def _check_gather_dim(A, gather_dim):
    if gather_dim != 0 and gather_dim != -A.dim():
        raise invalid_argument("gather_dim %d is not supported; only 0" % gather_dim)


def _check_scatter(A, reduce_op, scatter_dim, world):
    if reduce_op != "sum":
        raise invalid_argument("reduce_op %r is not supported; only \"sum\"" % reduce_op)
    if scatter_dim != 0 and scatter_dim != -A.dim():
        raise invalid_argument("scatter_dim %d is not supported; only 0" % scatter_dim)
    if A.shape[0] % world != 0:
        raise invalid_argument("A's dim 0 (%d) is not a multiple of the world size %d" %
                               (A.shape[0], world))


def _all_gather_matmul_fake(A, Bs, gather_dim, group_name, return_A=True):
    _check_gather_dim(A, gather_dim)
    world = _world(group_name)
    gathered_shape = (A.shape[0] * world,) + tuple(A.shape[1:])
    A_out = A.new_empty(gathered_shape) if return_A else None
    return A_out, [A.new_empty(gathered_shape[:-1] + (B.shape[1],)) for B in Bs]


def _all_gather_matmul_cuda(A, Bs, gather_dim, group_name, return_A=True):
    _check_gather_dim(A, gather_dim)
    if not Bs:
        raise invalid_argument("Bs is empty")
    group = _registered(group_name)[0]
    A2 = _flat_rows(A, "A")
    k = A2.shape[1]
    m = A2.shape[0] * group.world
    dtype = normalize_dtype(A.dtype, "A's dtype")
    gathered_shape = (A.shape[0] * group.world,) + tuple(A.shape[1:])
    need_gathered = return_A or len(Bs) > 1
    A_gathered = A2.new_empty(m, k) if need_gathered else None
    outputs = []
    for i, B in enumerate(Bs):
        if i == 0:
            W = _weight(B, "Bs[0]")
            op = _op_for(group_name, AllGatherMatmul, W.shape[0], k, dtype, m)
            out = A2.new_empty(m, W.shape[0])
            op.run(A2, W, out, a_gathered=A_gathered)
        else:
            out = torch.mm(A_gathered, B)  # A is gathered once; later weights are local GEMMs
        outputs.append(out.view(gathered_shape[:-1] + (out.shape[1],)))
    return (A_gathered.view(gathered_shape) if return_A else None), outputs


def _matmul_reduce_scatter_fake(A, B, reduce_op, scatter_dim, group_name):
    world = _world(group_name)
    _check_scatter(A, reduce_op, scatter_dim, world)
    return A.new_empty((A.shape[0] // world,) + tuple(A.shape[1:-1]) + (B.shape[1],))


def _matmul_reduce_scatter_cuda(A, B, reduce_op, scatter_dim, group_name):
    group = _registered(group_name)[0]
    _check_scatter(A, reduce_op, scatter_dim, group.world)
    A2 = _flat_rows(A, "A")
    W = _weight(B, "B")
    dtype = normalize_dtype(A.dtype, "A's dtype")
    m = A2.shape[0]
    op = _op_for(group_name, MatmulReduceScatter, W.shape[0], A2.shape[1], dtype, m)
    out = A2.new_empty(m // group.world, W.shape[0])
    op.run(A2, W, out)
    return out.view((A.shape[0] // group.world,) + tuple(A.shape[1:-1]) + (W.shape[0],))


_library.impl("fused_all_gather_matmul", _all_gather_matmul_cuda, "CUDA")
_library.impl("fused_matmul_reduce_scatter", _matmul_reduce_scatter_cuda, "CUDA")
_register_fake = getattr(torch.library, "register_fake", None) or torch.library.impl_abstract
_register_fake("syncopate::fused_all_gather_matmul")(_all_gather_matmul_fake)
_register_fake("syncopate::fused_matmul_reduce_scatter")(_matmul_reduce_scatter_fake)


def fused_all_gather_matmul(A, Bs, gather_dim, group_name, *, return_A=True):
    return torch.ops.syncopate.fused_all_gather_matmul(A, Bs, gather_dim, group_name,
                                                       return_A=return_A)


def fused_matmul_reduce_scatter(A, B, reduce_op, scatter_dim, group_name):
    return torch.ops.syncopate.fused_matmul_reduce_scatter(A, B, reduce_op, scatter_dim,
                                                           group_name)
