"""choose_path and the config checks: pure calls into the library, no GPU."""

import gc
import os
import unittest
from unittest import mock

from _support import has_gpu_device_files, require_library

import syncopate
from syncopate import Group, SyncopateError, _lib

KINDS = ("all_gather_matmul", "matmul_reduce_scatter", "matmul_all_reduce")


class ChoosePathTest(unittest.TestCase):
    def setUp(self):
        require_library(self)

    def test_valid_m_takes_a_bucket_at_least_m_with_a_reason(self):
        for kind in KINDS:
            for m in (4, 1000, 4096, 8192):
                with self.subTest(kind=kind, m=m):
                    p = syncopate.choose_path(kind, 4, 8192, 7168, 4096, m)
                    self.assertEqual(p.m, m)
                    self.assertGreaterEqual(p.bucket_m, m)
                    self.assertLessEqual(p.bucket_m, 8192)
                    self.assertEqual(p.bucket_m % 4, 0)
                    self.assertIn(p.backend, ("ce", "sm"))
                    self.assertGreaterEqual(p.chunks, 1)
                    self.assertTrue(p.reason)
                    self.assertIn("bucket M %d" % p.bucket_m, p.reason)

    def test_path_preference_and_options_reach_the_library(self):
        p = syncopate.choose_path("matmul_reduce_scatter", 2, 4096, 1024, 1024, 4096,
                                  path="fused", chunks=4)
        self.assertTrue(p.fused)
        self.assertEqual(p.chunks, 4)
        self.assertIn("config asks", p.reason)
        p = syncopate.choose_path("all_gather_matmul", 2, 4096, 1024, 1024, 4096,
                                  path="unfused", backend="ce")
        self.assertFalse(p.fused)
        self.assertEqual(p.backend, "ce")

    def test_the_path_names_each_buckets_plan(self):
        # The developer knob would take one plan for every AllReduce bucket.
        with mock.patch.dict(os.environ):
            os.environ.pop("SYNCOPATE_OPS_ALLREDUCE_PLAN", None)
            self._check_plans()

    def _check_plans(self):
        for kind, plan in (("all_gather_matmul", "allgather.push"),
                           ("matmul_reduce_scatter", "reducescatter.direct")):
            self.assertEqual(syncopate.choose_path(kind, 2, 4096, 1024, 1024, 4096).plan, plan)
        # An AllReduce's C of 1 MiB (128 x 4096 bf16) takes direct_out, 64 MiB direct.
        small = syncopate.choose_path("matmul_all_reduce", 2, 8192, 4096, 1024, 128,
                                      m_buckets=[128])
        self.assertEqual(small.plan, "allreduce.direct_out")
        self.assertTrue(small.reason.endswith("; plan allreduce.direct_out"))
        big = syncopate.choose_path("matmul_all_reduce", 2, 8192, 4096, 1024, 8192)
        self.assertEqual(big.plan, "allreduce.direct")

    def test_tile_parts_reach_the_library(self):
        self.assertTrue(syncopate.choose_path("matmul_reduce_scatter", 2, 4096, 1024, 1024,
                                              4096, path="fused").tile_parts)  # on by default
        p = syncopate.choose_path("matmul_reduce_scatter", 2, 4096, 1024, 1024, 4096,
                                  path="fused", tile_parts=True)
        self.assertTrue(p.tile_parts)
        self.assertIn("tile parts", p.reason)
        p = syncopate.choose_path("matmul_reduce_scatter", 2, 4096, 1024, 1024, 4096,
                                  path="fused", tile_parts=False)
        self.assertFalse(p.tile_parts)
        self.assertFalse(syncopate.choose_path("matmul_all_reduce", 2, 4096, 1024, 1024, 4096,
                                               path="fused", tile_parts=True).tile_parts)
        with self.assertRaises(SyncopateError) as cm:
            syncopate.choose_path("matmul_reduce_scatter", 2, 4096, 1024, 1024, 4096,
                                  tile_parts=1)
        self.assertIn("tile_parts", str(cm.exception))

    def test_explicit_buckets(self):
        p = syncopate.choose_path("all_gather_matmul", 2, 4096, 64, 64, 100,
                                  m_buckets=[128, 1024])
        self.assertEqual(p.bucket_m, 128)
        p = syncopate.choose_path("all_gather_matmul", 2, 4096, 64, 64, 1026,
                                  m_buckets=[128, 1024])
        self.assertEqual(p.bucket_m, 4096)

    def test_bucket_paths_win_over_the_heuristic(self):
        paths = [{"bucket_m": 128, "fused": True, "backend": "ce", "chunks": 2}]
        p = syncopate.choose_path("all_gather_matmul", 2, 4096, 64, 64, 100,
                                  m_buckets=[128, 1024], bucket_paths=paths)
        self.assertTrue(p.fused)
        self.assertEqual((p.backend, p.chunks), ("ce", 2))
        self.assertIn("set for this bucket", p.reason)
        with self.assertRaises(SyncopateError) as cm:
            syncopate.choose_path("all_gather_matmul", 2, 4096, 64, 64, 100,
                                  m_buckets=[128, 1024], bucket_paths=[{"bucket_m": 256}])
        self.assertIn("op.bucket_paths[0] (bucket M 256) is not one of the op's buckets",
                      cm.exception.message)
        with self.assertRaises(SyncopateError) as cm:
            syncopate.choose_path("all_gather_matmul", 2, 4096, 64, 64, 100,
                                  bucket_paths=[{"bucket_m": 4096, "speed": 1}])
        self.assertIn("unknown keys ['speed']", cm.exception.message)

    def test_invalid_m_is_invalid_argument_naming_m(self):
        for m, why in ((6, "not a multiple of world 4"), (8196, "> max_m"), (0, "zero"),
                       (-4, "negative")):
            with self.subTest(m=m, why=why):
                with self.assertRaises(SyncopateError) as cm:
                    syncopate.choose_path("all_gather_matmul", 4, 8192, 7168, 4096, m)
                self.assertEqual(cm.exception.code_name, "INVALID_ARGUMENT")
                self.assertEqual(cm.exception.code, 3)
                self.assertIn("m %d" % m, cm.exception.message)

    def test_bad_world_names_group_world(self):
        with self.assertRaises(SyncopateError) as cm:
            syncopate.choose_path("all_gather_matmul", 0, 8192, 7168, 4096, 8)
        self.assertEqual(cm.exception.code_name, "INVALID_ARGUMENT")
        self.assertIn("group.world", cm.exception.message)


class CheckConfigTest(unittest.TestCase):
    def setUp(self):
        require_library(self)

    def test_rendezvous_dir_reaches_the_library(self):
        syncopate.check_config(Group("t0", 0, 2, rendezvous_dir="/run/syncopate"),
                               "all_gather_matmul", 8192, 1024, 1024)
        with self.assertRaises(SyncopateError) as cm:
            syncopate.check_config(Group("t0", 0, 2, rendezvous_dir="run/syncopate"),
                                   "all_gather_matmul", 8192, 1024, 1024)
        self.assertIn("group.rendezvous_dir 'run/syncopate' must be an absolute path",
                      cm.exception.message)

    def test_valid_config_passes(self):
        syncopate.check_config(Group("tp0", 1, 4), "matmul_all_reduce", 8192, 7168, 4096)

    def test_bad_world_names_group_world(self):
        for world in (0, -1, 65):
            with self.subTest(world=world):
                with self.assertRaises(SyncopateError) as cm:
                    syncopate.check_config(Group("tp0", 0, world), "all_gather_matmul", 8192,
                                           7168, 4096)
                self.assertEqual(cm.exception.code_name, "INVALID_ARGUMENT")
                self.assertIn("group.world", cm.exception.message)

    def test_fields_are_named(self):
        cases = [
            (dict(group=Group("bad job!", 0, 2)), {}, "group.job"),
            (dict(group=Group("tp0", 2, 2)), {}, "group.rank"),
            (dict(group=Group("tp0", 0, 2, device=-1)), {}, "group.device"),
            (dict(max_m=8191), {}, "op.max_m"),
            (dict(n=0), {}, "op.n"),
            (dict(k=1 << 21), {}, "op.k"),
            ({}, dict(chunks=9), "op.chunks"),
            ({}, dict(comm_ctas=-1), "op.comm_ctas"),
            ({}, dict(timeout_ms=-5), "op.timeout_ms"),
            ({}, dict(m_buckets=[101]), "op.m_buckets"),
        ]
        for args, options, field in cases:
            with self.subTest(field=field):
                call = dict(group=Group("tp0", 0, 2), kind="all_gather_matmul", max_m=8192,
                            n=1024, k=1024)
                call.update(args)
                with self.assertRaises(SyncopateError) as cm:
                    syncopate.check_config(**call, **options)
                self.assertEqual(cm.exception.code_name, "INVALID_ARGUMENT")
                self.assertIn(field, cm.exception.message)

    def test_copy_engine_cannot_reduce(self):
        for kind in ("matmul_reduce_scatter", "matmul_all_reduce"):
            with self.subTest(kind=kind):
                with self.assertRaises(SyncopateError) as cm:
                    syncopate.check_config(Group("tp0", 0, 2), kind, 4096, 1024, 1024,
                                           backend="ce")
                self.assertEqual(cm.exception.code_name, "INVALID_ARGUMENT")
                self.assertIn("ce", cm.exception.message)
                self.assertIn(kind, cm.exception.message)
        # ...while an AllGather may use it.
        syncopate.check_config(Group("tp0", 0, 2), "all_gather_matmul", 4096, 1024, 1024,
                               backend="ce")


class PythonSideChecksTest(unittest.TestCase):
    """Errors found before any call into the library (which must not even be loaded)."""

    def _no_library(self):
        return mock.patch.object(_lib, "lib", side_effect=AssertionError("library called"))

    def test_bad_dtype_rejected_in_python(self):
        for dtype in ("fp32", "float32", "int8", "", None, 0):
            with self.subTest(dtype=dtype), self._no_library():
                with self.assertRaises(SyncopateError) as cm:
                    syncopate.choose_path("all_gather_matmul", 2, 4096, 64, 64, 64, dtype=dtype)
                self.assertEqual(cm.exception.code_name, "INVALID_ARGUMENT")
                self.assertIn("dtype", cm.exception.message)
                with self.assertRaises(SyncopateError) as cm:
                    syncopate.AllGatherMatmul(Group("tp0", 0, 2), 4096, 64, 64, dtype=dtype)
                self.assertIn("dtype", cm.exception.message)

    def test_a_bad_dtype_names_what_had_it(self):
        from syncopate.ops import normalize_dtype
        with self.assertRaises(SyncopateError) as cm:
            normalize_dtype("torch.float32", "A's dtype")
        self.assertIn("A's dtype 'torch.float32' is not supported", cm.exception.message)

    def test_dtype_spellings(self):
        from syncopate.ops import normalize_dtype
        self.assertEqual(normalize_dtype("bf16"), "bf16")
        self.assertEqual(normalize_dtype("bfloat16"), "bf16")
        self.assertEqual(normalize_dtype("FP16"), "fp16")
        self.assertEqual(normalize_dtype("float16"), "fp16")

    def test_bad_names_and_types_rejected_in_python(self):
        cases = [
            (dict(kind="all_gather"), "kind"),
            (dict(backend="nvlink"), "backend"),
            (dict(path="fastest"), "path"),
            (dict(m_buckets=list(range(2, 36, 2))), "m_buckets"),
            (dict(max_m="8192"), "max_m"),
            (dict(chunks=1.5), "chunks"),
            # Too large for the C field: ctypes would wrap them (2**64 + 8192 to 8192) silently.
            (dict(max_m=2**64 + 8192), "max_m 18446744073709559808 does not fit a 64-bit"),
            (dict(m=2**64 + 64), "m 18446744073709551680 does not fit"),
            (dict(world=2**32 + 2), "world 4294967298 does not fit a 32-bit field"),
            (dict(chunks=2**31), "chunks 2147483648 does not fit"),
        ]
        for override, field in cases:
            with self.subTest(field=field), self._no_library():
                call = dict(kind="all_gather_matmul", world=2, max_m=4096, n=64, k=64, m=64)
                call.update(override)
                with self.assertRaises(SyncopateError) as cm:
                    syncopate.choose_path(**call)
                self.assertEqual(cm.exception.code_name, "INVALID_ARGUMENT")
                self.assertIn(field, cm.exception.message)

    def test_group_must_be_a_group(self):
        with self._no_library(), self.assertRaises(SyncopateError) as cm:
            syncopate.MatmulAllReduce(("tp0", 0, 2), 4096, 64, 64)
        self.assertIn("group", cm.exception.message)

    def test_group_fields_that_do_not_fit_are_named(self):
        # Rank 2**32 + 1 would reach the library as rank 1.
        with self._no_library(), self.assertRaises(SyncopateError) as cm:
            syncopate.MatmulAllReduce(syncopate.Group("tp0", 2**32 + 1, 2), 4096, 64, 64)
        self.assertEqual(cm.exception.code_name, "INVALID_ARGUMENT")
        self.assertIn("group.rank 4294967297 does not fit a 32-bit field", cm.exception.message)


class CreateWithoutGpuTest(unittest.TestCase):
    def setUp(self):
        require_library(self)

    def test_create_without_gpu_is_unavailable(self):
        if has_gpu_device_files():
            self.skipTest("this machine has NVIDIA device files: creating an op would use them")
        for cls in (syncopate.AllGatherMatmul, syncopate.MatmulReduceScatter,
                    syncopate.MatmulAllReduce):
            with self.subTest(op=cls.__name__):
                with self.assertRaises(SyncopateError) as cm:
                    cls(Group("pytest-nogpu", 0, 1), 1024, 256, 256)
                self.assertEqual(cm.exception.code_name, "UNAVAILABLE")
                self.assertEqual(cm.exception.code, 14)
                self.assertIn("no usable GPU", cm.exception.message)
                self.assertIn(cls.KIND, cm.exception.message)
        gc.collect()  # the half-built objects' __del__ must be harmless

    def test_config_error_comes_before_the_gpu(self):
        # The pure check runs first, so a bad config names its field even without a GPU.
        with self.assertRaises(SyncopateError) as cm:
            syncopate.MatmulReduceScatter(Group("tp0", 0, 2), 4096, 64, 64, backend="ce")
        self.assertEqual(cm.exception.code_name, "INVALID_ARGUMENT")
        self.assertIn("ce", cm.exception.message)
        with self.assertRaises(SyncopateError) as cm:
            syncopate.AllGatherMatmul(Group("tp0", 0, 0), 4096, 64, 64)
        self.assertIn("group.world", cm.exception.message)


class ErrorTest(unittest.TestCase):
    def test_error_fields_and_pickling(self):
        import pickle
        e = SyncopateError(3, "m 6 is not a positive multiple")
        self.assertEqual(e.code_name, "INVALID_ARGUMENT")
        self.assertIn("m 6", str(e))
        again = pickle.loads(pickle.dumps(e))
        self.assertEqual((again.code, again.code_name, again.message),
                         (e.code, e.code_name, e.message))


if __name__ == "__main__":
    unittest.main()
