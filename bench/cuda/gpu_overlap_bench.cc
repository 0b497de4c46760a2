// GPU benchmark on one GPU (no peers needed): for GEMM shapes of serving models,
//   local   the example GEMM with the identity schedule: the kernel runtime/gemm/gemm_kernels.h
//           selects for this GPU (gemm_wgmma.cuh on sm_90, else gemm_mma.cuh), or --kernel mma,
//   fused   the same kernel compiled with an AllGather plan (rank 0 of `--world` ranks) with every
//           chunk already present (signals pre-set): the cost of the schedule, waits and tables,
//   cuBLAS  cublasGemmEx on the same data (libcublas.so.13 dlopen'ed at run time),
// in TFLOP/s (medians of CUDA-event timings after warm-up, the kernels alternating every
// repetition, random inputs), with the ratios
// fused/local (goal: within 3%) and local/cuBLAS, and correctness: fused output bitwise equal to
// local, local vs cuBLAS relative error.
// Usage: gpu_overlap_bench [--reps N] [--world W] [--dtype bf16|f16] [--kernel auto|mma]
//                          [--shapes N]   (the first N of the shape list; default all)
//                          [--tile-n 128|256] [--stages S] [--loads tma|cpasync]  (wgmma kernel)
//                          [--fused 0]    (skip the fused kernel: local vs cuBLAS only)
//                          [--tuned 1 [--cache-dir D]]  (the `syncopate tune` winner per shape)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/flags.h"
#include "core/base/status_macros.h"
#include "core/plan/templates.h"
#include "jit/compiler/codegen.h"
#include "jit/compiler/embedded_headers.h"
#include "jit/compiler/kernel_spec.h"
#include "runtime/cuda/handles.h"
#include "runtime/cuda/kernel_loader.h"
#include "runtime/cuda/workloads/test_kernels.h"
#include "runtime/gemm/cublas_lib.h"
#include "runtime/gemm/gemm_kernels.h"
#include "runtime/gemm/kernel_timing.h"
#include "syncopate/launch_abi.h"

namespace syncopate::cuda {
namespace {

struct BenchOptions {
  int reps = 20;
  int world = 4;
  plan::DType dtype = plan::DType::kBF16;
  bool force_mma = false;
  bool fused = true;
  // wgmma kernel parameters; 0 / empty: the defaults SelectGemm picks.
  int tile_n = 0;
  int stages = 0;
  std::string loads;  // "tma" (default) or "cpasync"
  bool tuned = false;     // take each shape's winner from the tuning table, where there is one
  std::string cache_dir;  // the tuning table's cache directory ("": the default)
};

// The kernel SelectGemm picks, with the tuning table's winner under --tuned, else with the
// wgmma parameters the flags set (the rest as WgmmaConfig's defaults).
absl::StatusOr<gemm::GemmKernelChoice> ChooseKernel(const Context& ctx, const BenchOptions& o,
                                                    int64_t M, int64_t N, int64_t K) {
  const int cc = ctx.compute_capability();
  std::optional<gemm::WgmmaConfig> config;
  if (o.tuned) {
    ASSIGN_OR_RETURN(config, gemm::FindTunedWgmma(o.cache_dir, cc, M, N, K, o.dtype));
  }
  if (!config && (o.tile_n != 0 || o.stages != 0 || o.loads == "cpasync")) {
    config.emplace();
    if (o.tile_n != 0) config->tile_n = o.tile_n;
    if (o.stages != 0) config->stages = o.stages;
    config->cp_async = o.loads == "cpasync";
    if (std::string problem = gemm::WgmmaConfigProblem(*config); !problem.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--tile-n / --stages: ", problem));
    }
  }
  return gemm::SelectGemm(cc, gemm::GemmWorkload::kAllGather, M, N, K, o.dtype, o.force_mma,
                          config ? &*config : nullptr);
}

// One shape's kernels, buffers and launch arguments: what RunShape's steps build and use.
struct ShapeRun {
  int64_t M = 0, N = 0, K = 0;
  gemm::GemmKernelChoice choice;
  jit::PreparedKernel fused_prepared, local_prepared;
  LoadedKernel fused, local;
  DeviceBuffer A, B, C_local, C_fused, C_blas;
  // Protocol words of the fused kernel (the local kernel is passed the same).
  DeviceBuffer signals, chunk_words, tables;
  PinnedHostBuffer host;
  int nchunks = 1;
  FusedLaunchArgs fused_args{}, local_args{};
  unsigned fused_grid = 0, local_grid = 0;

  const jit::LaunchMetadata& fused_md() const { return fused_prepared.generated.metadata; }
  const jit::LaunchMetadata& local_md() const { return local_prepared.generated.metadata; }
};

// Median times of one shape; fused_ms is nan under --fused 0.
struct ShapeTimes {
  double local_ms = 0, blas_ms = 0, fused_ms = 0;
};

// Correctness: fused == local bitwise; local vs cuBLAS relative error.
struct OutputDiff {
  int64_t diff = 0, blas_diff = 0;
  double e2 = 0, r2 = 0, max_err = 0, max_ref = 0;
  bool finite = true;
};

// The fused (AllGather plan, rank 0 of o.world) and the local kernel of the chosen GEMM.
absl::Status CompileShapeKernels(const Context& ctx, const BenchOptions& o, ShapeRun& r) {
  ASSIGN_OR_RETURN(r.choice, ChooseKernel(ctx, o, r.M, r.N, r.K));
  const jit::KernelSpec& spec = r.choice.spec;
  plan::TemplateParams tp;
  tp.world_size = o.world;
  tp.shape = {r.M, r.K};
  tp.dtype = o.dtype;
  tp.chunks_per_shard = 4;
  ASSIGN_OR_RETURN(plan::Plan p, plan::BuildTemplate("allgather.push", tp));
  ASSIGN_OR_RETURN(std::string_view src, jit::ExampleKernelSource(r.choice.source_name));
  // No kernel cache: every run measures a cold NVRTC compile.
  const jit::BuildOptions build = BuildOptionsFor(ctx);
  ASSIGN_OR_RETURN(r.fused_prepared, jit::PrepareFusedKernel(p, spec, src, build));
  ASSIGN_OR_RETURN(r.local_prepared, jit::PrepareLocalKernel(spec, src, build));
  ASSIGN_OR_RETURN(r.fused, CompileAndLoad(ctx, r.fused_prepared, build));
  ASSIGN_OR_RETURN(r.local, CompileAndLoad(ctx, r.local_prepared, build));
  return absl::OkStatus();
}

// Random A and B; the three outputs poisoned, so an element no kernel wrote shows.
absl::Status FillOperands(const DriverApi& api, CUstream s,
                          const syncopate::workloads::TestKernels& tk, plan::DType dtype,
                          ShapeRun& r) {
  const int64_t M = r.M, N = r.N, K = r.K;
  ASSIGN_OR_RETURN(r.A, DeviceBuffer::Allocate(api, M * K * 2));
  ASSIGN_OR_RETURN(r.B, DeviceBuffer::Allocate(api, N * K * 2));
  ASSIGN_OR_RETURN(r.C_local, DeviceBuffer::Allocate(api, M * N * 2));
  ASSIGN_OR_RETURN(r.C_fused, DeviceBuffer::Allocate(api, M * N * 2));
  ASSIGN_OR_RETURN(r.C_blas, DeviceBuffer::Allocate(api, M * N * 2));
  RETURN_IF_ERROR(tk.Fill(r.A.get(), M * K, dtype, 0x1234 + M + N + K, s));
  RETURN_IF_ERROR(tk.Fill(r.B.get(), N * K, dtype, 0x5678 + M + N + K, s));
  for (CUdeviceptr c : {r.C_local.get(), r.C_fused.get(), r.C_blas.get()}) {
    RETURN_IF_ERROR(tk.Poison16(c, M * N, s));
  }
  return absl::OkStatus();
}

// Protocol words: every signal pre-set to epoch 1 (all chunks present).
absl::Status SetUpProtocolWords(const DriverApi& api, CUstream s, int world, ShapeRun& r) {
  const jit::LaunchMetadata& md = r.fused_md();
  const int nsig = std::max(1, md.num_signals);
  r.nchunks = std::max(1, md.num_outgoing_chunks);
  ASSIGN_OR_RETURN(r.signals, DeviceBuffer::Allocate(api, 4 * nsig));
  ASSIGN_OR_RETURN(r.chunk_words, DeviceBuffer::Allocate(api, 8 * r.nchunks));
  ASSIGN_OR_RETURN(r.tables, DeviceBuffer::Allocate(api, 8 * (world + kMaxOperands * world)));
  ASSIGN_OR_RETURN(r.host, PinnedHostBuffer::Allocate(api, 256));
  CU_RETURN_IF_ERROR(api.cuMemsetD32Async(r.signals.get(), 1, nsig, s));
  CU_RETURN_IF_ERROR(api.cuMemsetD32Async(r.chunk_words.get(), 0, 2 * r.nchunks, s));
  std::vector<CUdeviceptr> t(world + kMaxOperands * world, 0);
  for (int q = 0; q < world; ++q) t[q] = r.signals.get();
  CU_RETURN_IF_ERROR(api.cuMemcpyHtoD(r.tables.get(), t.data(), 8 * t.size()));
  return absl::OkStatus();
}

// The kernel arguments writing C to `c` as `rank` of `w` ranks; the tables are sized for `world`.
FusedLaunchArgs MakeLaunchArgs(const ShapeRun& r, CUdeviceptr c, int rank, int w, int world) {
  FusedLaunchArgs a;
  std::memset(&a, 0, sizeof(a));
  a.operands[0] = reinterpret_cast<void*>(r.A.get());
  a.operands[1] = reinterpret_cast<void*>(r.B.get());
  a.operands[2] = reinterpret_cast<void*>(c);
  a.rank = rank;
  a.world_size = w;
  a.epoch = 1;
  a.signals = reinterpret_cast<syncopate_u32*>(r.signals.get());
  a.peer_signals = reinterpret_cast<syncopate_u32* const*>(r.tables.get());
  a.peer_operands = reinterpret_cast<void* const*>(r.tables.get() + 8 * world);
  a.chunk_counters = reinterpret_cast<syncopate_u32*>(r.chunk_words.get());
  a.chunk_ready = reinterpret_cast<syncopate_u32*>(r.chunk_words.get() + 4 * r.nchunks);
  a.wait_timeout_ns = 5000000000ull;
  a.timeout_record = reinterpret_cast<WaitTimeoutRecord*>(r.host.device());
  a.abort_flag = reinterpret_cast<syncopate_u32*>(r.host.device() + 128);
  return a;
}

// One launch of a loaded GEMM kernel on `s`.
absl::Status LaunchGemm(const DriverApi& api, CUstream s, const LoadedKernel& l,
                        const jit::LaunchMetadata& m, unsigned grid, FusedLaunchArgs& a) {
  void* params[] = {&a};
  CU_RETURN_IF_ERROR(api.cuLaunchKernel(l.function, grid, 1, 1, m.block_dim, 1, 1,
                                        m.dynamic_smem_bytes, s, params, nullptr));
  return absl::OkStatus();
}

// Medians of local, cuBLAS and (unless --fused 0) fused; under --fused 0 the fused kernel still
// runs once, for the bitwise check.
absl::StatusOr<ShapeTimes> TimeKernels(const DriverApi& api, CUstream s,
                                       const gemm::CublasLib& cublas, const BenchOptions& o,
                                       ShapeRun& r) {
  auto launch_local = [&] {
    return LaunchGemm(api, s, r.local, r.local_md(), r.local_grid, r.local_args);
  };
  auto launch_fused = [&] {
    return LaunchGemm(api, s, r.fused, r.fused_md(), r.fused_grid, r.fused_args);
  };
  auto blas = [&]() {
    return cublas.Gemm(r.A.get(), r.B.get(), r.C_blas.get(), r.M, r.N, r.K, o.dtype,
                       /*out_f32=*/false, /*accumulate=*/false);
  };
  // Alternate the kernels every repetition so clock and power drift hit them alike.
  std::vector<gemm::TimedRun> runs = {launch_local, blas};
  if (o.fused) runs.push_back(launch_fused);
  ASSIGN_OR_RETURN(std::vector<double> med, gemm::MedianMsInterleaved(api, s, 3, o.reps, runs));
  if (!o.fused) RETURN_IF_ERROR(launch_fused());  // for the bitwise check
  ShapeTimes t;
  t.local_ms = med[0];
  t.blas_ms = med[1];
  t.fused_ms = o.fused ? med[2] : std::nan("");  // not timed: prints nan
  return t;
}

// Correctness: fused == local bitwise; local vs cuBLAS relative error.
absl::StatusOr<OutputDiff> CompareOutputs(const DriverApi& api, CUstream s, plan::DType dtype,
                                          const ShapeRun& r) {
  const int64_t elems = r.M * r.N;
  ASSIGN_OR_RETURN(auto cl, syncopate::workloads::Download16(api, r.C_local.get(), elems, s));
  ASSIGN_OR_RETURN(auto cf, syncopate::workloads::Download16(api, r.C_fused.get(), elems, s));
  ASSIGN_OR_RETURN(auto cb, syncopate::workloads::Download16(api, r.C_blas.get(), elems, s));
  OutputDiff d;
  for (int64_t i = 0; i < elems; ++i) {
    d.diff += cl[i] != cf[i];
    d.blas_diff += cl[i] != cb[i];
    const double a = syncopate::workloads::HalfBitsToFloat(cl[i], dtype);
    const double b = syncopate::workloads::HalfBitsToFloat(cb[i], dtype);
    d.finite = d.finite && std::isfinite(a);
    d.e2 += (a - b) * (a - b);
    d.r2 += b * b;
    d.max_err = std::max(d.max_err, std::fabs(a - b));
    d.max_ref = std::max(d.max_ref, std::fabs(b));
  }
  return d;
}

// The shape's RESULT line.
void PrintResult(const BenchOptions& o, const ShapeRun& r, const ShapeTimes& t,
                 const OutputDiff& d) {
  const int64_t M = r.M, N = r.N, K = r.K;
  const bool bf16 = o.dtype == plan::DType::kBF16;
  const double flop = 2.0 * M * N * K;
  const double local_tf = flop / (t.local_ms * 1e9), fused_tf = flop / (t.fused_ms * 1e9),
               blas_tf = flop / (t.blas_ms * 1e9);
  const volatile WaitTimeoutRecord* rec = static_cast<const WaitTimeoutRecord*>(r.host.host());
  std::printf(
      "RESULT %s%s M=%ld N=%ld K=%ld %s world=%d | local %.3f ms %.1f TFLOP/s | fused %.3f ms %.1f "
      "TFLOP/s | cuBLAS %.3f ms %.1f TFLOP/s | fused/local time %.4f | local/cuBLAS %.3f | "
      "fused!=local elems %ld | local!=cuBLAS elems %ld | rel err local vs cuBLAS %.2e (max |diff| "
      "/ max |ref| %.2e) | finite %d | timeouts %u | "
      "compile fused %.0f ms local %.0f ms | grid fused %u local %u (ctas/SM %d)\n",
      r.choice.wgmma ? "wgmma " : "mma",
      r.choice.wgmma ? gemm::WgmmaConfigName(r.choice.wgmma_config).c_str() : "", M, N, K,
      bf16 ? "bf16" : "f16", o.world, t.local_ms, local_tf, t.fused_ms, fused_tf, t.blas_ms,
      blas_tf, t.fused_ms / t.local_ms, local_tf / blas_tf, d.diff, d.blas_diff,
      std::sqrt(d.e2 / d.r2), d.max_err / d.max_ref, d.finite ? 1 : 0, rec->timed_out,
      r.fused.compile_ms, r.local.compile_ms, r.fused_grid, r.local_grid, r.fused.ctas_per_sm);
  std::fflush(stdout);
}

// One shape: compile, set up, time, check, print its RESULT line.
absl::Status RunShape(const Context& ctx, CUstream s, const syncopate::workloads::TestKernels& tk,
                      const gemm::CublasLib& cublas, int64_t M, int64_t N, int64_t K,
                      const BenchOptions& o) {
  const DriverApi& api = ctx.api();
  ShapeRun r;
  r.M = M;
  r.N = N;
  r.K = K;
  RETURN_IF_ERROR(CompileShapeKernels(ctx, o, r));
  RETURN_IF_ERROR(FillOperands(api, s, tk, o.dtype, r));
  RETURN_IF_ERROR(SetUpProtocolWords(api, s, o.world, r));
  r.fused_args = MakeLaunchArgs(r, r.C_fused.get(), 0, o.world, o.world);
  r.local_args = MakeLaunchArgs(r, r.C_local.get(), 0, 1, o.world);
  const int sms = ctx.sm_count();
  r.fused_grid = std::min<int64_t>(r.fused_md().num_tiles, r.fused.ctas_per_sm * sms);
  r.local_grid = std::min<int64_t>(r.local_md().num_tiles, r.local.ctas_per_sm * sms);
  ASSIGN_OR_RETURN(const ShapeTimes times, TimeKernels(api, s, cublas, o, r));
  ASSIGN_OR_RETURN(const OutputDiff diff, CompareOutputs(api, s, o.dtype, r));
  PrintResult(o, r, times, diff);
  return absl::OkStatus();
}

absl::Status Main(int argc, char** argv) {
  BenchOptions o;
  int max_shapes = 1000;
  std::string kernel = "auto", dtype = "bf16";
  int fused = 1, tuned = 0;
  FlagSet flags("gpu_overlap_bench",
                "GEMM shapes of serving models on one GPU: local (identity schedule) vs fused "
                "(AllGather plan, chunks\npresent) vs cuBLAS, in TFLOP/s.");
  flags.Int("reps", &o.reps, "timed repetitions per kernel (medians)", 1);
  flags.Int("world", &o.world, "ranks of the fused kernel's AllGather plan (this is rank 0)", 1);
  flags.Choice("dtype", &dtype, {"bf16", "f16"}, "element type");
  flags.Choice("kernel", &kernel, {"auto", "mma"}, "auto: the GPU's GEMM (wgmma on sm_90)");
  flags.Int("shapes", &max_shapes, "the first N of the shape list", 0).DefaultText("all");
  flags.Int("tile-n", &o.tile_n, "wgmma kernel: 128|256 (0: the default)", 0);
  flags.Int("stages", &o.stages, "wgmma kernel: pipeline stages (0: the default)", 0);
  flags.Choice("loads", &o.loads, {"tma", "cpasync"}, "wgmma kernel: operand loads")
      .DefaultText("tma");
  flags.Int("fused", &fused, "0: skip the fused kernel (local vs cuBLAS only)", 0, 1);
  flags.Int("tuned", &tuned, "1: each shape's `syncopate tune` winner, where there is one", 0, 1);
  flags.String("cache-dir", &o.cache_dir, "--tuned: the tuning table's cache directory")
      .Metavar("DIR")
      .DefaultText("the default");
  flags.ParseOrExit(argc, argv);
  o.force_mma = kernel == "mma";
  o.dtype = dtype == "f16" ? plan::DType::kF16 : plan::DType::kBF16;
  o.fused = fused != 0;
  o.tuned = tuned != 0;
  ASSIGN_OR_RETURN(Context ctx, Context::Retain(0));
  char name[128] = {};
  ctx.api().cuDeviceGetName(name, sizeof(name), ctx.device());
  std::printf("device %s, sm_%d, %d SMs, driver %d\n", name, ctx.compute_capability(),
              ctx.sm_count(), ctx.api().driver_version);
  ASSIGN_OR_RETURN(Stream s, Stream::Create(ctx.api()));
  ASSIGN_OR_RETURN(syncopate::workloads::TestKernels tk,
                   syncopate::workloads::TestKernels::Load(ctx));
  ASSIGN_OR_RETURN(std::unique_ptr<gemm::CublasLib> cublas, gemm::CublasLib::Open(s.get()));
  // {M, N, K}: square, then Llama-style MLP / attention projections (K, N) pairs at M = 8192.
  const int64_t shapes[][3] = {{8192, 8192, 8192},  {8192, 14336, 4096}, {8192, 4096, 14336},
                               {8192, 28672, 8192}, {8192, 8192, 28672}, {8192, 3584, 8192},
                               {8192, 8192, 3584}};
  int done = 0;
  for (const auto& sh : shapes) {
    if (done++ >= max_shapes) break;
    absl::Status st = RunShape(ctx, s.get(), tk, *cublas, sh[0], sh[1], sh[2], o);
    if (!st.ok()) std::printf("shape %ldx%ldx%ld failed: %s\n", sh[0], sh[1], sh[2], std::string(st.message()).c_str());
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace syncopate::cuda

int main(int argc, char** argv) {
  absl::Status s = syncopate::cuda::Main(argc, argv);
  if (!s.ok()) {
    std::fprintf(stderr, "gpu_overlap_bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
