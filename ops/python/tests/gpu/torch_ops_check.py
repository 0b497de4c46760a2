#!/usr/bin/env python3
"""torch_ops_check.py - the syncopate Python package on a GPU, with torch, ranks sharing ONE GPU.

  python3 torch_ops_check.py --world 2 [--lib libsyncopate.so] [--timeout-s 240]

The launcher (no torch, no CUDA: under MPS it would be one more client) starts --world rank
processes on cuda:0; each joins a gloo group over a loopback TCP store and
  1. ops      runs AllGatherMatmul / MatmulReduceScatter / MatmulAllReduce (bf16, LLaMA-3.1-8B
              TP=world layouts, M in --ms) and compares against an fp32 torch reference;
  2. library  does the same through torch.ops.syncopate.* (syncopate.torch_ops);
  3. timing   times op.run, torch.ops.symm_mem's fused ops and cuBLAS alone (--time-ms);
  4. graph    captures op.run in torch.cuda.graph after a warm-up run and replays it, checked.
Prints PASS/FAIL per check and `time,<op>,<M>,<impl>,<ms>` rows; exits 1 on any failure, 2 on a
setup error. Every rank has a watchdog; the launcher kills and names ranks that hang.
"""
import argparse
import faulthandler
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from datetime import timedelta

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ("ag", "rs", "ar")
PARTS = ("ops", "library", "timing", "graph")
RTOL, ATOL_PER_SQRT_K = 2e-2, 1e-2  # inputs are N(0,1): |out| ~ sqrt(K), bf16 rounds at 2^-9
# Read by libtorch when it loads, so the launcher puts them in the ranks' environment
# (as ../shared/tools/torch_mps_baseline.py does): several ranks on cuda:0, no multicast.
SYMM_ENV = {"TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES": "1", "NCCL_NVLS_ENABLE": "0",
            "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "TORCH_SYMMMEM": "CUDA",
            "TORCH_SYMMMEM_IMPLICIT_POOL": "0"}
torch = dist = syncopate = None  # imported by the ranks only (run_rank), so --help needs no torch


def parse_args(argv=None):
    ints = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--world", type=int, default=2, help="rank processes sharing cuda:0 (2)")
    ap.add_argument("--lib", help="libsyncopate.so (default: $SYNCOPATE_LIBRARY, then beside "
                    "this script, then build-cuda/ops of the checkout)")
    ap.add_argument("--timeout-s", type=int, default=240, help="per-rank watchdog (240); the "
                    "launcher kills ranks still running 20 s later")
    ap.add_argument("--model", type=ints, default=[4096, 14336], help="hidden,ffn (LLaMA-3.1-8B"
                    "); ag: n=ffn/world k=hidden; rs, ar: n=hidden k=ffn/world")
    ap.add_argument("--ms", type=ints, default=[8192, 2048, 128, 1000], help="checked Ms")
    ap.add_argument("--time-ms", type=ints, default=[8192, 2048], help="timed Ms")
    parts = ap.add_mutually_exclusive_group()
    parts.add_argument("--tile-parts", action="store_true",
                       help="the ops move a fused ReduceScatter's tile parts (tile_parts=True; "
                            "the library's default)")
    parts.add_argument("--whole-chunks", action="store_true",
                       help="the ops move a fused ReduceScatter's whole chunks "
                            "(tile_parts=False)")
    ap.add_argument("--time-kinds", default=",".join(KINDS),
                    help="the ops timed, any of " + ",".join(KINDS))
    ap.add_argument("--graph-m", type=int, default=2048, help="M of the capture check")
    ap.add_argument("--graph-replays", type=int, default=100)
    ap.add_argument("--graph-ce", type=int, default=1,
                    help="also capture an AllGather+GEMM op made with backend='ce' (1)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--parts", default=",".join(PARTS), help="any of " + ",".join(PARTS))
    ap.add_argument("--op-timeout-ms", type=int, default=10000,
                    help="the ops' device-side wait deadline (10000: time-sliced ranks wait long)")
    ap.add_argument("--cache-dir", help="kernel cache the ranks share (default: a temp folder)")
    ap.add_argument("--buckets", type=ints, default=None,
                    help="the ops' M buckets (default: the library's); ops_bench --m makes each "
                         "M its own bucket, so pass the same Ms to compare Python with C++")
    ap.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)  # set by the launcher
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.parts = a.parts.split(",")
    a.time_kinds = [k for k in a.time_kinds.split(",") if k]
    if (a.world < 1 or len(a.model) != 2 or a.model[1] % a.world or set(a.parts) - set(PARTS)
            or set(a.time_kinds) - set(KINDS)):
        ap.error("--model is hidden,ffn with ffn a multiple of --world; --parts any of " +
                 ",".join(PARTS) + "; --time-kinds any of " + ",".join(KINDS))
    # M must be a multiple of the world size (ops.h): round down, and say so.
    for name in ("ms", "time_ms"):
        fixed = [m - m % a.world for m in getattr(a, name) if m >= a.world]
        if fixed != getattr(a, name) and a.rank < 0:
            print(f"note: --{name.replace('_', '-')} rounded to multiples of {a.world}: {fixed}")
        setattr(a, name, fixed)
    a.graph_m -= a.graph_m % a.world
    a.max_m = max(a.ms + a.time_ms + [a.graph_m])
    return a


# ---------------------------------------------------------------- launcher (no torch) ----

def find_library(a):
    for path in (a.lib, os.environ.get("SYNCOPATE_LIBRARY"),
                 os.path.join(HERE, "libsyncopate.so"),  # the .device/bin bundle
                 os.path.join(HERE, "../../../../build-cuda/ops/libsyncopate.so")):  # checkout
        if path and os.path.exists(path):
            return os.path.abspath(path)
    return None


def package_dir():
    """Where `import syncopate` comes from: beside this script (the .device/bin bundle), else
    ops/python of the checkout this script sits in."""
    for d in (HERE, os.path.normpath(os.path.join(HERE, "../.."))):
        if os.path.exists(os.path.join(d, "syncopate", "__init__.py")):
            return d
    return None


def launch(a):
    lib, pkg = find_library(a), package_dir()
    if lib is None or pkg is None:
        print(f"setup error: libsyncopate.so {lib or 'not found (use --lib)'}, "
              f"package {pkg or 'not found'}")
        return 2
    with socket.socket() as s:  # a free loopback port for the gloo TCP store
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cache = a.cache_dir or tempfile.mkdtemp(prefix="syncopate-pycheck-")
    env = dict(os.environ, SYNCOPATE_LIBRARY=lib, **SYMM_ENV)
    # libsyncopate's own libraries (abseil, spdlog) sit beside it in the bundle.
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        [os.path.dirname(lib)] + [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p])
    mode = {k: env.get(k) for k in ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PIPE_DIRECTORY",
                                    "CUDA_DEVICE_MAX_CONNECTIONS")}
    print(f"launching {a.world} ranks on cuda:0; library {lib}; package {pkg}; kernel cache "
          f"{cache}; {mode}", flush=True)
    cmd = [sys.executable, os.path.abspath(__file__)] + sys.argv[1:]
    procs = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout`: the finally kills ranks
    try:
        for r in range(a.world):
            procs.append(subprocess.Popen(cmd + [f"--rank={r}", f"--port={port}", f"--lib={lib}",
                                                 f"--cache-dir={cache}"], env=env))
        return wait_ranks(a, procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        if not a.cache_dir:
            shutil.rmtree(cache, ignore_errors=True)


def wait_ranks(a, procs):
    """Exit codes of the ranks; ranks still running past the watchdog (or 30 s after another
    rank failed) are killed and named."""
    start, failed_at = time.time(), None
    while any(p.poll() is None for p in procs):
        now = time.time()
        if failed_at is None and any(p.poll() not in (None, 0) for p in procs):
            failed_at = now
        if now - start > a.timeout_s + 20 or (failed_at is not None and now - failed_at > 30):
            break
        time.sleep(0.2)
    codes = []
    for r, p in enumerate(procs):
        if p.poll() is None:
            print(f"HUNG: rank {r} (pid {p.pid}) still running after {time.time() - start:.0f} s;"
                  " killed", flush=True)
            p.kill()
            p.wait(10)
            codes.append("hung")
        else:
            codes.append(p.returncode)
    print(f"rank exit codes {codes}", flush=True)
    return 0 if all(c == 0 for c in codes) else 1


# ---------------------------------------------------------------------- rank side ----

class Ctx:
    """One rank's state: args, group, inputs, references, the pass/fail tally."""

    def __init__(self, a):
        self.a, self.rank, self.P = a, a.rank, a.world
        self.gname = dist.group.WORLD.group_name
        self.job = f"pyc{a.port}"  # unique per run: the ops' rendezvous names derive from it
        hidden, ffn = a.model
        # (n, k) per kind, as bench/multigpu's TP layouts: ag column-parallel, rs/ar row-parallel.
        self.nk = {"ag": (ffn // self.P, hidden), "rs": (hidden, ffn // self.P),
                   "ar": (hidden, ffn // self.P)}
        self.refs, self.sync, self.checks, self.fails = {}, None, 0, 0

    def say(self, *x):
        if self.rank == 0:
            print(*x, flush=True)

    def gather(self, obj):  # every rank gets every rank's obj (gloo, CPU)
        out = [None] * self.P
        dist.all_gather_object(out, obj)
        return out

    def report(self, label, ok, note):
        """Gathers one check's outcome; rank 0 prints it; every rank tallies the same, so every
        rank exits with the same code."""
        got = self.gather((bool(ok), note))
        bad = [r for r, (o, _) in enumerate(got) if not o]
        self.checks += 1
        self.fails += bool(bad)
        shown = got[bad[0] if bad else 0][1]  # a failing rank's note, else rank 0's
        self.say(f"{'FAIL' if bad else 'PASS'} {label}: {shown}" +
                 (f" (failing ranks {bad})" if bad else ""))


def short(e):
    return f"{type(e).__name__}: {' '.join(str(e).split())}"[:300]


def make_inputs(ctx):
    """Every rank's inputs at max_m rows, N(0,1), from a CPU generator so any rank rebuilds any
    peer's bit-exactly: references need no communication. A run at M uses the first rows."""
    dev, P, mm = torch.device("cuda", 0), ctx.P, ctx.a.max_m

    def rnd(shape, seed):
        gen = torch.Generator().manual_seed(seed)
        return torch.randn(shape, generator=gen).to(dev, torch.bfloat16)

    (n_ag, k_ag), (n_rs, k_rs) = ctx.nk["ag"], ctx.nk["rs"]
    ctx.ag_shards = [rnd((mm // P, k_ag), 100 + p) for p in range(P)]  # rank p's A shard
    ctx.ag_w = rnd((n_ag, k_ag), 200 + ctx.rank)                        # this rank's weight [n, k]
    ctx.rs_a = [rnd((mm, k_rs), 300 + p) for p in range(P)]             # rs and ar share these
    ctx.rs_w = [rnd((n_rs, k_rs), 400 + p) for p in range(P)]


def operands(ctx, kind, M):
    """(a, w, out shape) of this rank's run at M."""
    n = ctx.nk[kind][0]
    if kind == "ag":
        return ctx.ag_shards[ctx.rank][:M // ctx.P], ctx.ag_w, (M, n)
    shape = (M // ctx.P, n) if kind == "rs" else (M, n)
    return ctx.rs_a[ctx.rank][:M], ctx.rs_w[ctx.rank], shape


def reference(ctx, kind, M):
    """(fp32 reference of this rank's out, gathered A or None, K summed over, the rounding
    allowance or None), cached. A reduction rounds every rank's partial to bf16 and may round
    each running sum again (the ops' and torch's symm_mem alike: both missed the plain bound by
    1.15x on an H100, 2026-12-06): up to 2^-8 |value| per rounding, every value at most
    sum |partial|, so 2^-7 sum |partial| covers a partial's rounding and a sum's."""
    key = (kind, M)
    if key not in ctx.refs:
        if kind == "ag":
            full = torch.cat([s[:M // ctx.P] for s in ctx.ag_shards])
            ctx.refs[key] = (full.float() @ ctx.ag_w.float().t(), full, ctx.nk["ag"][1], None)
        else:
            if ("ar", M) not in ctx.refs:  # the sum over ranks of every rank's partial
                acc = torch.zeros(M, ctx.nk["ar"][0], dtype=torch.float32, device="cuda")
                magnitude = torch.zeros_like(acc)
                for a, w in zip(ctx.rs_a, ctx.rs_w):
                    partial = a[:M].float() @ w.float().t()
                    acc += partial
                    magnitude += partial.abs()
                ctx.refs[("ar", M)] = (acc, None, ctx.nk["ar"][1] * ctx.P, magnitude * 2.0**-7)
            acc, _, k_total, rounding = ctx.refs[("ar", M)]
            rows = M // ctx.P  # ops.h: rank r keeps rows [r*M/P, (r+1)*M/P) of the sum
            mine = slice(ctx.rank * rows, (ctx.rank + 1) * rows)
            ctx.refs[("rs", M)] = (acc[mine], None, k_total, rounding[mine])
    return ctx.refs[key]


def compare(y, ref, k_total, rounding=None):
    """(ok, note): every element within ATOL_PER_SQRT_K*sqrt(K) + RTOL*|ref| (+ the partials'
    rounding allowance of a reduction), none NaN/Inf."""
    diff = (y.float() - ref).abs()
    bound = ATOL_PER_SQRT_K * math.sqrt(k_total) + RTOL * ref.abs()
    if rounding is not None:
        bound = bound + rounding
    finite = bool(torch.isfinite(y).all())
    worst = (diff / bound).max().item() if finite else float("inf")
    rel = diff.max().item() / max(ref.abs().max().item(), 1e-30)
    note = f"max_abs={diff.max().item():.3g} rel={rel:.2e} worst={worst:.2f}x tol"
    return finite and worst <= 1.0, note + ("" if finite else " NON-FINITE output")


def check_output(ctx, kind, M, out, gathered=None):
    ref, full, k_total, rounding = reference(ctx, kind, M)
    ok, note = compare(out, ref, k_total, rounding)
    if gathered is not None:
        same = torch.equal(gathered, full)
        ok, note = ok and same, note + ("; a_gathered exact" if same else "; a_gathered DIFFERS")
    return ok, note


def create_op(ctx, kind, backend="auto"):
    """The op of `kind` (collective), max_m covering every M; None where any rank failed."""
    classes = {"ag": syncopate.AllGatherMatmul, "rs": syncopate.MatmulReduceScatter,
               "ar": syncopate.MatmulAllReduce}
    label = kind if backend == "auto" else f"{kind}/{backend}"
    n, k = ctx.nk[kind]
    group = syncopate.Group(f"{ctx.job}.{label.replace('/', '_')}", ctx.rank, ctx.P, device=0,
                            allgather=syncopate.torch_allgather())
    op, note, t0 = None, "", time.time()
    try:
        op = classes[kind](group, ctx.a.max_m, n, k, dtype="bf16", backend=backend,
                           timeout_ms=ctx.a.op_timeout_ms, cache_dir=ctx.a.cache_dir,
                           m_buckets=ctx.a.buckets,
                           tile_parts=(True if ctx.a.tile_parts else
                                       False if ctx.a.whole_chunks else None))
        note = f"max_m={ctx.a.max_m} n={n} k={k} in {time.time() - t0:.1f} s"
    except Exception as e:
        note = "error: " + short(e)
    ctx.report(f"create {label}", op is not None, note)
    if not all(ctx.gather(op is not None)) and op is not None:
        op.close()  # a group some rank is missing from would only hang its runs
        op = None
    return op


def create_ops(ctx):
    """One op per kind (collective); None where any rank failed."""
    return {kind: create_op(ctx, kind) for kind in KINDS}


def poisoned(shape):  # NaN everywhere: rows an op forgets to write fail the check
    return torch.full(shape, float("nan"), dtype=torch.bfloat16, device="cuda")


def check_ops(ctx, ops):
    """Part 1: each op at each M against the reference; outputs poisoned with NaN first."""
    for kind in KINDS:
        for M in ctx.a.ms if ops.get(kind) else []:
            a, w, shape = operands(ctx, kind, M)
            try:
                out = poisoned(shape)
                g = poisoned((M, a.shape[1])) if kind == "ag" else None
                ops[kind].run(a, w, out, a_gathered=g)
                ops[kind].synchronize()
                ok, note = check_output(ctx, kind, M, out, g)
                p = ops[kind].path(M)
                note += (f"; {'fused' if p.fused else 'unfused'} {p.backend} bucket {p.bucket_m}"
                         f" x{p.chunks}")
            except Exception as e:
                ok, note = False, "error: " + short(e)
            ctx.report(f"op {kind} M={M} out{list(shape)} k={ctx.nk[kind][1]}", ok, note)


def check_library(ctx, ops=None):
    """Part 2: torch.ops.syncopate.* (B = W.t(), as symm_mem takes it) against the reference."""
    try:
        import syncopate.torch_ops as sto
        group = syncopate.Group(f"{ctx.job}.lib", ctx.rank, ctx.P, device=0)
        sto.register_group(ctx.gname, group, max_m=ctx.a.max_m, timeout_ms=ctx.a.op_timeout_ms,
                           cache_dir=ctx.a.cache_dir)
        err = ""
    except Exception as e:
        err = "error: " + short(e)
    if any(ctx.gather(err)):
        ctx.report("library import/register_group", not err, err)
        return
    for M in ctx.a.ms:
        for kind in ("ag", "rs"):  # torch_ops has no all-reduce op (symm_mem has none either)
            a, w, _ = operands(ctx, kind, M)
            try:
                if kind == "ag":
                    g, (out,) = torch.ops.syncopate.fused_all_gather_matmul(
                        a, [w.t()], 0, ctx.gname, return_A=True)
                else:
                    g, out = None, torch.ops.syncopate.fused_matmul_reduce_scatter(
                        a, w.t(), "sum", 0, ctx.gname)
                torch.cuda.synchronize()
                ok, note = check_output(ctx, kind, M, out, g)
            except Exception as e:
                ok, note = False, "error: " + short(e)
            name = "fused_all_gather_matmul" if kind == "ag" else "fused_matmul_reduce_scatter"
            ctx.report(f"torch.ops.syncopate.{name} M={M}", ok, note)
    torch.cuda.synchronize()
    dist.barrier()  # nobody frees a workspace a peer may still read
    sto.unregister_group(ctx.gname)


def setup_symm_mem(ctx):
    """PyTorch's symmetric memory on the gloo group (as torch_mps_baseline.py): a small buffer
    whose device barrier lines the ranks' streams up before each timed launch (ctx.sync; None,
    with the reason printed, where it does not work: host barriers then)."""
    err = ""
    try:
        import torch.distributed._symmetric_memory as symm_mem  # defines torch.ops.symm_mem.*
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:  # needed on older torch, deprecated on newer
                symm_mem.enable_symm_mem_for_group(ctx.gname)
            except Exception as e:
                ctx.say(f"enable_symm_mem_for_group: {short(e)}")
        ctx.symm_mem = symm_mem
        buf = symm_mem.empty(1024, dtype=torch.bfloat16, device="cuda")
        hdl = symm_mem.rendezvous(buf, ctx.gname)
        hdl.barrier(channel=0)
        torch.cuda.synchronize()
        ctx.sync_buf, ctx.sync = buf, hdl
    except Exception as e:
        err = short(e)
    errs = [x for x in ctx.gather(err) if x]
    if errs:
        ctx.sync = None
        ctx.say(f"symm_mem unusable here ({errs[0]}): host barriers only; symm_mem rows say why")


def line_up(ctx):
    """Every rank idle and at the same point: host barrier, then (where symm_mem works) a
    device-side one, so every rank's stream starts together."""
    torch.cuda.synchronize()
    dist.barrier()
    if ctx.sync is not None:
        ctx.sync.barrier(channel=1)


def bench(ctx, fn):
    """Median of --reps CUDA-event times on torch's current stream, ranks lined up first. Also
    keeps the median host time of the call itself in ctx.last_host_ms: a call that holds the
    host between the two events shows in a single run's time, not in a back-to-back one's."""
    times, host = [], []
    for i in range(ctx.a.warmup + ctx.a.reps):
        line_up(ctx)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        e.record()
        e.synchronize()
        if i >= ctx.a.warmup:
            times.append(s.elapsed_time(e))
            host.append((t1 - t0) * 1e3)
    ctx.last_host_ms = statistics.median(host)
    return statistics.median(times)


def bench_back_to_back(ctx, fn):
    """Milliseconds per run of --reps runs issued back to back between two CUDA events, after
    --warmup runs, ranks lined up once: the host's cost per call shows when it cannot keep ahead
    of the GPU. The method of ops_bench's `run ms`, so the two compare (bench()'s medians of
    single lined-up runs do not)."""
    line_up(ctx)
    for _ in range(ctx.a.warmup):
        fn()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(ctx.a.reps):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / ctx.a.reps


def bench_pair(ctx, fn):
    """Medians of the first and the second of two runs issued back to back, ranks lined up
    before each pair: a first run slower than the second is the cost of starting from idle
    ranks lined up (what a single run's median holds and back-to-back runs hide), not of the
    run itself."""
    firsts, seconds = [], []
    for i in range(ctx.a.warmup + ctx.a.reps):
        line_up(ctx)
        s, m, e = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        s.record()
        fn()
        m.record()
        fn()
        e.record()
        e.synchronize()
        if i >= ctx.a.warmup:
            firsts.append(s.elapsed_time(m))
            seconds.append(m.elapsed_time(e))
    return statistics.median(firsts), statistics.median(seconds)


def pair_row(ctx, kind, M, impl, fn):
    """Collective: bench_pair on every rank, one `pair,<op>,<M>,<impl>,<first>,<second>` row
    (the slowest rank's medians)."""
    try:
        first, second = bench_pair(ctx, fn)
    except Exception as e:  # gathered, so no rank is left waiting
        first = second = float("nan")
        ctx.say(f"pair,{kind},{M},{impl}: error {short(e)}")
    got = ctx.gather((first, second))
    ctx.say(f"pair,{kind},{M},{impl},{max(f for f, _ in got):.4f},{max(s for _, s in got):.4f}"
            f"  # first and second of two runs after a line-up, rank medians {got}")


def graph_pair_row(ctx, kind, M, op, a, w, out):
    """Collective: pair_row for replays of one captured run ("syncopate-graph"): whether a first
    run's extra time after a line-up is the direct run's host-side launch (its host-epoch stream
    writes) or the kernels themselves (a replay takes its epoch on the device)."""
    graph, err = torch.cuda.CUDAGraph(), ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.cuda.graph(graph):
                op.run(a, w, out)
    except Exception as e:
        err = short(e)
    torch.cuda.synchronize()
    errors = [e for e in ctx.gather(err) if e]
    if errors:
        ctx.say(f"pair,{kind},{M},syncopate-graph: not captured ({errors[0]})")
        return
    pair_row(ctx, kind, M, "syncopate-graph", graph.replay)


def measure(ctx, kind, M, impl, fn, check=None, counts=False):
    """One untimed run, its output checked where `check` is given (counted with `counts`, else
    only noted in the row: torch's ops), then bench() if it ran on every rank. Prints
    `time,<op>,<M>,<impl>,<ms>`, the max over ranks of the medians; returns it or None."""
    ok, note = True, ""
    try:
        y = fn()
        torch.cuda.synchronize()
        if check is not None:
            ok, note = check(y)
    except Exception as e:
        ok, note = False, "error: " + short(e)
    if counts:
        ctx.report(f"{impl} {kind} M={M} first timed run", ok, note)
    got = ctx.gather((ok, note))
    errors = [n for _, n in got if n.startswith("error")]
    if errors:
        ctx.say(f"time,{kind},{M},{impl},nan  # {errors[0]}")
        return None
    wrong = [n for o, n in got if not o]
    checked = "" if check is None else f"; output {'WRONG: ' + wrong[0] if wrong else 'ok'}"
    ctx.last_host_ms = float("nan")
    worst = time_row(ctx, kind, M, impl, lambda: bench(ctx, fn), "rank medians", checked)
    host = ctx.gather(ctx.last_host_ms)
    ctx.say(f"host,{kind},{M},{impl},{max(host):.4f}  # ms of host time per single timed call, "
            f"rank medians {[round(h, 4) for h in host]}")
    return worst


def time_row(ctx, kind, M, impl, timed, label, note=""):
    """Collective: `timed()` (ms) on every rank, an error gathered like a time (so no rank is
    left waiting in gather), then one `time,<op>,<M>,<impl>,<ms>` row with the slowest rank's
    figure; returns it, or None when a rank failed."""
    try:
        ms, err = timed(), ""
    except Exception as e:
        ms, err = float("nan"), "; error: " + short(e)
    got = ctx.gather((ms, err))
    times = [m for m, _ in got]
    worst = float("nan") if any(m != m for m in times) else max(times)
    ctx.say(f"time,{kind},{M},{impl},{worst:.4f}  # {label} {[round(m, 4) for m in times]}"
            + note + "".join(e for _, e in got))
    return worst if worst == worst else None


def time_ops(ctx, ops):
    """Part 3: syncopate op.run beside torch.ops.symm_mem's op and cuBLAS alone, same shapes."""
    setup_symm_mem(ctx)
    ctx.say("time,op,M,impl,ms  # symm_mem ar: no fused matmul+all_reduce exists in "
            "torch.ops.symm_mem; its row is matmul into symmetric memory + one_shot_all_reduce")
    for kind in ctx.a.time_kinds:
        for M in ctx.a.time_ms:
            a, w, shape = operands(ctx, kind, M)
            ref, full, k_total, rounding = reference(ctx, kind, M)
            check = lambda y: compare(y, ref, k_total, rounding)  # noqa: E731
            t = {}
            if ops.get(kind):
                out = torch.empty(shape, dtype=torch.bfloat16, device="cuda")
                t["syncopate"] = measure(ctx, kind, M, "syncopate",
                                         lambda: ops[kind].run(a, w, out), check, counts=True)
                if t["syncopate"] is not None:  # the last timed run's output, and no sticky error
                    err = ops[kind].error()
                    ok, note = (False, f"sticky error {err}") if err else check(out)
                    ctx.report(f"syncopate {kind} M={M} after timing", ok, note)
                    # Collective: every rank gets here (t["syncopate"] is gathered).
                    time_row(ctx, kind, M, "syncopate-back-to-back",
                             lambda: bench_back_to_back(ctx, lambda: ops[kind].run(a, w, out)),
                             "rank ms", "; events around --reps runs, as ops_bench's run ms")
                    pair_row(ctx, kind, M, "syncopate", lambda: ops[kind].run(a, w, out))
                    graph_pair_row(ctx, kind, M, ops[kind], a, w, out)
            t["symm_mem"] = measure(ctx, kind, M, "symm_mem", symm_mem_fn(ctx, kind, a, w, M),
                                    check)
            if t["symm_mem"] is not None:
                pair_row(ctx, kind, M, "symm_mem", symm_mem_fn(ctx, kind, a, w, M))
            local_a = full if kind == "ag" else a  # the local GEMM: [M, k] x [k, n]
            gout = torch.empty(M, w.shape[0], dtype=torch.bfloat16, device="cuda")
            t["cublas"] = measure(ctx, kind, M, "cublas",
                                  lambda: torch.matmul(local_a, w.t(), out=gout))
            for base in ("symm_mem", "cublas"):
                if t.get("syncopate") and t[base]:
                    ctx.say(f"ratio,{kind},{M},syncopate/{base},{t['syncopate'] / t[base]:.3f}")


def symm_mem_fn(ctx, kind, a, w, M):
    """torch.ops.symm_mem's op for `kind` on the same shapes (B = W.t()); for ar, a matmul into
    a symmetric buffer then one_shot_all_reduce (torch has no fused one)."""
    if kind == "ag":
        return lambda: torch.ops.symm_mem.fused_all_gather_matmul(a, [w.t()], 0, ctx.gname)[1][0]
    if kind == "rs":
        return lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(a, w.t(), "sum", 0,
                                                                      ctx.gname)
    if not hasattr(ctx, "ar_buf"):  # collective: every rank gets here in the same order
        try:
            ctx.ar_buf = ctx.symm_mem.empty(ctx.a.max_m, w.shape[0], dtype=torch.bfloat16,
                                            device="cuda")
            ctx.symm_mem.rendezvous(ctx.ar_buf, ctx.gname)
        except Exception as e:
            ctx.ar_buf = e

    def matmul_one_shot_all_reduce():
        if isinstance(ctx.ar_buf, Exception):
            raise ctx.ar_buf
        torch.matmul(a, w.t(), out=ctx.ar_buf[:M])
        return torch.ops.symm_mem.one_shot_all_reduce(ctx.ar_buf[:M], "sum", ctx.gname)
    return matmul_one_shot_all_reduce


def check_graph(ctx, ops):
    """Part 4: capture op.run in torch.cuda.graph after a warm-up run (the kernels take their
    epoch on the device; the copy engine's side streams copy it from words the kernel writes);
    replayed and checked each time, for every op and, with --graph-ce, an AllGather+GEMM op on
    the copy engine. A refusal fails."""
    M = ctx.a.graph_m
    captured = [(k, k, ops[k]) for k in KINDS if ops.get(k)]
    ce_op = create_op(ctx, "ag", backend="ce") if ctx.a.graph_ce else None
    if ce_op is not None:
        captured.append(("ag", "ag/ce", ce_op))
    for kind, label, op in captured:
        capture_and_replay(ctx, kind, label, op, M)
    if ce_op is not None:
        ce_op.close()


def capture_and_replay(ctx, kind, label, op, M):
    a, w, shape = operands(ctx, kind, M)
    out = torch.empty(shape, dtype=torch.bfloat16, device="cuda")
    graph, outcome = torch.cuda.CUDAGraph(), "captured"
    try:
        # Not needed by the op (Create did its one-time setup; ops_capture_gpu_test captures
        # first runs): the warm-up an engine does before torch.cuda.graph, for torch's own.
        op.run(a, w, out)
        op.synchronize()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "the CUDA graph is empty" after a refusal
            with torch.cuda.graph(graph):
                op.run(a, w, out)
    except syncopate.SyncopateError as e:
        outcome = f"refused: {e}" if e.code_name == "FAILED_PRECONDITION" else f"error: {e}"
    except Exception as e:
        outcome = "error: " + short(e)
    torch.cuda.synchronize()
    got = ctx.gather(outcome)
    if all(o == "captured" for o in got):
        ok, note = replay(ctx, kind, M, graph, out)
        ctx.report(f"capture {label} M={M}, {ctx.a.graph_replays} replays", ok, note)
    else:
        ctx.report(f"capture {label} M={M}", False, f"rank outcomes differ or failed: {got}")
    del graph


def replay(ctx, kind, M, graph, out):
    for i in range(ctx.a.graph_replays):
        out.fill_(float("nan"))  # each replay must write the whole output again
        graph.replay()
        torch.cuda.synchronize()
        ok, note = check_output(ctx, kind, M, out)
        if not ok:
            return False, f"replay {i}: {note}"
    return True, f"last replay {note}"


def run_rank(a):
    global torch, dist, syncopate
    for k, v in SYMM_ENV.items():  # before torch loads (the launcher already set them)
        os.environ.setdefault(k, v)
    import torch
    import torch.distributed as dist
    sys.path.insert(0, package_dir())
    import syncopate
    torch.set_num_threads(max(1, (os.cpu_count() or a.world) // a.world))
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference must be fp32
    torch.cuda.set_device(0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{a.port}", rank=a.rank,
                            world_size=a.world, timeout=timedelta(seconds=a.timeout_s))
    ctx = Ctx(a)
    props = torch.cuda.get_device_properties(0)
    ctx.say(f"torch {torch.__version__} cuda {torch.version.cuda}; {props.name}, SMs seen per "
            f"rank {ctx.gather(props.multi_processor_count)}; syncopate {syncopate.__version__} "
            f"{syncopate.library_path()} ABI {syncopate.abi_version()}; world {a.world}")
    make_inputs(ctx)
    ops = create_ops(ctx) if {"ops", "timing", "graph"} & set(a.parts) else {}
    for part, fn in (("ops", check_ops), ("library", check_library), ("timing", time_ops),
                     ("graph", check_graph)):
        if part in a.parts:
            ctx.say(f"== {part}")
            fn(ctx, ops)
    torch.cuda.synchronize()
    dist.barrier()  # nobody unmaps a workspace while a peer may still read it
    for op in ops.values():
        if op:
            op.close()
    dist.barrier()
    ctx.say(f"RESULT {'FAIL' if ctx.fails else 'PASS'}: {ctx.checks} checks, {ctx.fails} failed")
    return 1 if ctx.fails else 0


def rank_main(a):
    # Watchdog: dumps every thread's stack and exits even while blocked inside CUDA or gloo;
    # SIGALRM's default action is the backstop; PDEATHSIG ends us if the launcher dies.
    faulthandler.dump_traceback_later(a.timeout_s, exit=True)
    signal.alarm(a.timeout_s + 10)
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass
    code = 1
    try:
        code = run_rank(a)
    except BaseException:
        print(f"[rank {a.rank}] failed:", flush=True)
        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown (IPC/symmetric-memory destructors)


def main():
    a = parse_args()
    if a.rank >= 0:
        rank_main(a)
    sys.exit(launch(a))


if __name__ == "__main__":
    main()
