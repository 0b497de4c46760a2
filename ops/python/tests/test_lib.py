"""Loading libsyncopate.so: the ABI version, the struct layouts, a clear failure."""

import ctypes
import os
import subprocess
import sys
import unittest

import _support
from _support import require_library

import syncopate
from syncopate import _lib


class LibraryTest(unittest.TestCase):
    def test_loads_and_abi_version_is_1(self):
        require_library(self)
        self.assertEqual(syncopate.abi_version(), 1)
        self.assertTrue(syncopate.library_path())

    def test_status_names(self):
        require_library(self)
        self.assertEqual(_lib.status_name(3), "INVALID_ARGUMENT")
        self.assertEqual(_lib.status_name(14), "UNAVAILABLE")
        self.assertEqual(_lib.status_name(0), "OK")

    def test_every_function_is_declared(self):
        require_library(self)
        handle = _lib.lib()
        for name in _lib._SIGNATURES:
            self.assertIsNotNone(getattr(handle, name).argtypes, name)

    def test_struct_layouts_match_the_header(self):
        # sizeof/offsetof of syncopate_ops.h's structs on x86-64/aarch64 Linux (LP64), as gcc
        # lays them out.
        self.assertEqual(ctypes.sizeof(_lib.GroupConfig), 64)
        self.assertEqual(_lib.GroupConfig.bootstrap.offset, 48)
        self.assertEqual(_lib.GroupConfig.rendezvous_dir.offset, 40)
        self.assertEqual(_lib.GroupConfig.rendezvous_timeout_ms.offset, 32)
        self.assertEqual(ctypes.sizeof(_lib.OpConfig), 600)
        self.assertEqual(_lib.OpConfig.max_m.offset, 8)
        self.assertEqual(_lib.OpConfig.m_buckets.offset, 48)
        self.assertEqual(_lib.OpConfig.chunks.offset, 176)
        self.assertEqual(_lib.OpConfig.timeout_ms.offset, 184)
        self.assertEqual(_lib.OpConfig.cache_dir.offset, 192)
        self.assertEqual(_lib.OpConfig.num_bucket_paths.offset, 200)
        self.assertEqual(_lib.OpConfig.bucket_paths.offset, 208)
        self.assertEqual(_lib.OpConfig.tile_parts.offset, 592)
        self.assertEqual(ctypes.sizeof(_lib.BucketPath), 24)
        self.assertEqual(ctypes.sizeof(_lib.Path), 360)
        self.assertEqual(_lib.Path.reason.offset, 36)
        self.assertEqual(_lib.Path.tile_parts.offset, 292)
        self.assertEqual(_lib.Path.plan.offset, 296)
        self.assertEqual(_lib.new_struct(_lib.OpConfig).struct_size, 600)

    def test_import_does_not_load_and_a_missing_library_names_where_it_looked(self):
        code = (
            "import sys, syncopate\n"
            "from syncopate import _lib\n"
            "assert _lib._lib is None, 'import loaded the library'\n"
            "assert 'torch' not in sys.modules, 'import imported torch'\n"
            "assert 'syncopate.torch_ops' not in sys.modules, 'import imported torch_ops'\n"
            "try:\n"
            "    syncopate.abi_version()\n"
            "except syncopate.SyncopateError as e:\n"
            "    print(e.code_name)\n"
            "    print(e.message)\n"
            "else:\n"
            "    raise SystemExit('loaded a library that does not exist')\n")
        env = dict(os.environ, SYNCOPATE_LIBRARY="/nonexistent/libsyncopate.so",
                   PYTHONPATH=_support.PACKAGE_ROOT)
        result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        name, message = result.stdout.split("\n", 1)
        self.assertEqual(name, "NOT_FOUND")
        self.assertIn("/nonexistent/libsyncopate.so", message)
        self.assertIn("SYNCOPATE_LIBRARY", message)

    def test_installed_layouts_look_in_prefix_lib(self):
        import shutil
        import tempfile
        package = os.path.join(_support.PACKAGE_ROOT, "syncopate")
        for layout in ("python", os.path.join("lib", "python3.11", "site-packages")):
            with self.subTest(layout=layout), tempfile.TemporaryDirectory() as prefix:
                shutil.copytree(package, os.path.join(prefix, layout, "syncopate"),
                                ignore=shutil.ignore_patterns("__pycache__"))
                os.makedirs(os.path.join(prefix, "lib"), exist_ok=True)
                library = os.path.join(prefix, "lib", "libsyncopate.so.0")
                open(library, "w").close()
                code = ("from syncopate import _lib\n"
                        "print([p for _, p in _lib._candidates() if p][0])\n")
                env = {k: v for k, v in os.environ.items() if k != "SYNCOPATE_LIBRARY"}
                env["PYTHONPATH"] = os.path.join(prefix, layout)
                env["PYTHONDONTWRITEBYTECODE"] = "1"
                result = subprocess.run([sys.executable, "-c", code], env=env, cwd=prefix,
                                        capture_output=True, text=True, timeout=60)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(result.stdout.strip(), library)

    def test_torch_ops_needs_torch(self):
        try:
            import torch  # noqa: F401
        except ImportError:
            with self.assertRaises(ImportError):
                import syncopate.torch_ops  # noqa: F401
        else:
            self.skipTest("torch is installed; torch_ops is exercised where a GPU is")

    def test_version(self):
        self.assertEqual(syncopate.__version__, "0.1.0")


if __name__ == "__main__":
    unittest.main()
