"""Tensor adapters: __cuda_array_interface__, DLPack, torch-like duck typing; streams."""

import sys
import unittest

from _support import FakeCAI, FakeDLPack, FakeTorchLike, capsule_name, kDLCPU, kDLFloat

from syncopate import SyncopateError, TensorInfo, current_stream, tensor_info
from syncopate.tensors import kDLCUDAHost


class CudaArrayInterfaceTest(unittest.TestCase):
    def test_fp16_matrix_accepted(self):
        info = tensor_info(FakeCAI((128, 64), ptr=0x7F0000001000), "a")
        self.assertEqual(info.ptr, 0x7F0000001000)
        self.assertEqual(info.shape, (128, 64))
        self.assertEqual(info.dtype, "fp16")
        self.assertTrue(info.contiguous)
        self.assertIsNone(info.device)
        self.assertFalse(info.is_torch)

    def test_device_where_the_object_says_it(self):
        # CuPy arrays carry .device.id; the interface itself names no device.
        self.assertEqual(tensor_info(FakeCAI((128, 64), device=1), "a").device, 1)
        self.assertIsNone(tensor_info(FakeCAI((128, 64)), "a").device)

    def test_explicit_c_contiguous_strides_accepted(self):
        info = tensor_info(FakeCAI((128, 64), strides=(128, 2)), "b")
        self.assertTrue(info.contiguous)
        # A dimension of extent 1 may carry any stride.
        self.assertTrue(tensor_info(FakeCAI((1, 64), strides=(4096, 2)), "b").contiguous)

    def _rejects(self, obj, name, *fragments):
        with self.assertRaises(SyncopateError) as cm:
            tensor_info(obj, name)
        self.assertEqual(cm.exception.code_name, "INVALID_ARGUMENT")
        self.assertIn(name, cm.exception.message)
        for fragment in fragments:
            self.assertIn(fragment, cm.exception.message)
        return cm.exception

    def test_non_contiguous_rejected(self):
        self._rejects(FakeCAI((128, 64), strides=(2, 256)), "a", "not C-contiguous")  # transpose
        self._rejects(FakeCAI((128, 64), strides=(256, 2)), "b", "not C-contiguous")  # row gaps
        self._rejects(FakeCAI((128, 64), strides=(129, 1)), "a", "not C-contiguous")  # odd bytes

    def test_three_d_rejected(self):
        self._rejects(FakeCAI((4, 128, 64)), "out", "2-D", "3 dimensions")
        self._rejects(FakeCAI((64,)), "a", "2-D")

    def test_wrong_typestr_rejected(self):
        e = self._rejects(FakeCAI((128, 64), typestr="<f4"), "a", "'<f4'")
        self.assertIn("fp16", e.message)
        e = self._rejects(FakeCAI((128, 64), typestr="<V2"), "b", "bf16", "DLPack")

    def test_read_only_output_rejected(self):
        tensor_info(FakeCAI((8, 8), readonly=True), "a")  # an input may be read-only
        self._rejects(FakeCAI((8, 8), readonly=True), "out", "read-only")
        with self.assertRaises(SyncopateError):
            tensor_info(FakeCAI((8, 8), readonly=True), "out", allow_readonly=False)

    def test_null_pointer_rejected(self):
        self._rejects(FakeCAI((8, 8), ptr=0), "a", "null")

    def test_not_a_tensor(self):
        self._rejects(object(), "b", "__dlpack__", "__cuda_array_interface__")
        self._rejects([[1.0, 2.0]], "a", "list")


class DLPackTest(unittest.TestCase):
    def test_cuda_bf16_matrix_accepted(self):
        producer = FakeDLPack((256, 128), device_id=1, data=0x7F0000200000, byte_offset=64)
        info = tensor_info(producer, "a")
        self.assertEqual(info.ptr, 0x7F0000200000 + 64)
        self.assertEqual(info.shape, (256, 128))
        self.assertEqual(info.dtype, "bf16")
        self.assertTrue(info.contiguous)
        self.assertEqual(info.device, 1)
        self.assertEqual(producer.stream_args, [None])  # __dlpack__(stream=None)

    def test_capsule_is_neither_renamed_nor_consumed(self):
        producer = FakeDLPack((4, 4))
        tensor_info(producer, "a")
        self.assertEqual(capsule_name(producer.capsules[0]), b"dltensor")

    def test_fp16_and_explicit_strides(self):
        info = tensor_info(FakeDLPack((16, 32), code=kDLFloat, strides=(32, 1)), "b")
        self.assertEqual(info.dtype, "fp16")
        self.assertTrue(info.contiguous)

    def test_cpu_rejected(self):
        for with_device_method in (True, False):
            with self.subTest(with_device_method=with_device_method):
                with self.assertRaises(SyncopateError) as cm:
                    tensor_info(FakeDLPack((16, 16), device_type=kDLCPU,
                                           with_device_method=with_device_method), "b")
                self.assertEqual(cm.exception.code_name, "INVALID_ARGUMENT")
                self.assertIn("b is not in CUDA device memory", cm.exception.message)
                self.assertIn("kDLCPU", cm.exception.message)
        with self.assertRaises(SyncopateError) as cm:
            tensor_info(FakeDLPack((16, 16), device_type=kDLCUDAHost), "a")
        self.assertIn("kDLCUDAHost", cm.exception.message)

    def test_wrong_dtype_rejected(self):
        with self.assertRaises(SyncopateError) as cm:
            tensor_info(FakeDLPack((16, 16), code=kDLFloat, bits=32), "out")
        self.assertIn("out has dtype float32", cm.exception.message)

    def test_non_contiguous_and_3d_rejected(self):
        with self.assertRaises(SyncopateError) as cm:
            tensor_info(FakeDLPack((16, 32), strides=(1, 16)), "a")
        self.assertIn("a (shape [16, 32]) is not C-contiguous", cm.exception.message)
        with self.assertRaises(SyncopateError) as cm:
            tensor_info(FakeDLPack((2, 16, 32)), "a_gathered")
        self.assertIn("a_gathered must be a 2-D matrix", cm.exception.message)

    def test_bf16_cai_object_falls_back_to_dlpack(self):
        class Both(FakeDLPack):
            __cuda_array_interface__ = {"shape": (8, 8), "typestr": "<V2",
                                        "data": (0x1000, False), "version": 3, "strides": None}
        info = tensor_info(Both((8, 8), data=0x2000), "a")
        self.assertEqual((info.dtype, info.ptr), ("bf16", 0x2000))


class TorchLikeTest(unittest.TestCase):
    def test_accepted_without_importing_torch(self):
        had_torch = "torch" in sys.modules
        info = tensor_info(FakeTorchLike((64, 32), ptr=0x7F0000300000, device=2), "a")
        self.assertEqual((info.ptr, info.shape, info.dtype, info.contiguous, info.device),
                         (0x7F0000300000, (64, 32), "bf16", True, 2))
        self.assertFalse(info.is_torch)  # the fake's module is not torch
        self.assertEqual("torch" in sys.modules, had_torch)
        self.assertEqual(tensor_info(FakeTorchLike((4, 4), dtype="torch.float16"), "b").dtype,
                         "fp16")

    def test_rejections_name_the_argument(self):
        cases = [
            (FakeTorchLike((64, 32), dtype="torch.float32"), "a", "torch.float32"),
            (FakeTorchLike((64, 32), is_cuda=False), "b", "not in CUDA device memory"),
            (FakeTorchLike((64, 32), strides=(1, 64)), "out", "not C-contiguous"),
            (FakeTorchLike((2, 64, 32)), "a", "2-D"),
        ]
        for obj, name, fragment in cases:
            with self.subTest(fragment=fragment):
                with self.assertRaises(SyncopateError) as cm:
                    tensor_info(obj, name)
                self.assertTrue(cm.exception.message.startswith(name + " "),
                                cm.exception.message)
                self.assertIn(fragment, cm.exception.message)


class CurrentStreamTest(unittest.TestCase):
    def test_none_without_torch_is_the_legacy_default_stream(self):
        self.assertEqual(current_stream(None), 0)
        self.assertEqual(current_stream(None, FakeTorchLike((2, 2))), 0)
        self.assertEqual(current_stream(None, TensorInfo(1, (2, 2), "bf16", True, 0)), 0)

    def test_handles_and_stream_objects(self):
        class TorchStreamLike:
            cuda_stream = 0x5555

        class CupyStreamLike:
            ptr = 0x6666

        self.assertEqual(current_stream(0x1234), 0x1234)
        self.assertEqual(current_stream(TorchStreamLike()), 0x5555)
        self.assertEqual(current_stream(CupyStreamLike()), 0x6666)

    def test_bad_streams_rejected(self):
        for stream in (-1, "default", 1.5, True, object()):
            with self.subTest(stream=stream):
                with self.assertRaises(SyncopateError) as cm:
                    current_stream(stream)
                self.assertEqual(cm.exception.code_name, "INVALID_ARGUMENT")
                self.assertIn("stream", cm.exception.message)


if __name__ == "__main__":
    unittest.main()
