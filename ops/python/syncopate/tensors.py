"""Framework tensors -> what the C ABI takes: a device pointer, a shape and a dtype.

Three kinds of objects are understood, none of them imported:
  - torch-like tensors (duck typing: data_ptr(), dtype, shape, stride(), is_cuda, device.index);
  - __cuda_array_interface__ (CuPy, Numba, ...; fp16 only: bf16 has no typestr);
  - __dlpack__ (any DLPack producer; the capsule is read, never consumed or renamed).
The ops need CUDA device memory holding a C-contiguous (row-major) 2-D bf16 or fp16 matrix;
anything else is a SyncopateError(INVALID_ARGUMENT) naming the argument and what is wrong.
"""

import ctypes
import sys
from typing import NamedTuple, Optional, Tuple

from .errors import invalid_argument

_ELEMENT_SIZE = {"bf16": 2, "fp16": 2}


class TensorInfo(NamedTuple):
    """What the ops need to know of a tensor. A named tuple, not a frozen dataclass: every run
    call makes three, and each took about 1 us longer as a frozen dataclass (CPython 3.11)."""
    ptr: int                  # device address of element [0, 0]
    shape: Tuple[int, ...]
    dtype: str                # "bf16" or "fp16"
    contiguous: bool          # C-contiguous (row-major, no gaps)
    device: Optional[int]     # CUDA device ordinal; None where the interface does not say
    is_torch: bool = False
    readonly: bool = False
    # __cuda_array_interface__'s "stream": where the producer's work on it is ordered (1: the
    # legacy default stream, 2: per-thread default, else a handle); None: nothing to order.
    stream: Optional[int] = None


def _c_contiguous(shape, strides):
    """Whether `strides` (in elements; None: compact) describe a C-contiguous layout. Strides of
    dimensions of extent 1 do not matter, and an empty tensor is contiguous."""
    if strides is None:
        return True
    if len(strides) != len(shape):
        return False
    if any(d == 0 for d in shape):
        return True
    expected = 1
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


_OUTPUTS = ("out", "a_gathered")


def _require(info, name, allow_readonly=None):
    """The checks every adapter shares: CUDA memory, 2-D, C-contiguous, a pointer, writable
    where the op writes (allow_readonly None: unless `name` is an output's)."""
    if allow_readonly is None:
        allow_readonly = name not in _OUTPUTS
    if len(info.shape) != 2:
        raise invalid_argument("%s must be a 2-D matrix; it has %d dimensions (shape %s)" %
                               (name, len(info.shape), list(info.shape)))
    if not info.contiguous:
        raise invalid_argument(
            "%s (shape %s) is not C-contiguous (row-major, no gaps); make it contiguous first "
            "(e.g. .contiguous())" % (name, list(info.shape)))
    if info.ptr == 0 and all(d > 0 for d in info.shape):
        raise invalid_argument("%s has a null data pointer" % name)
    if info.readonly and not allow_readonly:
        raise invalid_argument("%s is read-only; the op writes it" % name)
    return info


# --- torch-like ----------------------------------------------------------------------------

_TORCH_DTYPES = {"torch.bfloat16": "bf16", "torch.float16": "fp16"}


def _is_torch_like(obj):
    return all(hasattr(obj, attr) for attr in ("data_ptr", "dtype", "shape", "stride", "is_cuda"))


def _is_torch_object(obj):
    module = type(obj).__module__ or ""
    return module == "torch" or module.startswith("torch.")


def _from_torch_like(obj, name):
    dtype_name = str(obj.dtype)
    dtype = _TORCH_DTYPES.get(dtype_name)
    if dtype is None:
        raise invalid_argument("%s has dtype %s; the ops take torch.bfloat16 or torch.float16" %
                               (name, dtype_name))
    if not obj.is_cuda:
        device = getattr(obj, "device", None)
        raise invalid_argument("%s is not in CUDA device memory (device %s); move it with "
                               ".cuda()" % (name, device))
    shape = tuple(map(int, obj.shape))
    strides = tuple(map(int, obj.stride()))
    device = getattr(getattr(obj, "device", None), "index", None)
    return TensorInfo(ptr=int(obj.data_ptr()), shape=shape, dtype=dtype,
                      contiguous=_c_contiguous(shape, strides),
                      device=None if device is None else int(device),
                      is_torch=_is_torch_object(obj))


# --- __cuda_array_interface__ --------------------------------------------------------------

_CAI_TYPESTRS = {"<f2": "fp16"}


class _NeedsDLPack(Exception):
    pass


def _from_cai(obj, name):
    cai = obj.__cuda_array_interface__
    typestr = cai.get("typestr")
    dtype = _CAI_TYPESTRS.get(typestr)
    if dtype is None:
        if typestr in ("<V2", "|V2"):
            raise _NeedsDLPack(
                "%s: __cuda_array_interface__ typestr %r is a 2-byte void type; bf16 cannot be "
                "expressed through __cuda_array_interface__: pass a DLPack-capable tensor "
                "(__dlpack__) or a torch tensor" % (name, typestr))
        raise _NeedsDLPack(
            "%s: __cuda_array_interface__ typestr %r is not supported; the ops take fp16 ('<f2') "
            "through it, and bf16 only through DLPack (__dlpack__) or torch tensors" %
            (name, typestr))
    if cai.get("mask") is not None:
        raise invalid_argument("%s: masked __cuda_array_interface__ arrays are not supported" %
                               name)
    shape = tuple(int(d) for d in cai["shape"])
    data = cai.get("data")
    if not data:
        raise invalid_argument("%s: __cuda_array_interface__ has no data" % name)
    ptr, readonly = int(data[0] or 0), bool(data[1])
    strides = cai.get("strides")
    itemsize = _ELEMENT_SIZE[dtype]
    if strides is not None:
        if any(int(s) % itemsize for s in strides):
            contiguous = False
        else:
            contiguous = _c_contiguous(shape, tuple(int(s) // itemsize for s in strides))
    else:
        contiguous = True
    return TensorInfo(ptr=ptr, shape=shape, dtype=dtype, contiguous=contiguous,
                      device=_cai_device(obj), readonly=readonly, stream=_cai_stream(cai, name))


def _cai_stream(cai, name):
    stream = cai.get("stream")
    if stream is None:
        return None
    if isinstance(stream, bool) or not isinstance(stream, int) or stream <= 0:
        # 0 is disallowed by the interface (ambiguous between None and a default stream).
        raise invalid_argument("%s: __cuda_array_interface__ stream %r is not None, 1, 2 or a "
                               "stream handle" % (name, stream))
    return stream


def _cai_device(obj):
    """The device ordinal of a __cuda_array_interface__ object where it says (CuPy: .device.id;
    an int .device), else None (unknown: not compared). The interface itself carries no device,
    and an output on another GPU than the op's would be written through a foreign address."""
    device = getattr(obj, "device", None)
    ordinal = getattr(device, "id", device)
    if isinstance(ordinal, int) and not isinstance(ordinal, bool) and ordinal >= 0:
        return ordinal
    return None


# --- DLPack --------------------------------------------------------------------------------

kDLCPU = 1
kDLCUDA = 2
kDLCUDAHost = 3
kDLCUDAManaged = 13
kDLInt = 0
kDLUInt = 1
kDLFloat = 2
kDLBfloat = 4

_DL_DEVICE_NAMES = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL",
                    7: "kDLVulkan", 8: "kDLMetal", 9: "kDLVPI", 10: "kDLROCM",
                    11: "kDLROCMHost", 13: "kDLCUDAManaged", 14: "kDLOneAPI"}
_DL_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 3: "opaque_handle", 4: "bfloat",
                  5: "complex", 6: "bool"}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _DELETER), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


DLPACK_FLAG_BITMASK_READ_ONLY = 1

_capsule_api = None


def _capsule_functions():
    global _capsule_api
    if _capsule_api is None:
        api = ctypes.pythonapi
        get_pointer = api.PyCapsule_GetPointer
        get_pointer.restype = ctypes.c_void_p
        get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        is_valid = api.PyCapsule_IsValid
        is_valid.restype = ctypes.c_int
        is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
        _capsule_api = (get_pointer, is_valid)
    return _capsule_api


def _dl_dtype_name(dtype):
    base = _DL_CODE_NAMES.get(dtype.code, "code%d" % dtype.code)
    name = "%s%d" % (base, dtype.bits)
    return name if dtype.lanes == 1 else "%sx%d" % (name, dtype.lanes)


def read_dlpack_capsule(capsule, name):
    """A TensorInfo from a DLPack capsule ("dltensor" or "dltensor_versioned"), read in place:
    the capsule is neither renamed nor consumed, so its producer still frees it."""
    get_pointer, is_valid = _capsule_functions()
    readonly = False
    if is_valid(capsule, b"dltensor"):
        managed = DLManagedTensor.from_address(get_pointer(capsule, b"dltensor"))
        tensor = managed.dl_tensor
    elif is_valid(capsule, b"dltensor_versioned"):
        managed = DLManagedTensorVersioned.from_address(
            get_pointer(capsule, b"dltensor_versioned"))
        tensor = managed.dl_tensor
        readonly = bool(managed.flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    else:
        raise invalid_argument("%s: __dlpack__ did not return an unconsumed 'dltensor' capsule" %
                               name)
    device_type = tensor.device.device_type
    if device_type != kDLCUDA:
        raise invalid_argument(
            "%s is not in CUDA device memory (DLPack device %s); the ops need kDLCUDA" %
            (name, _DL_DEVICE_NAMES.get(device_type, str(device_type))))
    dtype = tensor.dtype
    if dtype.lanes == 1 and dtype.bits == 16 and dtype.code == kDLBfloat:
        dtype_name = "bf16"
    elif dtype.lanes == 1 and dtype.bits == 16 and dtype.code == kDLFloat:
        dtype_name = "fp16"
    else:
        raise invalid_argument("%s has dtype %s; the ops take bf16 or fp16" %
                               (name, _dl_dtype_name(dtype)))
    ndim = int(tensor.ndim)
    if ndim < 0 or ndim > 64:
        raise invalid_argument("%s: DLPack ndim %d is not valid" % (name, ndim))
    shape = tuple(int(tensor.shape[i]) for i in range(ndim)) if ndim else ()
    strides = None
    if tensor.strides:
        strides = tuple(int(tensor.strides[i]) for i in range(ndim))
    ptr = (tensor.data or 0) + int(tensor.byte_offset)
    return TensorInfo(ptr=ptr, shape=shape, dtype=dtype_name,
                      contiguous=_c_contiguous(shape, strides),
                      device=int(tensor.device.device_id), readonly=readonly)


def _from_dlpack(obj, name, consumer_stream=None):
    device = getattr(obj, "__dlpack_device__", None)
    if device is not None:
        device_type, _ = device()
        if int(device_type) != kDLCUDA:
            raise invalid_argument(
                "%s is not in CUDA device memory (DLPack device %s); the ops need kDLCUDA" %
                (name, _DL_DEVICE_NAMES.get(int(device_type), str(device_type))))
    # The stream the op will run on, so the producer orders its work before it (DLPack spells
    # the legacy default stream 1; None: the producer assumes the legacy default stream).
    dl_stream = None if consumer_stream is None else (consumer_stream or 1)
    try:
        capsule = obj.__dlpack__(stream=dl_stream)
    except TypeError as e:  # producers of DLPack before the stream argument
        if "stream" not in str(e):
            raise
        capsule = obj.__dlpack__()
    # `capsule` stays referenced until read_dlpack_capsule returns; the memory it describes is
    # the caller's `obj`, which the caller keeps alive.
    info = read_dlpack_capsule(capsule, name)
    del capsule
    return info


# --- entry points --------------------------------------------------------------------------

def tensor_info(obj, name, allow_readonly=None, consumer_stream=None):
    """The TensorInfo of `obj`, checked to be a C-contiguous 2-D bf16/fp16 CUDA matrix. `name`
    ("a", "b", "out", ...) names the argument in errors. allow_readonly None: read-only memory
    is fine unless `name` is an output ("out", "a_gathered"). consumer_stream: the handle the op
    will run on where already known (a DLPack producer orders its work before it)."""
    if isinstance(obj, TensorInfo):
        return _require(obj, name, allow_readonly)
    if _is_torch_like(obj):
        return _require(_from_torch_like(obj, name), name, allow_readonly)
    cai_problem = None
    if hasattr(obj, "__cuda_array_interface__"):
        try:
            return _require(_from_cai(obj, name), name, allow_readonly)
        except _NeedsDLPack as e:
            cai_problem = str(e)
    if hasattr(obj, "__dlpack__"):
        return _require(_from_dlpack(obj, name, consumer_stream), name, allow_readonly)
    if cai_problem is not None:
        raise invalid_argument(cai_problem)
    raise invalid_argument(
        "%s (a %s) is not a tensor the ops understand: pass a torch tensor, an object with "
        "__cuda_array_interface__ (fp16) or one with __dlpack__" %
        (name, type(obj).__module__ + "." + type(obj).__qualname__))


def producers_stream(infos):
    """For a run given no stream, of tensors that are not torch's: the one stream their
    __cuda_array_interface__ says their producers' work is ordered on (CAI v3: the consumer
    enqueues on it), as a handle (0 for the legacy default stream); None if none says.
    INVALID_ARGUMENT naming them if they say different streams: this package cannot order one
    stream after another, so the caller passes stream= after ordering them."""
    said = [(name, info.stream) for name, info in infos if info is not None and
            info.stream is not None]
    streams = {stream for _, stream in said}
    if not streams:
        return None
    if len(streams) > 1:
        raise invalid_argument(
            "the tensors' __cuda_array_interface__ name different streams (%s); pass stream= "
            "(after ordering the producers' work before it)" %
            ", ".join("%s: %#x" % (name, stream) for name, stream in said))
    stream = streams.pop()
    return 0 if stream == 1 else stream


def current_stream(stream=None, tensor=None):
    """The CUstream handle (an int; 0 is the legacy default stream) to run on.

    stream: None (torch's current stream on the tensor's device when `tensor` is a torch tensor
    and torch is imported; else 0), an int handle, or an object with .cuda_stream (torch, CuPy's
    .ptr too)."""
    if stream is None:
        is_torch = tensor.is_torch if isinstance(tensor, TensorInfo) else (
            tensor is not None and _is_torch_object(tensor))
        torch = sys.modules.get("torch")
        if is_torch and torch is not None:
            device = tensor.device if isinstance(tensor, TensorInfo) else tensor.device.index
            if device is None:
                return int(torch.cuda.current_stream().cuda_stream)
            return int(torch.cuda.current_stream(device).cuda_stream)
        return 0
    if isinstance(stream, bool):
        raise invalid_argument("stream must be None, an int handle or a stream object, not a "
                               "bool")
    if isinstance(stream, int):
        if stream < 0:
            raise invalid_argument("stream handle %d is negative" % stream)
        return stream
    for attr in ("cuda_stream", "ptr"):
        handle = getattr(stream, attr, None)
        if isinstance(handle, int) and not isinstance(handle, bool):
            return handle
    raise invalid_argument(
        "stream (a %s) is neither None, an int handle nor an object with .cuda_stream" %
        type(stream).__qualname__)
