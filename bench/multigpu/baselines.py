#!/usr/bin/env python3
"""PyTorch baselines for syncopate_tp_bench (issue 8): cuBLAS + NCCL back to back, and async-TP.

One process per GPU (torch.multiprocessing spawn, no torchrun), NCCL with NVLink multicast off
(NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1: a program using
multicast can take the host's shared GPUs out of service). Per problem and world size:

  torch-gemm   the per-rank GEMM alone (cuBLAS through torch.matmul)        -> t_gemm_local_ms
  nccl-comm    the collective alone (NCCL)                                  -> t_comm_ms
  cublas+nccl  all_gather_into_tensor then matmul (ag) / matmul then reduce_scatter_tensor (rs) /
               matmul then all_reduce (ar), back to back on one stream
  async-tp     torch.ops.symm_mem.fused_all_gather_matmul (ag) / fused_matmul_reduce_scatter (rs);
               PyTorch has no fused matmul + all-reduce: ar is reported "unsupported"

Timing: CUDA events around each call, warm-up first, median of reps per rank, then the max over
ranks (a collective is done when its last rank is). Rows go to a CSV with the same columns as
syncopate_tp_bench (results.h), so run.sh merges them.

Data and checks (the same inputs as the C++ program, regenerated, not shipped): every input is
drawn by the counter-based hash of tests/cuda/test_kernels.cc (fill_random), reproduced here in
int64 tensor arithmetic, with the same per-problem seeds (tp_config.cc Problem::seed(), A of rank q:
seed*1000+q, B of rank q: seed*1000+500+q). Each output is checked against an fp32 reference
computed from the regenerated inputs (TF32 off), with the C++ program's tolerances; each row also
carries rank 0's output sum and sum of squares (out_sum, out_sq), which merge_results.py compares
with the Syncopate rows of the same problem: identical inputs, so they must agree to bf16 rounding.
A start-up self-test checks the tensor hash against an exact integer implementation.

With one GPU (or --dry-run) it runs world size 1: the collectives are trivial and async-TP is
skipped with a message (torch symmetric memory needs at least two GPUs).
"""

import argparse
import csv
import os
import socket
import statistics
import sys

# Set before torch (and NCCL) initialise, and inherited by the spawned ranks.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

MODELS = {  # name: (hidden, FFN)
    "llama3.1-8b": (4096, 14336),
    "llama3.1-70b": (8192, 28672),
    "qwen2-72b": (8192, 29568),
    "llama3.1-405b": (16384, 53248),
}
WORKLOADS = ("ag", "rs", "ar")
WORKLOAD_INDEX = {"ag": 0, "rs": 1, "ar": 2}  # enum order in tp_config.h
COLUMNS = ("impl,workload,model,tokens,m,n,k,world,backend,chunks,time_ms,tflops,t_gemm_local_ms,"
           "t_comm_ms,bound_ms,ratio_to_bound,rel_err,check,out_sum,out_sq,note").split(",")
# Tolerances of rank_runner.cc (bf16 out; partial sums rounded before a reduction get more).
RTOL, ATOL = 1e-2, 2e-3
REDUCE_RTOL, REDUCE_ATOL = 2e-2, 8e-3


# ---- problems and seeds (mirror of tp_config.cc) ----

def problems_for(args, world):
    out = []
    for wl in args.workloads:
        for model, (hidden, ffn) in MODELS.items():
            if args.models and model not in args.models:
                continue
            for tokens in args.tokens:
                if ffn % world or tokens % world:
                    continue
                if wl == "ag":
                    m, n, k = tokens, ffn // world, hidden
                else:
                    m, n, k = tokens, hidden, ffn // world
                out.append(dict(workload=wl, model=model, tokens=tokens, m=m, n=n, k=k, world=world))
    return out


def problem_seed(p):
    return p["tokens"] * 1000003 + p["n"] * 1009 + p["k"] * 17 + WORKLOAD_INDEX[p["workload"]]


def seed_a(p, q):
    return problem_seed(p) * 1000 + q


def seed_b(p, q):
    return problem_seed(p) * 1000 + 500 + q


# ---- the fill hash of tests/cuda/test_kernels.cc ----

_M64 = (1 << 64) - 1


def _i64(x):
    """An unsigned 64-bit value as the int64 with the same bits."""
    x &= _M64
    return x - (1 << 64) if x >= (1 << 63) else x


_GOLDEN = _i64(0x9E3779B97F4A7C15)
_C1 = _i64(0xFF51AFD7ED558CCD)
_C2 = _i64(0xC4CEB9FE1A85EC53)


def _srl(x, s):
    """Logical right shift of int64 data (>> is arithmetic on signed tensors)."""
    return (x >> s) & ((1 << (64 - s)) - 1)


def fill_random(torch, n, seed, device):
    """bf16 tensor of n uniform(-1, 1) values, bit-identical to fill_random(seed) in C++.

    int64 multiplication wraps modulo 2^64 like the kernel's unsigned arithmetic; the float steps
    are exact (24-bit integer scaled by powers of two), and bf16 rounding is round-to-nearest-even
    on both sides.
    """
    x = torch.arange(n, dtype=torch.int64, device=device)
    x.mul_(_GOLDEN)
    x.bitwise_xor_(_i64(seed))
    x.bitwise_xor_(_srl(x, 33))
    x.mul_(_C1)
    x.bitwise_xor_(_srl(x, 33))
    x.mul_(_C2)
    x.bitwise_xor_(_srl(x, 33))
    f = _srl(x, 40).to(torch.float32)
    del x
    f.mul_(1.0 / 16777216.0).mul_(2.0).sub_(1.0)
    return f.to(torch.bfloat16)


def exact_fill_bits(i, seed):
    """The kernel's bf16 bits for element i, in exact integer arithmetic (for the self-test)."""
    x = (seed ^ ((i * 0x9E3779B97F4A7C15) & _M64)) & _M64
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & _M64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & _M64
    x ^= x >> 33
    v = x >> 40  # f = v / 2^23 - 1, exactly; as bits: float32 then round to bf16 (RNE)
    import struct
    u = struct.unpack("<I", struct.pack("<f", v / 8388608.0 - 1.0))[0]
    u += 0x7FFF + ((u >> 16) & 1)
    return (u >> 16) & 0xFFFF


def self_test(torch, device):
    n = 1 << 20
    for seed in (1, 123456789012345, problem_seed(dict(tokens=8192, n=6656, k=16384,
                                                       workload="ag")) * 1000 + 7):
        got = fill_random(torch, n, seed, device).view(torch.int16).cpu()
        for i in (0, 1, 2, 3, 1000, 65535, 123457, n - 1):
            want = exact_fill_bits(i, seed)
            have = int(got[i]) & 0xFFFF
            if have != want:
                raise RuntimeError(f"fill_random self-test: seed {seed} element {i}: "
                                   f"0x{have:04x} != 0x{want:04x}")


# ---- checks and timing ----

def compare(torch, got, want, rtol, atol_rel):
    """(check, rel_err, out_sum, out_sq) of a bf16 output against its fp32 reference."""
    g = got.float()
    finite = bool(torch.isfinite(g).all())
    diff = (g.double() - want.double())
    rel = float(diff.norm() / want.double().norm().clamp_min(1e-300))
    atol = atol_rel * float(want.abs().max())
    outside = int(((g - want).abs() > rtol * want.abs() + atol).sum())
    ok = finite and outside == 0 and rel <= rtol
    return ("pass" if ok else "fail"), rel, float(g.double().sum()), float(g.double().square().sum()), \
        ("" if ok else f"finite={finite} outside={outside} rel={rel:.2e}")


def time_op(torch, dist, fn, warmup, reps):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(reps)]
    for s, e in ev:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    med = statistics.median(s.elapsed_time(e) for s, e in ev)
    t = torch.tensor([med], dtype=torch.float64, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def gather_check(torch, dist, check):
    """The worst check over ranks: (check, rel_err) with check in pass/fail."""
    t = torch.tensor([0.0 if check[0] == "pass" else 1.0, check[1]], dtype=torch.float64,
                     device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return ("pass" if t[0].item() == 0 else "fail"), float(t[1].item())


def row(p, impl, backend, **kw):
    r = {c: "" for c in COLUMNS}
    r.update(impl=impl, workload=p["workload"], model=p["model"], tokens=p["tokens"], m=p["m"],
             n=p["n"], k=p["k"], world=p["world"], backend=backend, chunks=0, check="skip",
             out_sum=0, out_sq=0)
    r.update(kw)
    return r


# ---- one rank ----

def run_problem(torch, dist, args, p, rank, group_name, symm_ok, symm_why):
    world, wl = p["world"], p["workload"]
    m, n, k = p["m"], p["n"], p["k"]
    dev = torch.device("cuda", torch.cuda.current_device())
    flop = 2.0 * m * n * k
    rows = []
    B = fill_random(torch, n * k, seed_b(p, rank), dev).view(n, k)
    if wl == "ag":
        shard_rows = m // world
        A_shard = fill_random(torch, shard_rows * k, seed_a(p, rank), dev).view(shard_rows, k)
        A_full = torch.empty(m, k, dtype=torch.bfloat16, device=dev)
        # fp32 reference from every rank's regenerated shard.
        A_ref = torch.cat([fill_random(torch, shard_rows * k, seed_a(p, q), dev).view(shard_rows, k)
                           for q in range(world)])
        ref = A_ref.float() @ B.float().t()
        dist.all_gather_into_tensor(A_full, A_shard)
        if not torch.equal(A_full, A_ref):
            raise RuntimeError(f"{wl} {p['model']}: NCCL's gathered A differs from the regenerated one")
        del A_ref
        gemm = lambda: A_full @ B.t()
        comm = lambda: dist.all_gather_into_tensor(A_full, A_shard)

        def fused_ref():
            dist.all_gather_into_tensor(A_full, A_shard)
            return A_full @ B.t()
        rtol, atol, result_rows = RTOL, ATOL, None
    else:
        A = fill_random(torch, m * k, seed_a(p, rank), dev).view(m, k)
        ref = torch.zeros(m, n, dtype=torch.float32, device=dev)
        for q in range(world):
            Aq = A if q == rank else fill_random(torch, m * k, seed_a(p, q), dev).view(m, k)
            Bq = B if q == rank else fill_random(torch, n * k, seed_b(p, q), dev).view(n, k)
            ref += Aq.float() @ Bq.float().t()
            del Aq, Bq
        C = A @ B.t()
        gemm = lambda: A @ B.t()
        if wl == "rs":
            out = torch.empty(m // world, n, dtype=torch.bfloat16, device=dev)
            comm = lambda: dist.reduce_scatter_tensor(out, C)
            result_rows = slice(rank * (m // world), (rank + 1) * (m // world))

            def fused_ref():
                dist.reduce_scatter_tensor(out, A @ B.t())
                return out
        else:
            comm = lambda: dist.all_reduce(C)
            result_rows = None

            def fused_ref():
                c = A @ B.t()
                dist.all_reduce(c)
                return c
        rtol, atol = REDUCE_RTOL, REDUCE_ATOL
    want = ref if result_rows is None else ref[result_rows]

    t_gemm = time_op(torch, dist, gemm, args.warmup, args.reps)
    rows.append(row(p, "torch-gemm", "cublas", time_ms=t_gemm, tflops=flop / (t_gemm * 1e9)))
    t_comm = time_op(torch, dist, comm, args.warmup, args.reps)
    rows.append(row(p, "nccl-comm", "nccl", time_ms=t_comm))

    t = time_op(torch, dist, fused_ref, args.warmup, args.reps)
    r = row(p, "cublas+nccl", "nccl", time_ms=t, tflops=flop / (t * 1e9))
    if args.check:
        chk = compare(torch, fused_ref(), want, rtol, atol)
        check, rel = gather_check(torch, dist, chk)
        r.update(check=check, rel_err=rel, out_sum=chk[2], out_sq=chk[3], note=chk[4])
    rows.append(r)

    if wl == "ar":
        rows.append(row(p, "async-tp", "symm_mem", check="unsupported",
                        note="torch.ops.symm_mem has no fused matmul + all-reduce"))
    elif not symm_ok:
        rows.append(row(p, "async-tp", "symm_mem", check="unsupported", note=symm_why))
    else:
        if wl == "ag":
            op = lambda: torch.ops.symm_mem.fused_all_gather_matmul(
                A_shard, [B.t()], gather_dim=0, group_name=group_name)[1][0]
        else:
            op = lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(
                A, B.t(), "sum", scatter_dim=0, group_name=group_name)
        try:
            t = time_op(torch, dist, op, args.warmup, args.reps)
            r = row(p, "async-tp", "symm_mem", time_ms=t, tflops=flop / (t * 1e9))
            if args.check:
                chk = compare(torch, op(), want, rtol, atol)
                check, rel = gather_check(torch, dist, chk)
                r.update(check=check, rel_err=rel, out_sum=chk[2], out_sq=chk[3], note=chk[4])
        except Exception as e:  # an unsupported shape / build: report it, keep going
            r = row(p, "async-tp", "symm_mem", check="error", note=f"{type(e).__name__}: {e}"[:300])
        rows.append(r)

    bound = max(t_gemm, t_comm)
    for r in rows:
        r.update(t_gemm_local_ms=t_gemm, t_comm_ms=t_comm, bound_ms=bound)
        if isinstance(r.get("time_ms"), float):
            r["ratio_to_bound"] = r["time_ms"] / bound
    del ref, want
    torch.cuda.empty_cache()
    return rows


def worker(rank, world, args, port):
    import torch
    import torch.distributed as dist
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference must be fp32
    torch.backends.cudnn.allow_tf32 = False
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, device_id=torch.device("cuda", rank))
    try:
        if rank == 0:
            self_test(torch, torch.device("cuda", 0))
        group_name = dist.group.WORLD.group_name
        symm_ok, symm_why = world >= 2, "async-TP skipped: torch symmetric memory needs >= 2 GPUs"
        if symm_ok:
            try:
                from torch.distributed._symmetric_memory import enable_symm_mem_for_group
                enable_symm_mem_for_group(group_name)
            except Exception as e:  # newer releases enable it per group on first use
                symm_why = f"enable_symm_mem_for_group: {e}"
        for p in problems_for(args, world):
            if rank == 0:
                print(f"== {p['workload']} {p['model']} M={p['tokens']} TP={world} "
                      f"({p['m']}x{p['n']}x{p['k']})", flush=True)
            try:
                rows = run_problem(torch, dist, args, p, rank, group_name, symm_ok, symm_why)
            except torch.cuda.OutOfMemoryError as e:
                rows = [row(p, "cublas+nccl", "nccl", check="error", note=f"out of memory: {e}"[:200])]
                torch.cuda.empty_cache()
            if rank == 0:
                write_rows(args.csv, rows)
                for r in rows:
                    print(f"  {r['impl']:<12} {fmt(r['time_ms'])} ms  /bound {fmt(r['ratio_to_bound'])}"
                          f"  {r['check']}  {r['note']}", flush=True)
    finally:
        dist.destroy_process_group()


def fmt(v):
    return f"{v:.4f}" if isinstance(v, float) else "-"


def write_rows(path, rows):
    fresh = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        if fresh:
            w.writeheader()
        for r in rows:
            w.writerow({c: (f"{v:.6g}" if isinstance(v, float) and c not in ("out_sum", "out_sq")
                            else (f"{v:.9g}" if isinstance(v, float) else v))
                        for c, v in r.items()})


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tp", default="", help="world sizes, e.g. 2,4,8 (default: every GPU)")
    ap.add_argument("--workloads", default="ag,rs,ar")
    ap.add_argument("--models", default="", help="comma-separated (default: all)")
    ap.add_argument("--tokens", default="8192,2048,1024")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--csv", default="baselines.csv")
    ap.add_argument("--no-check", dest="check", action="store_false")
    ap.add_argument("--dry-run", action="store_true",
                    help="world size 1, llama3.1-8b, M=1024 unless given: checks the script on one GPU")
    a = ap.parse_args(argv)
    a.workloads = [w for w in a.workloads.split(",") if w]
    for w in a.workloads:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w!r} (want ag, rs, ar)")
    a.models = [x for x in a.models.split(",") if x]
    for x in a.models:
        if x not in MODELS:
            ap.error(f"unknown model {x!r} (known: {', '.join(MODELS)})")
    a.tokens = [int(x) for x in a.tokens.split(",") if x]
    a.tp = [int(x) for x in a.tp.split(",") if x]
    if a.dry_run:
        a.tp = [1]
        a.models = a.models or ["llama3.1-8b"]
        if a.tokens == [8192, 2048, 1024]:
            a.tokens = [1024]
    return a


def main(argv):
    args = parse_args(argv)
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError as e:
        print(f"baselines.py: PyTorch is not installed here ({e}); run it on the GPU machine",
              file=sys.stderr)
        return 3
    gpus = torch.cuda.device_count()
    if gpus == 0:
        print("baselines.py: no CUDA device visible; nothing was run", file=sys.stderr)
        return 3
    worlds = args.tp or [gpus]
    if gpus == 1 and worlds != [1]:
        print(f"baselines.py: one GPU: dry run at world size 1 instead of {worlds} "
              "(async-TP skipped)", flush=True)
        worlds = [1]
    for w in worlds:
        if w > gpus:
            print(f"baselines.py: --tp {w} needs {w} GPUs, {gpus} visible", file=sys.stderr)
            return 2
    print(f"baselines.py: torch {torch.__version__}, NCCL {torch.cuda.nccl.version()}, {gpus} GPU(s), "
          f"NCCL_NVLS_ENABLE={os.environ['NCCL_NVLS_ENABLE']}; rows -> {args.csv}", flush=True)
    status = 0
    for w in worlds:
        try:
            mp.spawn(worker, args=(w, args, free_port()), nprocs=w, join=True)
        except Exception as e:  # a rank raised: its traceback is above; go on with the next size
            print(f"baselines.py: world size {w} failed: {e}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
