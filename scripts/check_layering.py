#!/usr/bin/env python3
"""Fails on an #include that crosses the layers the wrong way (README "Layout"):

  plan core  core/base, core/plan, core/plan_io            no CUDA, gRPC, jit, runtime/,
                                                          server or client
  jit        jit/                                         no runtime/, gRPC, server, client
  runtime    runtime/cuda, runtime/ucx                    no gRPC, server, client, runtime/gemm
  gemm       runtime/gemm                                 no gRPC, server, client
  ops        ops/ (above the runtime and the GEMM product)  no gRPC, server, client; nothing
                                                          below it includes ops/
  client     client/ (the library, not client/cli)        of server/, only server/embedded.h
  server     server/                                      no client

Usage: check_layering.py [ROOT]     prints each violation as path:line: what, exits 1 on any
       check_layering.py --self-test  checks that a tree with one violation per rule fails
"""
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
CUDA = re.compile(r'^(cuda[a-z0-9_]*\.h|nvrtc\.h|cublas[^/]*\.h|cuda/.*)$')
GRPC = re.compile(r'^grpc(pp)?/')
SOURCE_EXT = (".h", ".cc", ".cuh", ".cu", ".hpp", ".cpp")

PLAN_CORE = ("core/base/", "core/plan/", "core/plan_io/")


def forbidden(path, inc):
    """The reason `path` (relative, '/'-separated) may not include `inc`, or None."""
    inner = lambda *prefixes: any(inc.startswith(p) for p in prefixes)
    if path.startswith(PLAN_CORE):
        if CUDA.match(inc) or GRPC.match(inc):
            return "the plan core includes no CUDA or gRPC header"
        if inner("jit/", "runtime/", "server/", "client/", "ops/"):
            return "the plan core includes nothing above it"
    elif path.startswith("jit/"):
        if GRPC.match(inc) or inner("runtime/", "server/", "client/", "ops/"):
            return "jit sits below the CUDA runtime, the server and the client"
    elif path.startswith(("runtime/cuda/", "runtime/ucx/")):
        if GRPC.match(inc) or inner("server/", "client/"):
            return "the runtime sits below the server and the client"
        if inner("runtime/gemm/"):
            return "the CUDA runtime sits below the GEMM product"
        if inner("ops/"):
            return "the CUDA runtime sits below the ops"
    elif path.startswith("runtime/gemm/"):
        if GRPC.match(inc) or inner("server/", "client/"):
            return "the GEMM product sits below the server and the client"
        if inner("ops/"):
            return "the GEMM product sits below the ops"
    elif path.startswith("ops/"):
        if GRPC.match(inc) or inner("server/", "client/"):
            return "the ops sit below the server and the client (they link neither)"
    elif path.startswith("client/") and not path.startswith("client/cli/"):
        if inc.startswith("server/") and inc != "server/embedded.h":
            return "the client library may include only server/embedded.h of the server"
    elif path.startswith("server/"):
        if inner("client/"):
            return "the server does not include the client"
    return None


def check(root):
    found = []
    for top in ("core", "runtime", "jit", "ops", "client", "server"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(SOURCE_EXT):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                with open(full, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        why = m and forbidden(rel, m.group(1))
                        if why:
                            found.append(f"{rel}:{lineno}: includes {m.group(1)}: {why}")
    return found


def self_test():
    cases = {
        "core/plan/a.cc": "cuda.h", "core/plan_io/b.cc": "grpcpp/grpcpp.h",
        "core/base/c.cc": "jit/compiler/lowering.h", "jit/d.cc": "runtime/cuda/group.h",
        "runtime/cuda/e.cc": "server/daemon.h", "client/f.cc": "server/daemon.h",
        "server/g.cc": "client/include/syncopate/client.h",
        "runtime/cuda/h.cc": "runtime/gemm/gemm_kernels.h", "runtime/gemm/i.cc": "server/daemon.h",
        "ops/j.cc": "grpcpp/grpcpp.h", "runtime/gemm/k.cc": "ops/core/op_kernels.h",
    }
    allowed = {"client/ok.cc": "server/embedded.h", "jit/ok.cc": "core/plan/plan.h",
               "client/cli/ok.cc": "server/daemon.h", "runtime/cuda/ok.cc": "jit/build/x.h",
               "runtime/gemm/ok.cc": "runtime/cuda/kernel_loader.h",
               "ops/ok.cc": "runtime/cuda/overlap_runtime.h"}
    with tempfile.TemporaryDirectory() as root:
        for rel, inc in {**cases, **allowed}.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(f'#include "{inc}"\n')
        found = check(root)
    flagged = {v.split(":")[0] for v in found}
    if flagged != set(cases):
        print("self-test failed: flagged", sorted(flagged), "expected", sorted(cases))
        return 1
    print(f"self-test passed: {len(cases)} violations flagged, {len(allowed)} allowed includes not")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    found = check(root)
    for v in found:
        print(v)
    if found:
        print(f"layering: {len(found)} forbidden include(s)")
        return 1
    print("layering: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
