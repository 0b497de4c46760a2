// The ops (syncopate/ops.h) as an engine calls them: ranks as forked processes on one GPU (run
// it under MPS for concurrent ranks, ../shared/DEVICE.md), one op per run, and per M:
//   - the GPU time of a run (events around --reps runs, the median of --rounds such blocks;
//     inputs copied in and outputs out included, as the engine pays them), against cuBLAS's
//     time for the same per-rank GEMM measured by the same rank in the same run;
//   - the host time of one Run call (--calls calls issued back to back after a sync, averaged;
//     the goal is 10 us at M=128 with everything cached; --shard-in-workspace measures it with
//     the AllGather's shard already in the op's workspace, as an engine writing it there would);
//   - the GPU time of a replay of one run captured in a CUDA graph, against the direct run (the
//     goal: within 2%; timed in blocks alternating with the direct runs'); "-" where the
//     capture is refused.
// Every rank prints one row per M (its rank first: under MPS the ranks' times differ, and the
// Python check reports the slowest); each rank times its own runs on its own stream.
// --tune: times every path per M instead (interleaved in rounds, each path at its slowest rank)
// and stores each bucket's fastest for Op::Create.
// --fill-cache DIR: compiles every bucket's kernels on this host (no GPU needed) into DIR, for
// ranks whose --cache-dir starts as a copy of it (device time is the scarce part).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/flags.h"
#include "core/base/status_macros.h"
#include "jit/build/kernel_build.h"
#include "jit/cache/kernel_cache.h"
#include "jit/compiler/embedded_headers.h"
#include "ops/core/op_kernels.h"
#include "ops/core/op_names.h"
#include "ops/core/op_tuning.h"
#include "ops/tuner/op_rank.h"
#include "ops/tuner/op_tuner.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/handles.h"
#include "runtime/cuda/kernel_loader.h"
#include "runtime/cuda/workloads/multiprocess.h"
#include "runtime/gemm/cublas_lib.h"
#include "syncopate/ops.h"
#include "syncopate/status_absl.h"

namespace syncopate::ops {
namespace {

struct BenchConfig {
  std::string kind = "ag";
  int world = 2;
  int64_t max_m = 8192, n = 7168, k = 4096;
  std::vector<int64_t> ms = {8192, 2048, 128};
  std::vector<int64_t> buckets;  // empty: every M of `ms` its own bucket
  std::string path = "auto", backend = "auto";
  int chunks = 0;
  int comm_ctas = 0;  // 0: the runtime's default
  int reps = 20;
  // Alternating blocks of direct runs and graph replays (TimeRunsAndReplays); with --tune, the
  // rounds in which every path is timed (ops/tuner/op_tuner.h).
  int rounds = 5;
  // Fewer Run calls than the launch queue holds (each issues ~10 stream operations): with 200 the
  // loop waited for the GPU (bench/RESULTS.md, 2026-12-05 fourth session), not for the calls.
  int calls = 20;
  std::string cache_dir;
  bool tune = false;
  // AllGather: the shard lives where the op reads it (Op::InputWorkspace), as an engine that
  // writes its activations there does: no input copy per run.
  bool shard_in_workspace = false;
  std::string fill_cache_dir;  // --fill-cache: compile into this folder on the host, run nothing
  bool tile_parts = OpConfig{}.tile_parts;
  std::string arch = "sm_90a";
};

OpConfig OpConfigFor(const BenchConfig& b) {
  OpConfig c;
  // The flags' choices are these names (Main), so the fallbacks never apply.
  c.kind = OpKindFromName(b.kind).value_or(OpKind::kMatmulAllReduce);
  c.max_m = b.max_m;
  c.n = b.n;
  c.k = b.k;
  c.path = PathPreferenceFromName(b.path).value_or(PathPreference::kAuto);
  c.backend = BackendFromName(b.backend).value_or(Backend::kAuto);
  c.chunks = b.chunks;
  c.tile_parts = b.tile_parts;
  c.comm_ctas = b.comm_ctas;
  c.timeout_ms = 20000;
  c.cache_dir = b.cache_dir;
  // By default every M measured is a bucket of its own: the figures are the kernels', not
  // padding's. --buckets times the padded path too (an M below its bucket copies its inputs and
  // outputs through the workspace; at the bucket's own M the caller's memory is used in place).
  c.m_buckets = b.buckets.empty() ? b.ms : b.buckets;
  return c;
}

absl::StatusOr<OpRank> SetUpRank(const BenchConfig& b, const OpConfig& config,
                                 const std::string& job, int rank) {
  ASSIGN_OR_RETURN(OpRank r, SetUpOpRank({.job = job, .rank = rank, .world = b.world}, config));
  r.shard_in_workspace = b.shard_in_workspace;
  return r;
}

// A graph holding one run at `m`, instantiated (captured after warm-up runs);
// nullopt when the op refuses the capture (FailedPrecondition: the copy engine).
absl::StatusOr<std::optional<cuda::Graph>> CaptureRun(OpRank& r, int64_t m) {
  const cuda::DriverApi& api = *r.api;
  CUstream stream = r.stream.get();
  CU_RETURN_IF_ERROR(api.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  const Status ran = r.op->Run(RunArgsAt(r, m), stream);
  CUgraph captured = nullptr;
  const CUresult ended = api.cuStreamEndCapture(stream, &captured);
  cuda::Graph graph(api, captured);
  if (ran.code() == StatusCode::kFailedPrecondition) return std::nullopt;
  RETURN_IF_ERROR(ToAbsl(ran));
  CU_RETURN_IF_ERROR(ended);
  RETURN_IF_ERROR(graph.Instantiate());
  return std::optional<cuda::Graph>(std::move(graph));
}

// Direct runs against graph replays of the same run. Timed in `rounds` alternating blocks of
// `reps` each (direct first in even rounds, the replays first in odd ones), so a drift of the
// clocks or of the other MPS clients over the measurement falls on both alike: timed as two
// blocks one after the other, the ratio scattered 0.93-1.17 between calls and ranks
// (bench/RESULTS.md, fifteenth session). Each figure is the median over rounds; the ratio is
// the median of the rounds' own ratios.
struct RunAndReplayMs {
  double run_ms = 0;
  std::optional<double> graph_ms, graph_over_run;
};

absl::StatusOr<RunAndReplayMs> TimeRunsAndReplays(OpRank& r, int64_t m, int reps, int rounds) {
  const cuda::DriverApi& api = *r.api;
  CUstream stream = r.stream.get();
  const RunArgs args = RunArgsAt(r, m);
  auto run = [&] { return ToAbsl(r.op->Run(args, stream)); };
  RETURN_IF_ERROR(WarmUp(r, run));
  ASSIGN_OR_RETURN(std::optional<cuda::Graph> graph, CaptureRun(r, m));
  auto replay = [&]() -> absl::Status {
    CU_RETURN_IF_ERROR(api.cuGraphLaunch(graph->exec(), stream));
    return absl::OkStatus();
  };
  if (graph) RETURN_IF_ERROR(WarmUp(r, replay));
  std::vector<double> run_ms, graph_ms, ratios;
  for (int round = 0; round < rounds; ++round) {
    const bool replays_first = graph && round % 2 == 1;
    double replayed = 0;
    if (replays_first) {
      ASSIGN_OR_RETURN(replayed, GpuMs(api, stream, reps, replay));
    }
    ASSIGN_OR_RETURN(const double direct, GpuMs(api, stream, reps, run));
    if (graph && !replays_first) {
      ASSIGN_OR_RETURN(replayed, GpuMs(api, stream, reps, replay));
    }
    run_ms.push_back(direct);
    if (graph) {
      graph_ms.push_back(replayed);
      ratios.push_back(replayed / direct);
    }
  }
  RETURN_IF_ERROR(ToAbsl(r.op->Synchronize(stream)));
  RunAndReplayMs t{.run_ms = Median(run_ms)};
  if (graph) {
    t.graph_ms = Median(graph_ms);
    t.graph_over_run = Median(ratios);
  }
  return t;
}

absl::Status RunRank(const BenchConfig& b, const std::string& job, int rank) {
  const OpConfig config = OpConfigFor(b);
  ASSIGN_OR_RETURN(OpRank r, SetUpRank(b, config, job, rank));
  const int64_t n = b.n, k = b.k;
  ASSIGN_OR_RETURN(std::unique_ptr<gemm::CublasLib> cublas, gemm::CublasLib::Open(r.stream.get()));
  const plan::DType dtype = plan::DType::kBF16;
  if (rank == 0) {
    std::printf("%s world %d, N=%lld K=%lld per rank, path %s, backend %s\n",
                OpKindName(config.kind), b.world, static_cast<long long>(n),
                static_cast<long long>(k), b.path.c_str(), b.backend.c_str());
    std::printf("%-4s %-6s %-7s %-8s %-5s %10s %10s %10s %14s %10s %10s\n", "rank", "M", "bucket",
                "path", "chunks", "run ms", "cuBLAS ms", "run/cuBLAS", "host us/call", "graph ms",
                "graph/run");
    std::fflush(stdout);
  }
  for (int64_t m : b.ms) {
    if (const CUdeviceptr shard = r.shard_in_workspace ? r.op->InputWorkspace(m) : 0; shard != 0) {
      // The engine's activations, written where the op reads them (random, as `a` is).
      CU_RETURN_IF_ERROR(
          r.api->cuMemcpyAsync(shard, r.a.get(), m / b.world * k * 2, r.stream.get()));
    }
    ASSIGN_OR_RETURN(const RunAndReplayMs timed, TimeRunsAndReplays(r, m, b.reps, b.rounds));
    const double run_ms = timed.run_ms;
    // The per-rank GEMM: AllGather's is on the gathered M rows; the reductions' on M rows.
    // Warmed up as the runs are: cuBLAS's first call at a shape picks and loads its kernel
    // (figures of 4.4-6.8 ms against 1.2-1.4 from torch for the same GEMM without this).
    auto gemm = [&] {
      return cublas->Gemm(r.a.get(), r.w.get(), r.out.get(), m, n, k, dtype,
                          /*out_f32=*/false, /*accumulate=*/false);
    };
    for (int i = 0; i < 3; ++i) RETURN_IF_ERROR(gemm());
    CU_RETURN_IF_ERROR(r.api->cuStreamSynchronize(r.stream.get()));
    ASSIGN_OR_RETURN(double cublas_ms, GpuMs(*r.api, r.stream.get(), b.reps, gemm));
    const RunArgs args = RunArgsAt(r, m);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < b.calls; ++i) RETURN_IF_ERROR(ToAbsl(r.op->Run(args, r.stream.get())));
    const auto t1 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(ToAbsl(r.op->Synchronize(r.stream.get())));
    const double host_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / b.calls;
    Result<PathChoice> path = r.op->Path(m);
    RETURN_IF_ERROR(ToAbsl(path.status()));
    const std::string graph_cells =
        timed.graph_ms ? absl::StrFormat("%10.3f %10.3f", *timed.graph_ms, *timed.graph_over_run)
                       : absl::StrFormat("%10s %10s", "-", "-");
    // One write per row, so the ranks' rows do not interleave mid-line.
    const std::string row =
        absl::StrFormat("%-4d %-6d %-7d %-8s %-5d %10.3f %10.3f %10.3f %14.1f %s\n", rank, m,
                        path->bucket_m, path->fused ? "fused" : "unfused", path->chunks, run_ms,
                        cublas_ms, run_ms / cublas_ms, host_us, graph_cells);
    std::fputs(row.c_str(), stdout);
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

// --tune: the op tuner (ops/tuner/op_tuner.h) over --m, each M its own bucket; --backend keeps
// the paths to that backend.
OpTuneOptions TuneOptionsFor(const BenchConfig& b) {
  OpTuneOptions o;
  o.config = OpConfigFor(b);
  o.world = b.world;
  o.gpus = 1;  // the ranks share GPU 0, as every ops_bench run does
  o.ms = b.ms;
  o.reps = b.reps;
  o.rounds = b.rounds;
  return o;
}

// --fill-cache: the kernels Op::Create builds for every bucket (PlanBucket; the runtime's build
// options for --arch, one node, SYNCOPATE_NVRTC_OPTIONS as on the GPU), built through a kernel
// cache in the folder, so an op whose cache_dir starts as a copy of it loads them. The ops'
// tuning tables (--tune) are not applied here: a bucket they move to another path compiles on
// the GPU as before. With --tune: the kernels of every path --tune times, so that it compiles
// nothing on the GPU either.
absl::Status FillCache(const BenchConfig& b) {
  int cc = 0;
  if (b.arch.rfind("sm_", 0) != 0 || !absl::SimpleAtoi(b.arch.substr(3, 2), &cc)) {
    return absl::InvalidArgumentError(absl::StrCat("--arch ", b.arch, ": want sm_NN"));
  }
  cache::KernelCache::Options cache_options;
  cache_options.dir = b.fill_cache_dir;
  ASSIGN_OR_RETURN(std::unique_ptr<cache::KernelCache> cache,
                   cache::KernelCache::Open(cache_options));
  const jit::BuildOptions build = cuda::BuildOptionsFor(cc, cache.get());
  OpConfig config = OpConfigFor(b);
  config.cache_dir = b.fill_cache_dir;  // `syncopate tune`'s wgmma winners, as Create reads them
  Result<std::vector<int64_t>> buckets = BucketsFor(config, b.world);
  RETURN_IF_ERROR(ToAbsl(buckets.status()));
  // One kernel (and its local variant) through the cache; how many of them were compiled here.
  auto build_one = [&](const plan::Plan& plan, const jit::KernelSpec& spec, std::string_view source,
                       bool local) -> absl::StatusOr<int> {
    ASSIGN_OR_RETURN(const jit::PreparedKernel fused,
                     jit::PrepareFusedKernel(plan, spec, source, build));
    ASSIGN_OR_RETURN(const jit::BuiltKernel built, jit::BuildKernel(fused, build));
    int compiled = built.source == cache::KernelCache::Source::kCompiled ? 1 : 0;
    if (local) {
      ASSIGN_OR_RETURN(const jit::PreparedKernel prepared,
                       jit::PrepareLocalKernel(spec, source, build));
      ASSIGN_OR_RETURN(const jit::BuiltKernel built_local, jit::BuildKernel(prepared, build));
      compiled += built_local.source == cache::KernelCache::Source::kCompiled ? 1 : 0;
    }
    return compiled;
  };
  std::vector<OpConfig> configs = {config};
  if (b.tune) {
    configs.clear();
    // The ops the tuner makes, so that it compiles nothing on the GPU either.
    OpTuneOptions tune = TuneOptionsFor(b);
    tune.config.cache_dir = b.fill_cache_dir;
    for (const TuningCandidate& c : TuneCandidates(config.kind, config.backend)) {
      configs.push_back(ConfigForCandidate(tune, c));
    }
  }
  for (const OpConfig& each : configs) {
    for (int64_t bucket : *buckets) {
      ASSIGN_OR_RETURN(const BucketKernels bk, PlanBucket(each, b.world, bucket, cc));
      ASSIGN_OR_RETURN(std::string_view gemm_source,
                       jit::ExampleKernelSource(bk.kernels.gemm_source));
      // As Create: the fused GEMM always; unfused, also its local variant and the transfers.
      const bool unfused = !bk.path.fused;
      ASSIGN_OR_RETURN(int compiled,
                       build_one(bk.kernels.plan, bk.kernels.gemm_spec, gemm_source, unfused));
      if (unfused) {
        ASSIGN_OR_RETURN(const int comm, build_one(bk.kernels.plan, bk.kernels.comm_spec,
                                                   CommOnlySource(), /*local=*/false));
        compiled += comm;
      }
      const int kernels = unfused ? 3 : 1;
      std::printf("bucket %lld: %s, %d kernels, %d compiled, %d already in %s\n",
                  static_cast<long long>(bucket), bk.path.reason.c_str(), kernels, compiled,
                  kernels - compiled, b.fill_cache_dir.c_str());
      std::fflush(stdout);
    }
  }
  return absl::OkStatus();
}

absl::Status Main(int argc, char** argv) {
  BenchConfig b;
  FlagSet flags("ops_bench",
                "The ops as an engine calls them: run time against cuBLAS's per-rank GEMM and the "
                "host time of a Run call;\nranks forked on one GPU (run under MPS for concurrent "
                "ranks).");
  flags.Choice("kind", &b.kind, {"ag", "rs", "ar"},
               "all_gather_matmul, matmul_reduce_scatter, "
               "matmul_all_reduce");
  flags.Int("world", &b.world, "ranks", 1, 8);
  flags.Int("max-m", &b.max_m, "the op's max_m", 1);
  flags.Int("n", &b.n, "per-rank N", 1);
  flags.Int("k", &b.k, "per-rank K", 1);
  flags.IntList("m", &b.ms, "Ms to run (each also a bucket unless --buckets)", 1);
  flags.IntList("buckets", &b.buckets, "the op's M buckets (default: the Ms)", 1);
  flags.Choice("path", &b.path, {"auto", "fused", "unfused"}, "path preference");
  flags.Choice("backend", &b.backend, {"auto", "ce", "sm"}, "backend preference");
  flags.Int("chunks", &b.chunks, "chunks per shard (0: the heuristic's)", 0, 8);
  flags.Bool("tile-parts", &b.tile_parts,
             "a fused ReduceScatter reduces each tile's part as it is written (OpConfig::"
             "tile_parts, on by default; --tile-parts=false moves whole chunks)");
  flags.Int("comm-ctas", &b.comm_ctas, "SM backend's communication CTAs (0: the default)", 0, 1024);
  flags.Int("reps", &b.reps, "timed runs per M and round", 1);
  flags.Int("rounds", &b.rounds,
            "alternating rounds of direct runs and graph replays per M (--tune: of every path)", 1,
            100);
  flags.Int("calls", &b.calls, "Run calls timed on the host per M", 1);
  flags.String("cache-dir", &b.cache_dir, "kernel cache folder").DefaultText("none");
  flags.Bool("shard-in-workspace", &b.shard_in_workspace,
             "ag: pass the op's own input workspace as the shard (no input copy per run)");
  flags
      .String("fill-cache", &b.fill_cache_dir,
              "compile every bucket's kernels on this host into this folder (no GPU) and exit")
      .DefaultText("none");
  flags.String("arch", &b.arch, "--fill-cache: the GPU's NVRTC target");
  flags.Bool("tune", &b.tune,
             "time every path per M and store each bucket's fastest in --cache-dir's op tuning "
             "table (Op::Create reads it)");
  flags.ParseOrExit(argc, argv);
  if (b.tune && b.cache_dir.empty() && b.fill_cache_dir.empty()) {
    return absl::InvalidArgumentError("--tune needs --cache-dir (where the table is stored)");
  }
  if (b.tune && !b.buckets.empty()) {
    return absl::InvalidArgumentError(
        "--tune measures each bucket at its own M: give the buckets as --m, without --buckets");
  }
  if (b.tune && (b.shard_in_workspace || b.path != "auto" || b.chunks != 0)) {
    return absl::InvalidArgumentError(
        "--tune times every path itself: --shard-in-workspace, --path and --chunks do not apply");
  }
  const OpTuneOptions tune = TuneOptionsFor(b);
  if (b.tune && b.fill_cache_dir.empty()) RETURN_IF_ERROR(CheckTuneOptions(tune));
  if (!b.fill_cache_dir.empty()) return FillCache(b);
  std::string why;
  if (!workloads::ProbeGpu(&why)) return absl::FailedPreconditionError("no GPU: " + why);
  const std::string job = workloads::UniqueGroupId("ops_bench");
  if (b.tune) {
    OpTuneOptions o = tune;
    o.job = job;
    ASSIGN_OR_RETURN(const OpTuneResult result, TuneOp(o));
    PrintTuneTable(o, result, stdout);
    return absl::OkStatus();
  }
  std::vector<absl::Status> results = workloads::RunRanks(
      b.world, absl::Minutes(9), [&](int rank) { return RunRank(b, job, rank); });
  for (int r = 0; r < b.world; ++r) {
    if (!results[r].ok())
      return absl::Status(results[r].code(), absl::StrCat("rank ", r, ": ", results[r].message()));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace syncopate::ops

int main(int argc, char** argv) {
  // A crashing rank prints its stack (the forked ranks inherit the handler), then dies of the
  // same signal, which RunRanks reports. No alarm: a slow symbolizer must not turn the signal
  // into SIGABRT (the rank's deadline still kills a handler that hangs).
  absl::InitializeSymbolizer(argv[0]);
  absl::InstallFailureSignalHandler({.alarm_on_failure_secs = 0});
  const absl::Status s = syncopate::ops::Main(argc, argv);
  if (!s.ok()) std::fprintf(stderr, "ops_bench: %s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}
