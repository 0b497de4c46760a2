"""Loads libsyncopate.so and declares its C ABI (syncopate/syncopate_ops.h) for ctypes.

Loading is lazy: importing the package never touches the library; the first call that needs it
calls lib(), which finds it (SYNCOPATE_LIBRARY, then next to an installed package, then the
loader's path), checks syncopate_abi_version() and raises SyncopateError naming every place it
looked when that fails.
"""

import ctypes
import ctypes.util
import glob
import os
import threading

from .errors import FAILED_PRECONDITION, NOT_FOUND, SyncopateError

ABI_VERSION = 1
MAX_BUCKETS = 16

# syncopate_op_kind, syncopate_dtype, syncopate_backend, syncopate_path_preference.
KINDS = {"all_gather_matmul": 0, "matmul_reduce_scatter": 1, "matmul_all_reduce": 2}
KIND_NAMES = {v: k for k, v in KINDS.items()}
DTYPES = {"bf16": 0, "fp16": 1}
DTYPE_ALIASES = {"bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16",
                 "half": "fp16"}
BACKENDS = {"auto": 0, "ce": 1, "sm": 2}
BACKEND_ALIASES = {"auto": "auto", "ce": "ce", "copy_engine": "ce", "sm": "sm"}
BACKEND_NAMES = {v: k for k, v in BACKENDS.items()}
PATHS = {"auto": 0, "fused": 1, "unfused": 2}


# syncopate_deliver_fn and syncopate_allgather_fn (the bootstrap callback's C types).
DELIVER_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p,
                              ctypes.c_uint64)
ALLGATHER_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(ctypes.c_char),
                                ctypes.c_uint64, DELIVER_FN, ctypes.c_void_p)


class GroupConfig(ctypes.Structure):
    """syncopate_group_config."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("job", ctypes.c_char_p),
        ("rank", ctypes.c_int32),
        ("world", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("rendezvous_timeout_ms", ctypes.c_int64),
        ("rendezvous_dir", ctypes.c_char_p),
        ("bootstrap", ALLGATHER_FN),
        ("bootstrap_user_data", ctypes.c_void_p),
    ]


class BucketPath(ctypes.Structure):
    """syncopate_bucket_path."""
    _fields_ = [
        ("bucket_m", ctypes.c_int64),
        ("fused", ctypes.c_int32),
        ("backend", ctypes.c_int32),
        ("chunks", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
    ]


class OpConfig(ctypes.Structure):
    """syncopate_op_config."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("kind", ctypes.c_int32),
        ("max_m", ctypes.c_int64),
        ("n", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("dtype", ctypes.c_int32),
        ("backend", ctypes.c_int32),
        ("path", ctypes.c_int32),
        ("num_buckets", ctypes.c_int32),
        ("m_buckets", ctypes.c_int64 * MAX_BUCKETS),
        ("chunks", ctypes.c_int32),
        ("comm_ctas", ctypes.c_int32),
        ("timeout_ms", ctypes.c_int64),
        ("cache_dir", ctypes.c_char_p),
        ("num_bucket_paths", ctypes.c_int32),
        ("bucket_paths", BucketPath * MAX_BUCKETS),
        ("tile_parts", ctypes.c_int32),
        ("reserved_tail", ctypes.c_int32),
    ]


class Path(ctypes.Structure):
    """syncopate_path."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("m", ctypes.c_int64),
        ("bucket_m", ctypes.c_int64),
        ("fused", ctypes.c_int32),
        ("backend", ctypes.c_int32),
        ("chunks", ctypes.c_int32),
        ("reason", ctypes.c_char * 256),
        ("tile_parts", ctypes.c_int32),
        ("plan", ctypes.c_char * 64),
    ]


def new_struct(cls):
    s = cls()
    s.struct_size = ctypes.sizeof(cls)
    return s


OpHandle = ctypes.c_void_p  # syncopate_op*

# name: (restype, argtypes)
_SIGNATURES = {
    "syncopate_last_error": (ctypes.c_char_p, []),
    "syncopate_abi_version": (ctypes.c_int32, []),
    "syncopate_status_name": (ctypes.c_char_p, [ctypes.c_int32]),
    "syncopate_check_config": (ctypes.c_int32,
                               [ctypes.POINTER(GroupConfig), ctypes.POINTER(OpConfig)]),
    "syncopate_choose_path": (ctypes.c_int32, [ctypes.POINTER(OpConfig), ctypes.c_int32,
                                               ctypes.c_int64, ctypes.POINTER(Path)]),
    "syncopate_op_create": (ctypes.c_int32, [ctypes.POINTER(GroupConfig),
                                             ctypes.POINTER(OpConfig),
                                             ctypes.POINTER(OpHandle)]),
    "syncopate_op_run": (ctypes.c_int32, [OpHandle, ctypes.c_int64, ctypes.c_uint64,
                                          ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                                          ctypes.c_void_p]),
    "syncopate_op_synchronize": (ctypes.c_int32, [OpHandle, ctypes.c_void_p]),
    "syncopate_op_error": (ctypes.c_int32, [OpHandle]),
    "syncopate_op_path": (ctypes.c_int32, [OpHandle, ctypes.c_int64, ctypes.POINTER(Path)]),
    "syncopate_op_input_workspace": (ctypes.c_uint64, [OpHandle, ctypes.c_int64]),
    "syncopate_op_destroy": (None, [OpHandle]),
}

_lock = threading.Lock()
_lib = None


def _candidates():
    """(description, path-or-name) pairs, in the order they are tried."""
    env = os.environ.get("SYNCOPATE_LIBRARY")
    if env:
        # An explicit choice is the only one tried: falling back would hide a wrong path.
        return [("SYNCOPATE_LIBRARY=%s" % env, env)]
    found = []
    package_dir = os.path.dirname(os.path.abspath(__file__))
    # <prefix>/<dir>/syncopate -> <prefix>/lib; then the ancestors of a site-packages install
    # (<prefix>/lib/python3.X/site-packages/syncopate -> <prefix>/lib).
    seen = set()
    up = os.path.dirname(package_dir)
    for _ in range(3):
        up = os.path.dirname(up)
        lib_dir = os.path.join(up, "lib")
        if lib_dir in seen:
            continue
        seen.add(lib_dir)
        matches = sorted(glob.glob(os.path.join(lib_dir, "libsyncopate.so*")),
                         key=lambda p: (len(os.path.basename(p)), p))
        if matches:
            found.append(("%s (next to the installed package)" % matches[0], matches[0]))
        else:
            found.append(("%s/libsyncopate.so* (next to the installed package: none)" % lib_dir,
                          None))
    name = ctypes.util.find_library("syncopate")
    if name:
        found.append(("%s (ctypes.util.find_library)" % name, name))
    else:
        found.append(("ctypes.util.find_library('syncopate'): not found", None))
    return found


def _declare(handle):
    for name, (restype, argtypes) in _SIGNATURES.items():
        try:
            fn = getattr(handle, name)
        except AttributeError:
            raise SyncopateError(
                FAILED_PRECONDITION,
                "the Syncopate library %s does not export %s (built from an older header?)" %
                (handle._name, name)) from None
        fn.restype = restype
        fn.argtypes = argtypes


def lib():
    """The loaded library, loading it on first use. Raises SyncopateError when it cannot."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for description, path in _candidates():
            if path is None:
                tried.append(description)
                continue
            try:
                handle = ctypes.CDLL(path)
            except OSError as e:
                tried.append("%s: %s" % (description, e))
                continue
            _declare(handle)
            version = handle.syncopate_abi_version()
            if version != ABI_VERSION:
                raise SyncopateError(
                    FAILED_PRECONDITION,
                    "the Syncopate library %s has C ABI version %d; this package needs %d" %
                    (path, version, ABI_VERSION))
            _lib = handle
            return _lib
        raise SyncopateError(
            NOT_FOUND,
            "cannot load libsyncopate.so; set SYNCOPATE_LIBRARY to its path. Looked at: " +
            "; ".join(tried))


def library_path():
    """The path (or loader name) of the loaded library."""
    return lib()._name


def abi_version():
    return int(lib().syncopate_abi_version())


def status_name(code):
    name = lib().syncopate_status_name(int(code))
    return name.decode("utf-8", "replace") if name else "UNKNOWN(%d)" % int(code)


def last_error():
    message = lib().syncopate_last_error()
    return message.decode("utf-8", "replace") if message else ""


def check(code):
    """Raises SyncopateError for a non-zero status, with this thread's last error message."""
    if code == 0:
        return
    message = last_error() or "(no message)"
    raise SyncopateError(code, message, status_name(code))
