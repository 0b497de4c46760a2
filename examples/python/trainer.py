#!/usr/bin/env python3
"""A trainer rank talking to syncopated from Python, through stubs generated from the same protos.

Joins a rank group, agrees on a chunk plan with the other ranks and, given a kernel source and
spec, gets the compiled fused kernel from the node's kernel cache. Prints one JSON object.

    python3 trainer.py --socket /run/syncopate/syncopated.sock --job train-42 \
        --world 8 --rank 3 --leader node0:7450 --template allgather.ring --shape 4096,1024

Stubs are generated at run time into a temporary directory: system protoc for the messages (the
protos use proto3 `optional`, which needs protoc >= 3.15) and grpc_python_plugin for the service
stubs, falling back to grpc_tools.protoc when those are missing. Every call has a deadline; a
failed call prints the gRPC status code and the daemon's message and exits 1.
"""

import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PROTO_ROOT = os.path.normpath(os.path.join(HERE, "..", "..", "proto"))
PROTOS = ["syncopate/v1/plan.proto", "syncopate/v1/kernel.proto", "syncopate/v1/service.proto"]


def generate_stubs(proto_root, out_dir):
    """Writes *_pb2.py and *_pb2_grpc.py for PROTOS into out_dir."""
    protoc = shutil.which("protoc")
    plugin = shutil.which("grpc_python_plugin")
    if protoc and plugin:
        cmd = [protoc, f"--proto_path={proto_root}", f"--python_out={out_dir}",
               f"--grpc_python_out={out_dir}", f"--plugin=protoc-gen-grpc_python={plugin}"]
        subprocess.run(cmd + PROTOS, check=True)
        return
    from grpc_tools import protoc as grpc_protoc  # Debian: python3-grpc-tools
    include = os.path.join(os.path.dirname(grpc_protoc.__file__), "_proto")
    args = ["grpc_tools.protoc", f"-I{proto_root}", f"-I{include}", f"--python_out={out_dir}",
            f"--grpc_python_out={out_dir}"] + PROTOS
    if grpc_protoc.main(args) != 0:
        raise RuntimeError("grpc_tools.protoc failed (it may predate proto3 optional)")


def load_stubs(proto_root):
    out_dir = tempfile.mkdtemp(prefix="syncopate_stubs_")
    generate_stubs(proto_root, out_dir)
    sys.path.insert(0, out_dir)
    pb2 = importlib.import_module("syncopate.v1.service_pb2")
    plan_pb2 = importlib.import_module("syncopate.v1.plan_pb2")
    grpc_stubs = importlib.import_module("syncopate.v1.service_pb2_grpc")
    return pb2, plan_pb2, grpc_stubs, out_dir


def fail(step, error):
    print(json.dumps({"step": step, "ok": False, "code": error.code().name,
                      "message": error.details()}))
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", help="syncopated Unix socket")
    parser.add_argument("--target", help="host:port of a daemon's TCP port (needs --token)")
    parser.add_argument("--token", default=os.environ.get("SYNCOPATE_TOKEN", ""))
    parser.add_argument("--job", required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--leader", default="", help="leader daemon host:port (like MASTER_ADDR)")
    parser.add_argument("--template", default="allgather.ring")
    parser.add_argument("--shape", default="64,32")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--kernel-hash", default="example-kernel-v1")
    parser.add_argument("--source", help="CUDA source file to compile with the agreed plan")
    parser.add_argument("--spec", help="kernel spec file (jit/compiler/kernel_spec.h format)")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per wait")
    parser.add_argument("--proto-root", default=DEFAULT_PROTO_ROOT)
    args = parser.parse_args()
    if bool(args.socket) == bool(args.target):
        parser.error("give exactly one of --socket and --target")

    import grpc  # Debian: python3-grpcio
    pb2, plan_pb2, stubs, stub_dir = load_stubs(args.proto_root)
    try:
        if args.socket:
            channel = grpc.insecure_channel(f"unix:{args.socket}")
            metadata = ()
        else:
            channel = grpc.insecure_channel(args.target)
            metadata = (("x-syncopate-token", args.token),)
        rendezvous = stubs.RendezvousStub(channel)
        grace = 5.0  # the daemon answers at `timeout`; the RPC deadline leaves room for that

        try:
            group = rendezvous.Join(pb2.JoinRequest(
                job_id=args.job, world_size=args.world, rank=args.rank,
                leader_address=args.leader, gpu_arch=args.arch,
                timeout_ms=int(args.timeout * 1000)), timeout=args.timeout + grace,
                metadata=metadata)
        except grpc.RpcError as error:
            fail("join", error)

        dtype = getattr(plan_pb2, "DTYPE_" + args.dtype.upper())
        template = plan_pb2.TemplateRequest(
            template_name=args.template, world_size=args.world,
            shape=[int(d) for d in args.shape.split(",")], dtype=dtype)
        try:
            agreed = rendezvous.Agree(pb2.AgreeRequest(
                group_id=group.group_id, rank=args.rank, leader_address=args.leader,
                proposal=pb2.Proposal(kernel_hash=args.kernel_hash, template_request=template),
                timeout_ms=int(args.timeout * 1000)), timeout=args.timeout + grace,
                metadata=metadata)
        except grpc.RpcError as error:
            fail("agree", error)

        result = {"ok": True, "group_id": group.group_id, "members": len(group.members),
                  "plan_hash": agreed.plan_hash, "plan_name": agreed.plan.name,
                  "round": agreed.round}
        if args.source and args.spec:
            kernel_pb2 = importlib.import_module("syncopate.v1.kernel_pb2")
            with open(args.source) as f:
                source = f.read()
            with open(args.spec) as f:
                spec = f.read()
            try:
                compiled = stubs.CompilerStub(channel).Compile(pb2.CompileRequest(
                    kernel=kernel_pb2.KernelSource(source=source, spec=spec),
                    plan=agreed.plan, rank=args.rank, arch=args.arch,
                    timeout_ms=int(args.timeout * 1000)), timeout=args.timeout + grace,
                    metadata=metadata)
            except grpc.RpcError as error:
                fail("compile", error)
            result.update({"cubin_bytes": len(compiled.kernel.binary),
                           "target": compiled.kernel.target, "cache_hit": compiled.cache_hit,
                           "entry": compiled.kernel.launch.entry})
        # Here a real trainer hands the cubin and launch metadata to its runtime.
        print(json.dumps(result))
    finally:
        shutil.rmtree(stub_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
