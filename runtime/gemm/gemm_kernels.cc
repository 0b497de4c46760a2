// GEMM kernel selection by GPU architecture and tuning table; see gemm_kernels.h.
#include "runtime/gemm/gemm_kernels.h"

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "jit/cache/disk_store.h"
#include "runtime/cuda/kernel_loader.h"

namespace syncopate::gemm {

std::string WgmmaConfigName(const WgmmaConfig& c) {
  return absl::StrCat("128x", c.tile_n, "x", c.stages, c.cp_async ? " cpasync" : " tma");
}

std::string WgmmaConfigProblem(const WgmmaConfig& c) {
  if (c.tile_n != 128 && c.tile_n != 256) {
    return absl::StrCat("tile_n ", c.tile_n, " is not 128 or 256");
  }
  if (c.stages < 2 || c.stages > jit::kWgmmaMaxStages) {
    return absl::StrCat("stages ", c.stages, " is outside 2..", jit::kWgmmaMaxStages);
  }
  if (const int smem = jit::GemmWgmmaSmemBytes(128, c.tile_n, c.stages);
      smem > jit::kHopperMaxDynamicSmem) {
    return absl::StrCat("needs ", smem, " bytes of shared memory, Hopper allows ",
                        jit::kHopperMaxDynamicSmem);
  }
  return "";
}

GemmKernelChoice SelectGemm(int cc, GemmWorkload workload, int64_t m, int64_t n, int64_t k,
                            plan::DType dtype, bool force_mma, const WgmmaConfig* tuned) {
  const bool half = dtype == plan::DType::kBF16 || dtype == plan::DType::kF16;
  GemmKernelChoice c;
  c.wgmma = !force_mma && cc == 90 && half && k % 8 == 0;
  if (c.wgmma) {
    const bool ag = workload == GemmWorkload::kAllGather;
    if (tuned == nullptr) {  // the spec's defaults: whatever its owner made the untuned kernel
      c.spec = ag ? jit::GemmWgmmaSpecForAllGather(m, n, k, dtype)
                  : jit::GemmWgmmaSpecForReduceScatter(m, n, k, dtype);
    } else {
      const WgmmaConfig& w = *tuned;
      c.wgmma_config = w;
      c.spec = ag ? jit::GemmWgmmaSpecForAllGather(m, n, k, dtype, 128, w.tile_n, w.stages)
                  : jit::GemmWgmmaSpecForReduceScatter(m, n, k, dtype, 128, w.tile_n, w.stages);
      // gemm_wgmma's kLoads template argument: 1 = kLoadCpAsync; absent = TMA (its default).
      if (w.cp_async) c.spec.template_args.push_back("1");
    }
    c.source_name = "gemm_wgmma.cuh";
  } else {
    c.spec = workload == GemmWorkload::kAllGather ? jit::GemmSpecForAllGather(m, n, k, dtype)
                                                  : jit::GemmSpecForReduceScatter(m, n, k, dtype);
    c.source_name = "gemm_mma.cuh";
  }
  return c;
}

tune::TuningKey WgmmaTuningKey(int cc, int64_t m, int64_t n, int64_t k, plan::DType dtype) {
  return {"gemm_wgmma", cuda::ArchFor(cc), dtype, m, n, k};
}

absl::StatusOr<std::optional<WgmmaConfig>> FindTunedWgmma(const std::string& cache_dir, int cc,
                                                          int64_t m, int64_t n, int64_t k,
                                                          plan::DType dtype) {
  std::string dir = cache_dir;
  if (dir.empty()) {
    ASSIGN_OR_RETURN(dir, cache::DefaultCacheDir());
  }
  const tune::TuningTable table(dir);
  const tune::TuningKey key = WgmmaTuningKey(cc, m, n, k, dtype);
  absl::StatusOr<tune::TunedGemm> tuned = table.Lookup(key);
  if (absl::IsNotFound(tuned.status())) return std::nullopt;
  if (!tuned.ok()) return tuned.status();
  // The table checks its format; the kernel's own limits are checked here (gemm_wgmma.cuh's
  // static_asserts), so a bad entry is an error now rather than an NVRTC failure later.
  const WgmmaConfig config{tuned->tile_n, tuned->stages, tuned->loads == "cpasync"};
  if (std::string problem = WgmmaConfigProblem(config); !problem.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(table.PathFor(key), ": not a gemm_wgmma configuration: ", problem));
  }
  return config;
}

}  // namespace syncopate::gemm
