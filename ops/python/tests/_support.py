"""Shared helpers of the syncopate package tests (no GPU, no torch needed)."""

import ctypes
import os
import sys
import unittest

# Run from a checkout without PYTHONPATH: the package is ../syncopate.
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if PACKAGE_ROOT not in sys.path:
    sys.path.insert(0, PACKAGE_ROOT)

import syncopate  # noqa: E402
from syncopate import _lib  # noqa: E402


def require_library(test):
    """Skips `test` when the library cannot be found and SYNCOPATE_LIBRARY is not set (ctest
    sets it: there a library that does not load is a failure, not a skip)."""
    if os.environ.get("SYNCOPATE_LIBRARY"):
        _lib.lib()
        return
    try:
        _lib.lib()
    except syncopate.SyncopateError as e:
        test.skipTest("libsyncopate.so not found (set SYNCOPATE_LIBRARY): %s" % e)


def has_gpu_device_files():
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")


class FakeCAI:
    """An object with __cuda_array_interface__ (version 3)."""

    class _Device:  # CuPy's cupy.cuda.Device: the ordinal is .id
        def __init__(self, ordinal):
            self.id = ordinal

    def __init__(self, shape, typestr="<f2", ptr=0x7F0000000000, strides=None, readonly=False,
                 device=None, stream=None):
        if device is not None:
            self.device = FakeCAI._Device(device)
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "typestr": typestr,
            "data": (ptr, readonly),
            "version": 3,
            "strides": strides,
        }
        if stream is not None:
            self.__cuda_array_interface__["stream"] = stream


class FakeTorchLike:
    """Duck-typed like a torch tensor (its module is not torch, so torch is never consulted)."""

    class _Device:
        def __init__(self, index):
            self.index = index
            self.type = "cuda" if index is not None else "cpu"

        def __str__(self):
            return self.type if self.index is None else "%s:%d" % (self.type, self.index)

    def __init__(self, shape, dtype="torch.bfloat16", ptr=0x7F0000100000, strides=None,
                 is_cuda=True, device=0):
        self.shape = tuple(shape)
        self.dtype = dtype
        self._ptr = ptr
        if strides is None:
            strides, acc = [], 1
            for d in reversed(self.shape):
                strides.insert(0, acc)
                acc *= d
        self._strides = tuple(strides)
        self.is_cuda = is_cuda
        self.device = FakeTorchLike._Device(device if is_cuda else None)

    def data_ptr(self):
        return self._ptr

    def stride(self):
        return self._strides


# --- a DLPack producer built in ctypes memory ---------------------------------------------

from syncopate.tensors import (DLManagedTensor, kDLBfloat, kDLCPU, kDLCUDA,  # noqa: E402
                               kDLFloat)

_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_PyCapsule_GetName = ctypes.pythonapi.PyCapsule_GetName
_PyCapsule_GetName.restype = ctypes.c_char_p
_PyCapsule_GetName.argtypes = [ctypes.py_object]


class FakeDLPack:
    """A DLPack producer: __dlpack__ returns a "dltensor" capsule over a DLManagedTensor built
    in ctypes memory (kept alive by this object; the capsule has no destructor)."""

    _NAME = ctypes.create_string_buffer(b"dltensor")  # outlives every capsule

    def __init__(self, shape, device_type=kDLCUDA, device_id=0, code=kDLBfloat, bits=16,
                 data=0x7F0000200000, strides=None, byte_offset=0, with_device_method=True):
        ndim = len(shape)
        self._shape = (ctypes.c_int64 * max(ndim, 1))(*shape)
        self._strides = None if strides is None else (ctypes.c_int64 * max(ndim, 1))(*strides)
        m = DLManagedTensor()
        t = m.dl_tensor
        t.data = data
        t.device.device_type = device_type
        t.device.device_id = device_id
        t.ndim = ndim
        t.dtype.code = code
        t.dtype.bits = bits
        t.dtype.lanes = 1
        t.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        if self._strides is not None:
            t.strides = ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64))
        t.byte_offset = byte_offset
        self._managed = m
        self.capsules = []
        self.stream_args = []
        if with_device_method:
            self.__dlpack_device__ = lambda: (device_type, device_id)

    def __dlpack__(self, stream=None):
        self.stream_args.append(stream)
        capsule = _PyCapsule_New(ctypes.addressof(self._managed),
                                 ctypes.addressof(FakeDLPack._NAME), None)
        self.capsules.append(capsule)
        return capsule


def capsule_name(capsule):
    return _PyCapsule_GetName(capsule)


__all__ = ["FakeCAI", "FakeDLPack", "FakeTorchLike", "capsule_name", "has_gpu_device_files",
           "require_library", "kDLBfloat", "kDLCPU", "kDLCUDA", "kDLFloat", "unittest"]
