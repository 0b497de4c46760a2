// Configuration of the multi-GPU tensor-parallel benchmark (syncopate_tp_bench): command-line
// flags, the model shapes of issue 8, and the per-rank GEMM problems derived from them.
//
// Workloads, as the linear layers of a tensor-parallel MLP see them (TP = world size):
//   ag  AllGather+GEMM      column-parallel: C[M, FFN/TP] = allgather(A)[M, hidden] B^T
//                           (per-rank GEMM: m = M, n = FFN/TP, k = hidden)
//   rs  GEMM+ReduceScatter  row-parallel:    C = reducescatter(A[M, FFN/TP] B[hidden, FFN/TP]^T)
//                           (m = M, n = hidden, k = FFN/TP; rank r keeps rows of shard r)
//   ar  GEMM+AllReduce      the same GEMM, every rank keeps the full [M, hidden] sum
// Pure C++ (no CUDA): used by the GPU run and by the no-GPU paths (--list, --plan-only).
// Thread-compatible value types.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace syncopate::tp_bench {

enum class Workload { kAllGatherGemm, kGemmReduceScatter, kGemmAllReduce };
const char* WorkloadName(Workload w);  // "ag", "rs", "ar"
absl::StatusOr<Workload> ParseWorkload(const std::string& name);

struct ModelShape {
  std::string name;  // "llama3.1-8b", ...
  int64_t hidden = 0;
  int64_t ffn = 0;
};
// LLaMA-3.1-8B (4096, 14336), LLaMA-3.1-70B (8192, 28672), Qwen2-72B (8192, 29568),
// LLaMA-3.1-405B (16384, 53248).
const std::vector<ModelShape>& KnownModels();

// One measured problem: the per-rank GEMM C[m, n] = A[m, k] B[n, k]^T of `workload` at `world`.
struct Problem {
  Workload workload = Workload::kAllGatherGemm;
  std::string model;
  int64_t tokens = 0;  // M
  int64_t m = 0, n = 0, k = 0;
  int world = 1;
  // Per-shape seed of the random inputs; baselines.py derives the same one (see README.md).
  uint64_t seed() const;
  double gemm_flop() const { return 2.0 * m * n * k; }
  std::string Label() const;  // "ag llama3.1-8b M=8192 TP=2 (8192x7168x4096)"
};

struct BenchFlags {
  int gpus = 1;
  int ranks_per_gpu = 1;
  std::vector<int> tp;  // world sizes to run; empty: gpus * ranks_per_gpu
  std::vector<Workload> workloads = {Workload::kAllGatherGemm, Workload::kGemmReduceScatter,
                                     Workload::kGemmAllReduce};
  std::vector<std::string> models;  // empty: all of KnownModels()
  std::vector<int64_t> tokens = {8192, 2048, 1024};
  std::vector<int> chunks = {1, 2, 4, 8};
  std::vector<std::string> backends = {"ce", "sm"};
  std::string ag_plan = "allgather.push";
  std::string rs_plan = "reducescatter.direct";
  std::string ar_plan = "allreduce.direct";
  int warmup = 3;
  int reps = 10;
  int timeout_ms = 10000;  // every device-side wait's deadline
  int ce_free_ctas = -1;   // copy engine: CTA slots left for the driver's copies (-1: default)
  // Compute CTAs of the comm-only and unfused rows' transfers (0: the runtime's default for
  // transfers alone, TransfersAloneComputeCtas). Their tile CTAs only wait for chunks; a small
  // grid leaves the SMs free for the driver's copy kernels and the peers' comm CTAs.
  int transfers_compute_ctas = 0;
  bool ce_prefer_dma = true;  // copy engine: copies ask for the copy engines (LaunchOptions)
  // SM backend: comm CTA counts to measure the fused kernel with (0: DefaultCommCtas). Comm-only
  // and unfused always run at the ops' grid for transfers alone (SizeTransfersAlone): they
  // are the reference and the fallback, not variants.
  std::vector<int> comm_ctas = {0};
  // Grid size as a percentage of the SMs this rank sees (the GEMM runs one CTA per SM): extra
  // local-gemm and fused SM rows below 100 show whether a grid that does not fill the rank's
  // share runs faster beside concurrent ranks (CTA placement under MPS).
  std::vector<int> grid_pct = {100};
  // Tile dealing of the fused rows: "static" and/or "dynamic" (LaunchOptions::dynamic_tiles).
  // Dynamic by default: it won every fused row it was measured on (RESULTS.md, 2026-12-05).
  std::vector<std::string> tile_dealing = {"dynamic"};
  // The fused GEMMs move their outgoing chunks a tile at a time where that is exact (a
  // ReduceScatter's reductions: jit::KernelSpec::push_tiles); the A/B is two runs.
  bool push_tiles = false;
  // Non-empty: after each fused row, one launch traced per CTA (impl/trace.cuh) into
  // <trace_dir>/<row>_rank<r>.csv (cta, smid, start_ns, end_ns, wait_ns, waits).
  std::string trace_dir;
  bool check = true;
  std::string csv = "tp_bench.csv";
  std::string cache_dir = "/tmp/syncopate-tp-bench-cache";
  int run_timeout_s = 3000;  // per world size: ranks still running then are killed
  bool list = false;        // print the problems and exit (no GPU)
  bool plan_only = false;   // build every plan and generate every kernel source (no GPU)
  bool plan_only_nvrtc = false;  // --plan-only plus NVRTC for --arch (no GPU needed)
  std::string fill_cache_dir;    // with plan_only_nvrtc: build through this cache ("": cold)
  // With plan_only_nvrtc: extra NVRTC options (e.g. "--time=-": phase times in the printed log).
  std::vector<std::string> nvrtc_options;
  std::string arch = "sm_90";  // --plan-only: the GPU to generate / compile for
  // auto: the project's GEMM for the GPU (runtime/gemm/gemm_kernels.h SelectGemm: wgmma on
  // sm_90); mma: the portable mma.sync kernel everywhere.
  std::string gemm = "auto";
  bool help = false;
};

// Parses argv with a FlagSet (core/base/flags.h: "--flag value" or "--flag=value"; lists are
// comma-separated). InvalidArgument names the bad flag and value. --help sets BenchFlags::help.
absl::StatusOr<BenchFlags> ParseFlags(int argc, char** argv);
std::string Usage();  // generated from the same flag declarations

// World sizes to run (flags.tp or gpus * ranks_per_gpu), each checked against the ranks there
// are room for.
absl::StatusOr<std::vector<int>> WorldSizes(const BenchFlags& flags);

// Every problem of one world size, in run order (workload, model, tokens). Problems whose
// dimensions do not split evenly over `world` are skipped (the reason goes to `skipped`).
std::vector<Problem> ProblemsFor(const BenchFlags& flags, int world,
                                 std::vector<std::string>* skipped = nullptr);

}  // namespace syncopate::tp_bench
