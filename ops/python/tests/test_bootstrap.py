"""Group.allgather, the caller's bootstrap: the C callback over a Python allgather delivers every
rank's bytes (binary-safe) and turns an exception into UNAVAILABLE, keeping its text. No GPU: the
callback is driven here as the library drives it."""

import ctypes
import unittest

from _support import require_library

import syncopate
from syncopate import Group, SyncopateError, _lib
from syncopate.ops import _allgather_callback, _make_group_config


def drive(callback, mine):
    """Calls the C callback as syncopate_op_create would; returns (code, delivered by rank)."""
    delivered = {}

    def deliver(ctx, rank, data, length):
        delivered[rank] = ctypes.string_at(data, length)

    deliver_fn = _lib.DELIVER_FN(deliver)
    buf = ctypes.create_string_buffer(mine, len(mine))
    code = callback(None, ctypes.cast(buf, ctypes.POINTER(ctypes.c_char)), len(mine),
                    deliver_fn, None)
    return code, delivered


class BootstrapTest(unittest.TestCase):
    def setUp(self):
        require_library(self)

    def test_every_rank_is_delivered_binary_safe(self):
        seen = []

        def allgather(mine):
            seen.append(mine)
            return [mine, b"rank\x001", bytearray(b"rank 2")]

        code, delivered = drive(_allgather_callback(allgather), b"me\x00too")
        self.assertEqual(code, 0)
        self.assertEqual(seen, [b"me\x00too"])
        self.assertEqual(delivered, {0: b"me\x00too", 1: b"rank\x001", 2: b"rank 2"})

    def test_an_exception_is_unavailable_and_kept(self):
        def allgather(mine):
            raise RuntimeError("process group is gone")

        callback = _allgather_callback(allgather)
        code, delivered = drive(callback, b"x")
        self.assertEqual(code, 14)
        self.assertEqual(delivered, {})
        self.assertEqual(callback.errors, ["RuntimeError: process group is gone"])

    def test_the_group_config_carries_the_callback(self):
        config, keepalive = _make_group_config(Group("t0", 0, 2, allgather=lambda m: [m, m]))
        self.assertTrue(bool(config.bootstrap))
        self.assertIsNotNone(keepalive[2])
        config, keepalive = _make_group_config(Group("t0", 0, 2))
        self.assertFalse(bool(config.bootstrap))
        with self.assertRaises(SyncopateError) as cm:
            _make_group_config(Group("t0", 0, 2, allgather="not callable"))
        self.assertIn("group.allgather must be callable", cm.exception.message)
        self.assertTrue(callable(syncopate.torch_allgather))


if __name__ == "__main__":
    unittest.main()
