"""The run() shape checks of ops.h, as the pure check_run_shapes."""

import unittest

from syncopate import SyncopateError, TensorInfo, check_run_shapes


def t(rows, cols, dtype="bf16", device=0):
    return TensorInfo(ptr=0x1000, shape=(rows, cols), dtype=dtype, contiguous=True,
                      device=device)


WORLD, N, K = 4, 96, 64


class ValidShapesTest(unittest.TestCase):
    def test_all_gather_matmul(self):
        m = check_run_shapes("all_gather_matmul", WORLD, N, K, "bf16", t(32, K), t(N, K),
                             t(128, N), a_gathered=t(128, K), max_m=1024)
        self.assertEqual(m, 128)
        self.assertEqual(check_run_shapes(0, WORLD, N, K, "bf16", t(1, K), t(N, K), t(4, N)), 4)

    def test_matmul_reduce_scatter(self):
        m = check_run_shapes("matmul_reduce_scatter", WORLD, N, K, "bf16", t(128, K), t(N, K),
                             t(32, N), max_m=128)
        self.assertEqual(m, 128)

    def test_matmul_all_reduce(self):
        m = check_run_shapes("matmul_all_reduce", WORLD, N, K, "fp16", t(8, K, "fp16"),
                             t(N, K, "fp16"), t(8, N, "fp16"))
        self.assertEqual(m, 8)

    def test_unknown_devices_are_not_compared(self):
        check_run_shapes("matmul_all_reduce", WORLD, N, K, "bf16", t(8, K, device=None),
                         t(N, K), t(8, N, device=None), device=0)


class InvalidShapesTest(unittest.TestCase):
    def _rejects(self, fragments, *args, **kwargs):
        with self.assertRaises(SyncopateError) as cm:
            check_run_shapes(*args, **kwargs)
        self.assertEqual(cm.exception.code_name, "INVALID_ARGUMENT")
        for fragment in fragments:
            self.assertIn(fragment, cm.exception.message)
        return cm.exception

    def test_all_gather_matmul(self):
        ag = ("all_gather_matmul", WORLD, N, K, "bf16")
        # a's columns are not k.
        self._rejects(["a has shape [32, 65]", "[m/world, 64]"], *ag, t(32, K + 1), t(N, K),
                      t(128, N))
        # b is [k, n], not [n, k].
        self._rejects(["b has shape [64, 96]", "expected [96, 64]"], *ag, t(32, K), t(K, N),
                      t(128, N))
        # out has the shard's rows, not m.
        self._rejects(["out has shape [32, 96]", "expected [128, 96]", "m = 128"], *ag,
                      t(32, K), t(N, K), t(32, N))
        self._rejects(["a_gathered has shape [32, 64]", "expected [128, 64]"], *ag, t(32, K),
                      t(N, K), t(128, N), a_gathered=t(32, K))
        self._rejects(["m = 2048 exceeds the op's max_m 1024"], *ag, t(512, K), t(N, K),
                      t(2048, N), max_m=1024)
        self._rejects(["a has shape [0, 64]", "no rows"], *ag, t(0, K), t(N, K), t(0, N))

    def test_matmul_reduce_scatter(self):
        rs = ("matmul_reduce_scatter", WORLD, N, K, "bf16")
        self._rejects(["out has shape [128, 96]", "expected [32, 96]", "[m/world, n]"], *rs,
                      t(128, K), t(N, K), t(128, N))
        self._rejects(["a has 126 rows", "not a multiple of the world size 4"], *rs,
                      t(126, K), t(N, K), t(31, N))
        self._rejects(["a_gathered is only for all_gather_matmul"], *rs, t(128, K), t(N, K),
                      t(32, N), a_gathered=t(128, K))

    def test_matmul_all_reduce(self):
        ar = ("matmul_all_reduce", WORLD, N, K, "bf16")
        self._rejects(["out has shape [32, 96]", "expected [128, 96]"], *ar, t(128, K),
                      t(N, K), t(32, N))
        self._rejects(["a has shape [128, 32]", "[m, 64]"], *ar, t(128, 32), t(N, K),
                      t(128, N))

    def test_dtype_and_device(self):
        ar = ("matmul_all_reduce", WORLD, N, K, "bf16")
        self._rejects(["b has dtype fp16", "the op's dtype is bf16"], *ar, t(8, K),
                      t(N, K, "fp16"), t(8, N))
        self._rejects(["out is on device 1", "device 0"], *ar, t(8, K), t(N, K),
                      t(8, N, device=1), device=0)
        self._rejects(["b is on device 1 but a is on device 0"], *ar, t(8, K),
                      t(N, K, device=1), t(8, N))

    def test_not_two_d(self):
        bad = TensorInfo(ptr=1, shape=(2, 8, K), dtype="bf16", contiguous=True, device=0)
        self._rejects(["a must be a 2-D matrix"], "matmul_all_reduce", WORLD, N, K, "bf16", bad,
                      t(N, K), t(16, N))

    def test_bad_kind_and_dtype(self):
        self._rejects(["kind"], "all_gather", WORLD, N, K, "bf16", t(8, K), t(N, K), t(8, N))
        self._rejects(["dtype"], "matmul_all_reduce", WORLD, N, K, "fp8", t(8, K), t(N, K),
                      t(8, N))


if __name__ == "__main__":
    unittest.main()
