"""The op object's Python side (run's argument handling, close-once, context manager) over a
stand-in for the library: no GPU can build a real op here."""

import gc
import unittest

from _support import FakeCAI, FakeDLPack, FakeTorchLike

import syncopate
from syncopate import Group, SyncopateError


class FakeLib:
    """Records the op calls a real library would get."""

    def __init__(self):
        self.runs = []
        self.syncs = []
        self.destroyed = []

    def syncopate_op_run(self, handle, m, a, b, c, a_gathered, stream):
        self.runs.append((handle.value, m, a, b, c, a_gathered, stream.value))
        return 0

    def syncopate_op_synchronize(self, handle, stream):
        self.syncs.append(stream.value)
        return 0

    def syncopate_op_destroy(self, handle):
        self.destroyed.append(handle.value)


def fake_op(cls, world=4, max_m=1024, n=96, k=64, dtype="fp16", device=0):
    """An op object as the constructor leaves it, over FakeLib (the constructor itself would
    need a GPU)."""
    op = cls.__new__(cls)
    op.group = Group("fake", 0, world, device=device)
    op.max_m, op.n, op.k, op.dtype = max_m, n, k, dtype
    op._last_stream = 0
    op._lib = FakeLib()
    op._handle = syncopate.ops._lib.OpHandle(0xABC)
    return op


class RunTest(unittest.TestCase):
    def test_all_gather_run_passes_m_and_pointers(self):
        op = fake_op(syncopate.AllGatherMatmul)
        op.run(FakeCAI((32, 64), ptr=0xA000), FakeCAI((96, 64), ptr=0xB000),
               FakeCAI((128, 96), ptr=0xC000), a_gathered=FakeCAI((128, 64), ptr=0xD000),
               stream=0x77)
        self.assertEqual(op._lib.runs, [(0xABC, 128, 0xA000, 0xB000, 0xC000, 0xD000, 0x77)])

    def test_default_stream_and_no_gathered(self):
        op = fake_op(syncopate.MatmulReduceScatter)
        op.run(FakeCAI((128, 64), ptr=0xA000), FakeCAI((96, 64), ptr=0xB000),
               FakeCAI((32, 96), ptr=0xC000))
        self.assertEqual(op._lib.runs, [(0xABC, 128, 0xA000, 0xB000, 0xC000, 0, None)])
        op.synchronize()
        op.synchronize(stream=0x99)
        self.assertEqual(op._lib.syncs, [None, 0x99])

    def test_an_output_on_another_gpu_is_refused_before_the_library(self):
        op = fake_op(syncopate.MatmulReduceScatter, device=0)
        with self.assertRaises(SyncopateError) as cm:
            op.run(FakeCAI((128, 64)), FakeCAI((96, 64)), FakeCAI((32, 96), device=1))
        self.assertEqual(cm.exception.code_name, "INVALID_ARGUMENT")
        self.assertIn("out is on device 1; the op's group is on device 0", cm.exception.message)
        self.assertEqual(op._lib.runs, [])

    def test_synchronize_waits_for_the_stream_the_last_run_took(self):
        # Not whatever stream is current when synchronize() is called: a run inside
        # `with torch.cuda.stream(s)` synchronized outside it must still wait for s.
        op = fake_op(syncopate.MatmulReduceScatter)
        op.run(FakeCAI((128, 64)), FakeCAI((96, 64)), FakeCAI((32, 96)), stream=0x55)
        op.synchronize()
        op.run(FakeCAI((128, 64)), FakeCAI((96, 64)), FakeCAI((32, 96)), stream=0x66)
        op.synchronize()
        self.assertEqual(op._lib.syncs, [0x55, 0x66])

    def test_a_stream_the_arrays_name_is_the_run_stream(self):
        # CAI v3: the consumer enqueues on the stream the producer named (1: legacy default).
        op = fake_op(syncopate.MatmulReduceScatter)
        op.run(FakeCAI((128, 64), stream=0x55), FakeCAI((96, 64), stream=0x55),
               FakeCAI((32, 96)))
        op.run(FakeCAI((128, 64), stream=1), FakeCAI((96, 64)), FakeCAI((32, 96), stream=1))
        op.run(FakeCAI((128, 64), stream=0x55), FakeCAI((96, 64)), FakeCAI((32, 96)),
               stream=0x66)  # the caller's stream wins
        self.assertEqual([run[-1] for run in op._lib.runs], [0x55, None, 0x66])
        with self.assertRaises(SyncopateError) as cm:
            op.run(FakeCAI((128, 64), stream=0x55), FakeCAI((96, 64), stream=0x66),
                   FakeCAI((32, 96)))
        self.assertEqual(cm.exception.code_name, "INVALID_ARGUMENT")
        self.assertIn("different streams (a: 0x55, b: 0x66); pass stream=", cm.exception.message)
        with self.assertRaises(SyncopateError) as cm:
            op.run(FakeCAI((128, 64), stream=0), FakeCAI((96, 64)), FakeCAI((32, 96)))
        self.assertIn("a: __cuda_array_interface__ stream 0", cm.exception.message)
        self.assertEqual(len(op._lib.runs), 3)

    def test_a_dlpack_producer_is_told_the_run_stream(self):
        op = fake_op(syncopate.MatmulAllReduce, dtype="bf16", device=1)
        a = FakeDLPack((16, 64), device_id=1, data=0xA000)
        b = FakeDLPack((96, 64), device_id=1, data=0xB000)
        out = FakeDLPack((16, 96), device_id=1, data=0xC000)
        op.run(a, b, out, stream=0x77)
        op.run(a, b, out, stream=0)  # DLPack spells the legacy default stream 1
        op.run(a, b, out)  # none known: the producer assumes the legacy default stream
        self.assertEqual(a.stream_args, [0x77, 1, None])
        self.assertEqual(out.stream_args, [0x77, 1, None])

    def test_mixed_adapters(self):
        op = fake_op(syncopate.MatmulAllReduce, dtype="bf16", device=1)
        op.run(FakeDLPack((16, 64), device_id=1, data=0xA000),
               FakeTorchLike((96, 64), ptr=0xB000, device=1),
               FakeDLPack((16, 96), device_id=1, data=0xC000))
        self.assertEqual(op._lib.runs[0][1:5], (16, 0xA000, 0xB000, 0xC000))

    def test_bad_arguments_never_reach_the_library(self):
        op = fake_op(syncopate.MatmulAllReduce)
        cases = [
            ((FakeCAI((128, 64)), FakeCAI((96, 64)), FakeCAI((32, 96))), "out has shape"),
            ((FakeCAI((128, 64)), FakeCAI((64, 96)), FakeCAI((128, 96))), "b has shape"),
            ((FakeCAI((128, 64)), FakeCAI((96, 64), strides=(2, 192)), FakeCAI((128, 96))),
             "b (shape [96, 64]) is not C-contiguous"),
            ((FakeCAI((128, 64)), FakeCAI((96, 64)), FakeCAI((128, 96), readonly=True)),
             "out is read-only"),
            ((FakeDLPack((128, 64)), FakeCAI((96, 64)), FakeCAI((128, 96))),
             "a has dtype bf16"),
            ((FakeCAI((2048, 64)), FakeCAI((96, 64)), FakeCAI((2048, 96))),
             "exceeds the op's max_m 1024"),
            ((FakeCAI((8, 64)), FakeCAI((96, 64)), FakeCAI((8, 96)), FakeCAI((8, 64))),
             "a_gathered is only for all_gather_matmul"),
        ]
        for args, fragment in cases:
            with self.subTest(fragment=fragment):
                with self.assertRaises(SyncopateError) as cm:
                    op.run(*args)
                self.assertEqual(cm.exception.code_name, "INVALID_ARGUMENT")
                self.assertIn(fragment, cm.exception.message)
        self.assertEqual(op._lib.runs, [])


class LifetimeTest(unittest.TestCase):
    def test_close_destroys_once(self):
        op = fake_op(syncopate.AllGatherMatmul)
        lib = op._lib
        op.close()
        op.close()
        del op
        gc.collect()
        self.assertEqual(lib.destroyed, [0xABC])

    def test_context_manager_and_del(self):
        op = fake_op(syncopate.MatmulAllReduce)
        lib = op._lib
        with op as entered:
            self.assertIs(entered, op)
        self.assertEqual(lib.destroyed, [0xABC])
        op2 = fake_op(syncopate.MatmulAllReduce)
        lib2 = op2._lib
        del op2
        gc.collect()
        self.assertEqual(lib2.destroyed, [0xABC])

    def test_closed_op_refuses_calls(self):
        op = fake_op(syncopate.AllGatherMatmul)
        op.close()
        with self.assertRaises(SyncopateError) as cm:
            op.run(FakeCAI((32, 64)), FakeCAI((96, 64)), FakeCAI((128, 96)))
        self.assertEqual(cm.exception.code_name, "FAILED_PRECONDITION")
        self.assertIn("closed", cm.exception.message)
        self.assertIn("closed", repr(op))


if __name__ == "__main__":
    unittest.main()
