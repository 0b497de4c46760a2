"""The ops of syncopate/ops.h over the C ABI.

    group = Group("tp0", rank=r, world=4, device=r)
    with AllGatherMatmul(group, max_m=8192, n=7168, k=4096) as op:   # collective
        op.run(a_shard, w, out)                                      # on the current stream
        op.synchronize()

Shapes (per rank, row-major, contiguous; C = A B^T, B an nn.Linear-style weight [n, k]):
  AllGatherMatmul     a: [m/world, k]  b: [n, k]  out: [m, n]       a_gathered: [m, k] (optional)
  MatmulReduceScatter a: [m, k]        b: [n, k]  out: [m/world, n]
  MatmulAllReduce     a: [m, k]        b: [n, k]  out: [m, n]
M (all ranks' rows) is any multiple of the world size up to max_m.
"""

import ctypes
import operator
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from . import _lib
from .errors import FAILED_PRECONDITION, SyncopateError, invalid_argument
from .tensors import current_stream, producers_stream, tensor_info


@dataclass(frozen=True)
class Group:
    """The group this rank belongs to: ranks of one node meet through a rendezvous named by job
    (1-64 letters, digits, '-', '_', '.'; unique per op in the process)."""
    job: str
    rank: int
    world: int
    device: int = 0
    rendezvous_timeout_ms: int = 0  # 0: the library's default (30000)
    # A folder every rank mounts, for ranks in separate containers (network namespaces); None:
    # abstract socket names.
    rendezvous_dir: Optional[str] = None
    # The caller's allgather instead of the sockets: bytes -> every rank's bytes, by rank (e.g.
    # torch_allgather()). Called during the op's creation only.
    allgather: Optional[Callable[[bytes], Sequence[bytes]]] = None


@dataclass(frozen=True)
class PathInfo:
    """What a run at one M does (syncopate_path)."""
    m: int
    bucket_m: int  # the kernel's M; rows past m are padding
    fused: bool    # the fused kernel, or the local GEMM then the transfers
    backend: str   # what moves the chunks: "ce" or "sm"
    chunks: int
    reason: str
    tile_parts: bool = False  # a fused ReduceScatter that moves tile parts
    plan: str = ""  # the chunk plan template the bucket's kernels run ("allreduce.direct", ...)


def _kind_value(kind):
    if isinstance(kind, str):
        if kind not in _lib.KINDS:
            raise invalid_argument("kind %r is not one of %s" % (kind, sorted(_lib.KINDS)))
        return _lib.KINDS[kind]
    if isinstance(kind, int) and not isinstance(kind, bool) and kind in _lib.KIND_NAMES:
        return kind
    raise invalid_argument("kind %r is not one of %s" % (kind, sorted(_lib.KINDS)))


def _kind_name(kind):
    return _lib.KIND_NAMES[_kind_value(kind)]


def normalize_dtype(dtype, what="dtype"):
    """"bf16" / "fp16" from the accepted spellings; INVALID_ARGUMENT naming `what` otherwise."""
    if isinstance(dtype, str):
        name = _lib.DTYPE_ALIASES.get(dtype.lower())
        if name is not None:
            return name
    else:  # a framework dtype object, e.g. torch.bfloat16
        name = {"torch.bfloat16": "bf16", "torch.float16": "fp16"}.get(str(dtype))
        if name is not None:
            return name
    raise invalid_argument("%s %r is not supported; use \"bf16\" or \"fp16\"" % (what, dtype))


def _int_field(name, value, bits=64):
    """value as an int that fits the C field's signed `bits` (ctypes would wrap it silently:
    2**32 + 1 into an int32 is 1), else INVALID_ARGUMENT naming the field."""
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = operator.index(value)
        except TypeError:
            raise invalid_argument("%s must be an int, not %s" %
                                   (name, type(value).__name__)) from None
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not low <= value <= high:
        raise invalid_argument("%s %d does not fit a %d-bit field (%d..%d)" %
                               (name, value, bits, low, high))
    return value


def _make_op_config(kind, max_m, n, k, dtype="bf16", backend="auto", path="auto", m_buckets=None,
                    chunks=0, comm_ctas=0, timeout_ms=2000, cache_dir=None, bucket_paths=None,
                    tile_parts=None):
    """The syncopate_op_config, after the checks only Python can make (types, names that must
    map to an enum, at most 16 buckets). Returns (config, keepalive)."""
    config = _lib.new_struct(_lib.OpConfig)
    config.kind = _kind_value(kind)
    config.max_m = _int_field("max_m", max_m)
    config.n = _int_field("n", n)
    config.k = _int_field("k", k)
    config.dtype = _lib.DTYPES[normalize_dtype(dtype)]
    backend_name = _lib.BACKEND_ALIASES.get(backend) if isinstance(backend, str) else None
    if backend_name is None:
        raise invalid_argument("backend %r is not one of \"auto\", \"ce\", \"sm\"" % (backend,))
    config.backend = _lib.BACKENDS[backend_name]
    if not isinstance(path, str) or path not in _lib.PATHS:
        raise invalid_argument("path %r is not one of \"auto\", \"fused\", \"unfused\"" %
                               (path,))
    config.path = _lib.PATHS[path]
    buckets = [] if m_buckets is None else [_int_field("m_buckets", b) for b in m_buckets]
    if len(buckets) > _lib.MAX_BUCKETS:
        raise invalid_argument("m_buckets has %d entries; at most %d" %
                               (len(buckets), _lib.MAX_BUCKETS))
    config.num_buckets = len(buckets)
    for i, b in enumerate(buckets):
        config.m_buckets[i] = b
    paths = [] if bucket_paths is None else list(bucket_paths)
    if len(paths) > _lib.MAX_BUCKETS:
        raise invalid_argument("bucket_paths has %d entries; at most %d" %
                               (len(paths), _lib.MAX_BUCKETS))
    config.num_bucket_paths = len(paths)
    for i, entry in enumerate(paths):
        # {"bucket_m": 2048, "fused": True, "backend": "sm", "chunks": 2}; the library checks
        # the values and names the entry.
        if not isinstance(entry, dict) or "bucket_m" not in entry:
            raise invalid_argument("bucket_paths[%d] must be a dict with a bucket_m" % i)
        unknown = set(entry) - {"bucket_m", "fused", "backend", "chunks"}
        if unknown:
            raise invalid_argument("bucket_paths[%d] has unknown keys %s" % (i, sorted(unknown)))
        target = config.bucket_paths[i]
        target.bucket_m = _int_field("bucket_paths[%d].bucket_m" % i, entry["bucket_m"])
        target.fused = 1 if entry.get("fused", True) else 0
        entry_backend = entry.get("backend", "auto")
        name = _lib.BACKEND_ALIASES.get(entry_backend) if isinstance(entry_backend, str) else None
        if name is None:
            raise invalid_argument("bucket_paths[%d].backend %r is not one of \"auto\", \"ce\", "
                                   "\"sm\"" % (i, entry_backend))
        target.backend = _lib.BACKENDS[name]
        target.chunks = _int_field("bucket_paths[%d].chunks" % i, entry.get("chunks", 0), bits=32)
    config.chunks = _int_field("chunks", chunks, bits=32)
    config.comm_ctas = _int_field("comm_ctas", comm_ctas, bits=32)
    config.timeout_ms = _int_field("timeout_ms", timeout_ms)  # 0: the library's 2000
    if tile_parts is not None and not isinstance(tile_parts, bool):
        raise invalid_argument("tile_parts must be True, False or None (the library's "
                               "default), not %r" % (tile_parts,))
    config.tile_parts = 0 if tile_parts is None else (1 if tile_parts else -1)
    keepalive = None
    if cache_dir:
        keepalive = str(cache_dir).encode("utf-8")
        config.cache_dir = keepalive
    return config, keepalive


def _make_group_config(group):
    if not isinstance(group, Group):
        raise invalid_argument("group must be a syncopate.Group, not %s" %
                               type(group).__name__)
    config = _lib.new_struct(_lib.GroupConfig)
    job = group.job.encode("utf-8") if isinstance(group.job, str) else None
    if job is None:
        raise invalid_argument("group.job must be a str")
    config.job = job
    config.rank = _int_field("group.rank", group.rank, bits=32)
    config.world = _int_field("group.world", group.world, bits=32)
    config.device = _int_field("group.device", group.device, bits=32)
    config.rendezvous_timeout_ms = _int_field("group.rendezvous_timeout_ms",
                                              group.rendezvous_timeout_ms)
    if config.rendezvous_timeout_ms < 0:
        raise invalid_argument("group.rendezvous_timeout_ms must be >= 0 (0: the default)")
    rendezvous_dir = None
    if group.rendezvous_dir:
        if not isinstance(group.rendezvous_dir, str):
            raise invalid_argument("group.rendezvous_dir must be a str")
        rendezvous_dir = group.rendezvous_dir.encode("utf-8")
        config.rendezvous_dir = rendezvous_dir
    callback = None
    if group.allgather is not None:
        if not callable(group.allgather):
            raise invalid_argument("group.allgather must be callable (bytes -> list of bytes)")
        callback = _allgather_callback(group.allgather)
        config.bootstrap = callback
    return config, (job, rendezvous_dir, callback)  # all must outlive the call


def _allgather_callback(allgather):
    """The C syncopate_allgather_fn over a Python allgather. Exceptions never cross into C: they
    become UNAVAILABLE, and the exception is kept on the callback (.errors) for the message."""
    errors = []

    def call(user_data, mine, length, deliver, deliver_ctx):
        try:
            all_bytes = allgather(ctypes.string_at(mine, length))
            for rank, data in enumerate(all_bytes):
                data = bytes(data)
                deliver(deliver_ctx, rank, data, len(data))
            return 0
        except Exception as e:  # noqa: BLE001 - must not unwind through C
            errors.append("%s: %s" % (type(e).__name__, e))
            return 14  # UNAVAILABLE

    callback = _lib.ALLGATHER_FN(call)
    callback.errors = errors
    return callback


def torch_allgather(process_group=None):
    """A Group.allgather over torch.distributed (all_gather_object on `process_group`, or the
    default group); imports torch only when called."""
    import torch.distributed as dist

    def allgather(mine):
        out = [None] * dist.get_world_size(process_group)
        dist.all_gather_object(out, mine, group=process_group)
        return out

    return allgather


def _path_info(path):
    return PathInfo(m=int(path.m), bucket_m=int(path.bucket_m), fused=bool(path.fused),
                    backend=_lib.BACKEND_NAMES.get(path.backend, str(path.backend)),
                    chunks=int(path.chunks), reason=path.reason.decode("utf-8", "replace"),
                    tile_parts=bool(path.tile_parts),
                    plan=path.plan.decode("utf-8", "replace"))


def check_config(group, kind, max_m, n, k, **options):
    """Checks a group and op config without a GPU (syncopate_check_config); raises
    SyncopateError(INVALID_ARGUMENT) naming the field at fault."""
    group_config, job = _make_group_config(group)
    op_config, keepalive = _make_op_config(kind, max_m, n, k, **options)
    _lib.check(_lib.lib().syncopate_check_config(ctypes.byref(group_config),
                                                 ctypes.byref(op_config)))


def choose_path(kind, world, max_m, n, k, m, **options):
    """The path a run at `m` takes (pure: no GPU; the same on every rank of the same config and
    environment, which the op's constructor checks). `options` are the op
    constructor's: dtype, backend, path, m_buckets, chunks, comm_ctas, timeout_ms, cache_dir,
    bucket_paths, tile_parts."""
    op_config, keepalive = _make_op_config(kind, max_m, n, k, **options)
    world, m = _int_field("world", world, bits=32), _int_field("m", m)  # before the library
    out = _lib.new_struct(_lib.Path)
    _lib.check(_lib.lib().syncopate_choose_path(ctypes.byref(op_config), world, m,
                                                ctypes.byref(out)))
    return _path_info(out)


def _shape_error(name, expected, actual, why):
    return invalid_argument("%s has shape %s; expected %s (%s)" %
                            (name, list(actual), list(expected), why))


def check_run_shapes(kind, world, n, k, dtype, a, b, out, a_gathered=None, max_m=None,
                     device=None):
    """Checks a run's tensors against ops.h and returns M (all ranks' rows). Pure: `a`, `b`,
    `out`, `a_gathered` are anything with .shape, .dtype ("bf16"/"fp16") and .device (an
    ordinal or None: unknown), e.g. TensorInfo. Raises SyncopateError(INVALID_ARGUMENT) naming
    the argument, with the expected and actual shapes."""
    kind = _kind_name(kind)
    dtype = normalize_dtype(dtype)
    if world < 1:
        raise invalid_argument("world %d < 1" % world)
    tensors = [("a", a), ("b", b), ("out", out)]
    if a_gathered is not None:
        if kind != "all_gather_matmul":
            raise invalid_argument("a_gathered is only for all_gather_matmul, not %s" % kind)
        tensors.append(("a_gathered", a_gathered))
    for name, t in tensors:
        if len(t.shape) != 2:
            raise invalid_argument("%s must be a 2-D matrix; it has shape %s" %
                                   (name, list(t.shape)))
        if t.dtype != dtype:
            raise invalid_argument("%s has dtype %s; the op's dtype is %s" % (name, t.dtype, dtype))
    devices = [(name, t.device) for name, t in tensors if t.device is not None]
    if device is not None:
        for name, d in devices:
            if d != device:
                raise invalid_argument("%s is on device %d; the op's group is on device %d" %
                                       (name, d, device))
    elif devices:
        first_name, first = devices[0]
        for name, d in devices[1:]:
            if d != first:
                raise invalid_argument("%s is on device %d but %s is on device %d" %
                                       (name, d, first_name, first))

    rows = int(a.shape[0])
    m = rows * world if kind == "all_gather_matmul" else rows
    if a.shape[1] != k:
        expected = "[m/world, %d]" if kind == "all_gather_matmul" else "[m, %d]"
        raise invalid_argument("a has shape %s; expected %s (k = %d, the op's k)" %
                               (list(a.shape), expected % k, k))
    if rows <= 0:
        raise invalid_argument("a has shape %s: no rows (m must be positive)" % list(a.shape))
    if kind != "all_gather_matmul" and m % world != 0:
        raise invalid_argument("a has %d rows: m = %d is not a multiple of the world size %d" %
                               (rows, m, world))
    if max_m is not None and m > max_m:
        raise invalid_argument("a has shape %s: m = %d exceeds the op's max_m %d" %
                               (list(a.shape), m, max_m))
    if tuple(b.shape) != (n, k):
        raise _shape_error("b", (n, k), b.shape, "the weight [n, k]")
    if kind == "matmul_reduce_scatter":
        expected_out, why = (m // world, n), "[m/world, n] with m = %d" % m
    else:
        expected_out, why = (m, n), "[m, n] with m = %d" % m
    if tuple(out.shape) != expected_out:
        raise _shape_error("out", expected_out, out.shape, why)
    if a_gathered is not None and tuple(a_gathered.shape) != (m, k):
        raise _shape_error("a_gathered", (m, k), a_gathered.shape, "[m, k] with m = %d" % m)
    return m


class _Op:
    """One op of syncopate/ops.h: built once (collective over the group), run many times."""
    KIND = None

    def __init__(self, group, max_m, n, k, dtype="bf16", backend="auto", path="auto",
                 m_buckets=None, chunks=0, comm_ctas=0, timeout_ms=2000, cache_dir=None,
                 bucket_paths=None, tile_parts=None):
        self._handle = None
        self.group = group
        self.max_m = max_m
        self.n = n
        self.k = k
        self.dtype = normalize_dtype(dtype)
        self._last_stream = 0  # the stream of the last run, which synchronize() waits for
        group_config, job = _make_group_config(group)
        op_config, keepalive = _make_op_config(
            self.KIND, max_m, n, k, dtype=self.dtype, backend=backend, path=path,
            m_buckets=m_buckets, chunks=chunks, comm_ctas=comm_ctas, timeout_ms=timeout_ms,
            cache_dir=cache_dir, bucket_paths=bucket_paths, tile_parts=tile_parts)
        lib = _lib.lib()
        # The pure check first: a config error names its field before any GPU work.
        _lib.check(lib.syncopate_check_config(ctypes.byref(group_config),
                                              ctypes.byref(op_config)))
        handle = _lib.OpHandle()
        callback = job[2]
        try:
            _lib.check(lib.syncopate_op_create(ctypes.byref(group_config),
                                               ctypes.byref(op_config), ctypes.byref(handle)))
        except SyncopateError as e:
            if callback is not None and callback.errors:
                raise SyncopateError(e.code, "%s (group.allgather raised %s)" %
                                     (e.message, "; ".join(callback.errors)),
                                     e.code_name) from None
            raise
        self._lib = lib  # kept for __del__ at interpreter exit
        self._handle = handle

    @property
    def kind(self):
        return self.KIND

    def _live(self):
        if self._handle is None:
            raise SyncopateError(FAILED_PRECONDITION, "the %s op is closed" % self.KIND)
        return self._handle

    def run(self, a, b, out, a_gathered=None, stream=None):
        """Runs the op on `stream` (None: the current torch stream for torch tensors, else the
        stream the tensors' __cuda_array_interface__ names, else the legacy default stream; a
        DLPack producer is told the stream). Stream-ordered: returns before the GPU finishes.
        Capturable in torch.cuda.graph, a bucket's first run too (syncopate/ops.h, Op::Run);
        the tensors' memory must outlive the graph."""
        handle = self._live()
        given = None if stream is None else current_stream(stream)
        a_info = tensor_info(a, "a", consumer_stream=given)
        b_info = tensor_info(b, "b", consumer_stream=given)
        out_info = tensor_info(out, "out", allow_readonly=False, consumer_stream=given)
        g_info = None
        if a_gathered is not None:
            g_info = tensor_info(a_gathered, "a_gathered", allow_readonly=False,
                                 consumer_stream=given)
        m = check_run_shapes(self.KIND, self.group.world, self.n, self.k, self.dtype, a_info,
                             b_info, out_info, g_info, max_m=self.max_m,
                             device=self.group.device)
        handle_stream = given
        if handle_stream is None and not a_info.is_torch:
            handle_stream = producers_stream([("a", a_info), ("b", b_info), ("out", out_info),
                                              ("a_gathered", g_info)])
        if handle_stream is None:
            handle_stream = current_stream(None, a_info)
        self._last_stream = handle_stream
        _lib.check(self._lib.syncopate_op_run(handle, m, a_info.ptr, b_info.ptr, out_info.ptr,
                                              g_info.ptr if g_info else 0,
                                              ctypes.c_void_p(handle_stream or None)))
        return out

    def synchronize(self, stream=None):
        """Waits on the host for every run on `stream` (None: the stream the last run took,
        whatever stream is current now; the legacy default stream before any run). A peer that
        did not deliver is DEADLINE_EXCEEDED, and sticks (later calls return it)."""
        handle = self._live()
        handle_stream = self._last_stream if stream is None else current_stream(stream)
        _lib.check(self._lib.syncopate_op_synchronize(handle,
                                                      ctypes.c_void_p(handle_stream or None)))

    def error(self):
        """The sticky error (a SyncopateError), or None."""
        code = self._lib.syncopate_op_error(self._live())
        if code == 0:
            return None
        return SyncopateError(code, _lib.last_error() or "(no message)", _lib.status_name(code))

    def path(self, m):
        """The PathInfo of a run at M = m."""
        out = _lib.new_struct(_lib.Path)
        _lib.check(self._lib.syncopate_op_path(self._live(), _int_field("m", m),
                                               ctypes.byref(out)))
        return _path_info(out)

    def input_workspace(self, m):
        """AllGatherMatmul: the device address where this rank's shard of a run at m lives in
        the workspace (a run whose a is there skips the input copy); 0 otherwise."""
        return int(self._lib.syncopate_op_input_workspace(self._live(), _int_field("m", m)))

    def close(self):
        """Destroys the op (once; later calls do nothing)."""
        handle, self._handle = getattr(self, "_handle", None), None
        if handle is not None:
            self._lib.syncopate_op_destroy(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing sensible to do
            pass

    def __repr__(self):
        state = "closed" if self._handle is None else "open"
        return "%s(%s, max_m=%d, n=%d, k=%d, dtype=%r, %s)" % (
            type(self).__name__, self.group, self.max_m, self.n, self.k, self.dtype, state)


class AllGatherMatmul(_Op):
    """out [m, n] = AllGather(a [m/world, k]) b[n, k]^T; a_gathered [m, k] optional."""
    KIND = "all_gather_matmul"


class MatmulReduceScatter(_Op):
    """out [m/world, n] = this rank's rows of the sum over ranks of a [m, k] b [n, k]^T."""
    KIND = "matmul_reduce_scatter"


class MatmulAllReduce(_Op):
    """out [m, n] = the sum over ranks of a [m, k] b [n, k]^T."""
    KIND = "matmul_all_reduce"
