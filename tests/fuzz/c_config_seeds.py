#!/usr/bin/env python3
"""Writes seed inputs for c_config_fuzzer (its header comment has the layout) into a folder:
valid configs of each op kind, so the fuzzer starts past the struct checks. The structs' bytes
come from the Python package's ctypes declarations of syncopate_ops.h (no library loaded).
usage: c_config_seeds.py <ops/python folder> <output dir>"""
import ctypes
import os
import struct
import sys

sys.path.insert(0, sys.argv[1])
from syncopate import _lib  # noqa: E402  (after the path it lives on)


def seed(kind, max_m, n, k, world, m, buckets=(), bucket_paths=(), op_size=None, tile_parts=0):
    group = _lib.new_struct(_lib.GroupConfig)
    group.rank, group.world = 0, world
    op = _lib.new_struct(_lib.OpConfig)
    op.kind, op.max_m, op.n, op.k = kind, max_m, n, k
    op.num_buckets = len(buckets)
    for i, b in enumerate(buckets):
        op.m_buckets[i] = b
    op.num_bucket_paths = len(bucket_paths)
    for i, (b, fused, chunks) in enumerate(bucket_paths):
        op.bucket_paths[i].bucket_m, op.bucket_paths[i].fused = b, fused
        op.bucket_paths[i].chunks = chunks
    op.tile_parts = tile_parts
    sizes = struct.pack("<IIIiq", ctypes.sizeof(group), op_size or ctypes.sizeof(op),
                        ctypes.sizeof(_lib.Path), world, m)
    return sizes + bytes(group) + bytes(op) + b"tp0\0/tmp/syncopate-cache"


def main():
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    seeds = {
        "ag": seed(0, 8192, 7168, 4096, 4, 4096),
        "rs_paths": seed(1, 8192, 4096, 2048, 2, 2048, buckets=(512, 2048),
                         bucket_paths=((2048, 1, 2),), tile_parts=-1),
        "ar_small": seed(2, 8192, 4096, 1024, 2, 128, buckets=(128,)),
        "older_header": seed(2, 4096, 1024, 1024, 2, 1000,
                             op_size=_lib.OpConfig.tile_parts.offset),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, "c_config_" + name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
