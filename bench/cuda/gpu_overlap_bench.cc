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

absl::Status RunShape(const Context& ctx, CUstream s, const syncopate::workloads::TestKernels& tk,
                      const gemm::CublasLib& cublas, int64_t M, int64_t N, int64_t K,
                      const BenchOptions& o) {
  const DriverApi& api = ctx.api();
  const int world = o.world;
  const plan::DType dtype = o.dtype;
  const int reps = o.reps;
  ASSIGN_OR_RETURN(const gemm::GemmKernelChoice choice, ChooseKernel(ctx, o, M, N, K));
  const jit::KernelSpec& spec = choice.spec;
  plan::TemplateParams tp;
  tp.world_size = world;
  tp.shape = {M, K};
  tp.dtype = dtype;
  tp.chunks_per_shard = 4;
  ASSIGN_OR_RETURN(plan::Plan p, plan::BuildTemplate("allgather.push", tp));
  ASSIGN_OR_RETURN(std::string_view src, jit::ExampleKernelSource(choice.source_name));
  // No kernel cache: every run measures a cold NVRTC compile.
  const jit::BuildOptions build = BuildOptionsFor(ctx);
  ASSIGN_OR_RETURN(const jit::PreparedKernel fused_prepared,
                   jit::PrepareFusedKernel(p, spec, src, build));
  ASSIGN_OR_RETURN(const jit::PreparedKernel local_prepared,
                   jit::PrepareLocalKernel(spec, src, build));
  const jit::GeneratedKernel& fused_gen = fused_prepared.generated;
  const jit::GeneratedKernel& local_gen = local_prepared.generated;
  ASSIGN_OR_RETURN(LoadedKernel fused, CompileAndLoad(ctx, fused_prepared, build));
  ASSIGN_OR_RETURN(LoadedKernel local, CompileAndLoad(ctx, local_prepared, build));

  ASSIGN_OR_RETURN(DeviceBuffer A, DeviceBuffer::Allocate(api, M * K * 2));
  ASSIGN_OR_RETURN(DeviceBuffer B, DeviceBuffer::Allocate(api, N * K * 2));
  ASSIGN_OR_RETURN(DeviceBuffer C_local, DeviceBuffer::Allocate(api, M * N * 2));
  ASSIGN_OR_RETURN(DeviceBuffer C_fused, DeviceBuffer::Allocate(api, M * N * 2));
  ASSIGN_OR_RETURN(DeviceBuffer C_blas, DeviceBuffer::Allocate(api, M * N * 2));
  RETURN_IF_ERROR(tk.Fill(A.get(), M * K, dtype, 0x1234 + M + N + K, s));
  RETURN_IF_ERROR(tk.Fill(B.get(), N * K, dtype, 0x5678 + M + N + K, s));
  for (CUdeviceptr c : {C_local.get(), C_fused.get(), C_blas.get()}) {
    RETURN_IF_ERROR(tk.Poison16(c, M * N, s));
  }
  // Protocol words: every signal pre-set to epoch 1 (all chunks present).
  const jit::LaunchMetadata& md = fused_gen.metadata;
  const int nsig = std::max(1, md.num_signals);
  const int nchunks = std::max(1, md.num_outgoing_chunks);
  ASSIGN_OR_RETURN(DeviceBuffer signals, DeviceBuffer::Allocate(api, 4 * nsig));
  ASSIGN_OR_RETURN(DeviceBuffer chunk_words, DeviceBuffer::Allocate(api, 8 * nchunks));
  ASSIGN_OR_RETURN(DeviceBuffer tables, DeviceBuffer::Allocate(api, 8 * (world + kMaxOperands * world)));
  ASSIGN_OR_RETURN(PinnedHostBuffer host, PinnedHostBuffer::Allocate(api, 256));
  CU_RETURN_IF_ERROR(api.cuMemsetD32Async(signals.get(), 1, nsig, s));
  CU_RETURN_IF_ERROR(api.cuMemsetD32Async(chunk_words.get(), 0, 2 * nchunks, s));
  std::vector<CUdeviceptr> t(world + kMaxOperands * world, 0);
  for (int r = 0; r < world; ++r) t[r] = signals.get();
  CU_RETURN_IF_ERROR(api.cuMemcpyHtoD(tables.get(), t.data(), 8 * t.size()));

  auto make_args = [&](CUdeviceptr c, int rank, int w) {
    FusedLaunchArgs a;
    std::memset(&a, 0, sizeof(a));
    a.operands[0] = reinterpret_cast<void*>(A.get());
    a.operands[1] = reinterpret_cast<void*>(B.get());
    a.operands[2] = reinterpret_cast<void*>(c);
    a.rank = rank;
    a.world_size = w;
    a.epoch = 1;
    a.signals = reinterpret_cast<syncopate_u32*>(signals.get());
    a.peer_signals = reinterpret_cast<syncopate_u32* const*>(tables.get());
    a.peer_operands = reinterpret_cast<void* const*>(tables.get() + 8 * world);
    a.chunk_counters = reinterpret_cast<syncopate_u32*>(chunk_words.get());
    a.chunk_ready = reinterpret_cast<syncopate_u32*>(chunk_words.get() + 4 * nchunks);
    a.wait_timeout_ns = 5000000000ull;
    a.timeout_record = reinterpret_cast<WaitTimeoutRecord*>(host.device());
    a.abort_flag = reinterpret_cast<syncopate_u32*>(host.device() + 128);
    return a;
  };
  FusedLaunchArgs fused_args = make_args(C_fused.get(), 0, world);
  FusedLaunchArgs local_args = make_args(C_local.get(), 0, 1);
  const int sms = ctx.sm_count();
  const unsigned fused_grid = std::min<int64_t>(md.num_tiles, fused.ctas_per_sm * sms);
  const unsigned local_grid =
      std::min<int64_t>(local_gen.metadata.num_tiles, local.ctas_per_sm * sms);
  auto launch = [&](const LoadedKernel& l, const jit::LaunchMetadata& m, unsigned grid,
                    FusedLaunchArgs& a) -> absl::Status {
    void* params[] = {&a};
    CU_RETURN_IF_ERROR(api.cuLaunchKernel(l.function, grid, 1, 1, m.block_dim, 1, 1,
                                          m.dynamic_smem_bytes, s, params, nullptr));
    return absl::OkStatus();
  };
  const bool bf16 = dtype == plan::DType::kBF16;
  auto blas = [&]() {
    return cublas.Gemm(A.get(), B.get(), C_blas.get(), M, N, K, dtype, /*out_f32=*/false,
                       /*accumulate=*/false);
  };
  // Alternate the kernels every repetition so clock and power drift hit them alike.
  std::vector<gemm::TimedRun> runs = {
      [&] { return launch(local, local_gen.metadata, local_grid, local_args); }, blas};
  if (o.fused) runs.push_back([&] { return launch(fused, md, fused_grid, fused_args); });
  ASSIGN_OR_RETURN(std::vector<double> med, gemm::MedianMsInterleaved(api, s, 3, reps, runs));
  if (!o.fused) RETURN_IF_ERROR(launch(fused, md, fused_grid, fused_args));  // for the bitwise check
  const double local_ms = med[0], blas_ms = med[1];
  const double fused_ms = o.fused ? med[2] : std::nan("");  // not timed: prints nan
  const double flop = 2.0 * M * N * K;
  const double local_tf = flop / (local_ms * 1e9), fused_tf = flop / (fused_ms * 1e9),
               blas_tf = flop / (blas_ms * 1e9);
  // Correctness: fused == local bitwise; local vs cuBLAS relative error.
  ASSIGN_OR_RETURN(auto cl, syncopate::workloads::Download16(api, C_local.get(), M * N, s));
  ASSIGN_OR_RETURN(auto cf, syncopate::workloads::Download16(api, C_fused.get(), M * N, s));
  ASSIGN_OR_RETURN(auto cb, syncopate::workloads::Download16(api, C_blas.get(), M * N, s));
  int64_t diff = 0, blas_diff = 0;
  double e2 = 0, r2 = 0, max_err = 0, max_ref = 0;
  bool finite = true;
  for (int64_t i = 0; i < M * N; ++i) {
    diff += cl[i] != cf[i];
    blas_diff += cl[i] != cb[i];
    const double a = syncopate::workloads::HalfBitsToFloat(cl[i], dtype);
    const double b = syncopate::workloads::HalfBitsToFloat(cb[i], dtype);
    finite = finite && std::isfinite(a);
    e2 += (a - b) * (a - b);
    r2 += b * b;
    max_err = std::max(max_err, std::fabs(a - b));
    max_ref = std::max(max_ref, std::fabs(b));
  }
  const volatile WaitTimeoutRecord* rec = static_cast<const WaitTimeoutRecord*>(host.host());
  std::printf(
      "RESULT %s%s M=%ld N=%ld K=%ld %s world=%d | local %.3f ms %.1f TFLOP/s | fused %.3f ms %.1f "
      "TFLOP/s | cuBLAS %.3f ms %.1f TFLOP/s | fused/local time %.4f | local/cuBLAS %.3f | "
      "fused!=local elems %ld | local!=cuBLAS elems %ld | rel err local vs cuBLAS %.2e (max |diff| "
      "/ max |ref| %.2e) | finite %d | timeouts %u | "
      "compile fused %.0f ms local %.0f ms | grid fused %u local %u (ctas/SM %d)\n",
      choice.wgmma ? "wgmma " : "mma",
      choice.wgmma ? gemm::WgmmaConfigName(choice.wgmma_config).c_str() : "", M, N, K,
      bf16 ? "bf16" : "f16", world, local_ms, local_tf, fused_ms, fused_tf, blas_ms, blas_tf,
      fused_ms / local_ms, local_tf / blas_tf, diff, blas_diff, std::sqrt(e2 / r2),
      max_err / max_ref, finite ? 1 : 0, rec->timed_out, fused.compile_ms, local.compile_ms,
      fused_grid, local_grid, fused.ctas_per_sm);
  std::fflush(stdout);
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
