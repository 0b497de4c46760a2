// Which local GEMM kernel runs on which GPU: the Hopper wgmma kernel (examples/kernels/
// gemm_wgmma.cuh, needs the sm_90a target) on compute capability 9.0, the mma.sync kernel
// (gemm_mma.cuh) everywhere else and for shapes the wgmma kernel would only run slowly; and the
// NVRTC target each GPU gets; and the wgmma kernel's tuned configuration for a shape, from the
// tuning table `syncopate tune` fills (jit/tune/tuning_table.h). Thread-safe; SelectGemm and
// ArchFor are pure, FindTunedWgmma reads one file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/plan/plan.h"
#include "jit/compiler/kernel_spec.h"
#include "jit/tune/tuning_table.h"

namespace syncopate::gemm {

enum class GemmWorkload { kAllGather, kReduceScatter };

// The wgmma kernel's tunables (gemm_wgmma<Schedule, T, 128, tile_n, stages, loads>): tile_n 128
// or 256, stages >= 2 (shared memory jit::GemmWgmmaSmemBytes(128, tile_n, stages)), operands
// loaded by TMA or, with cp_async, by the cp.async producer (which also stores the epilogue from
// registers: the staging tile's TMA stores need the TMA path's descriptors; its shared memory is
// reserved all the same). The defaults are what runs untuned:
// GemmWgmmaSpecFor*'s own defaults (kernel_spec.h; a test checks that they agree).
struct WgmmaConfig {
  int tile_n = 256;
  int stages = 3;
  bool cp_async = false;
  friend bool operator==(const WgmmaConfig&, const WgmmaConfig&) = default;
};

struct GemmKernelChoice {
  jit::KernelSpec spec;
  std::string source_name;  // jit::ExampleKernelSource name: "gemm_wgmma.cuh" / "gemm_mma.cuh"
  bool wgmma = false;
  WgmmaConfig wgmma_config;  // what spec instantiates, when wgmma
};

// "128x256x4 tma": tile (M x N), stages, load path; the label the bench and `syncopate tune` print.
std::string WgmmaConfigName(const WgmmaConfig& config);

// Why `config` cannot be compiled and launched on Hopper ("" when it can): tile_n 128 or 256,
// 2..jit::kWgmmaMaxStages stages, shared memory within jit::kHopperMaxDynamicSmem.
std::string WgmmaConfigProblem(const WgmmaConfig& config);

// The GEMM kernel for C[m, n] = A[m, k] B[n, k]^T on a GPU of compute capability `cc`. wgmma
// needs cc 90 and k % 8 == 0 (its TMA producer path; other k would take its slow element-wise
// path, where mma.sync is faster). `force_mma` keeps the fallback (baselines).
// `tuned` (e.g. from FindTunedWgmma) replaces the default WgmmaConfig when wgmma is chosen; it is
// ignored when mma.sync is.
GemmKernelChoice SelectGemm(int cc, GemmWorkload workload, int64_t m, int64_t n, int64_t k,
                            plan::DType dtype, bool force_mma = false,
                            const WgmmaConfig* tuned = nullptr);

// The tuning-table key of the wgmma kernel for this GPU and shape (family "gemm_wgmma", arch
// ArchFor(cc)). The workload is not part of it: AllGather and ReduceScatter run the same GEMM.
tune::TuningKey WgmmaTuningKey(int cc, int64_t m, int64_t n, int64_t k, plan::DType dtype);

// The tuned wgmma configuration for this GPU and shape from <cache_dir>/tuning/ ("": the kernel
// cache's default directory, cache::DefaultCacheDir()). nullopt when nothing was tuned for it;
// an error (naming the file) when the entry is malformed or not a valid WgmmaConfig.
absl::StatusOr<std::optional<WgmmaConfig>> FindTunedWgmma(const std::string& cache_dir, int cc,
                                                          int64_t m, int64_t n, int64_t k,
                                                          plan::DType dtype);

}  // namespace syncopate::gemm
