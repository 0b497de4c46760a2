// GEMM kernel selection by GPU architecture; see gemm_kernels.h.
#include "runtime/cuda/gemm_kernels.h"

#include "absl/strings/str_cat.h"

namespace syncopate::cuda {

std::string ArchFor(int cc) { return cc == 90 ? "sm_90a" : absl::StrCat("sm_", cc); }

GemmKernelChoice SelectGemm(int cc, GemmWorkload workload, int64_t m, int64_t n, int64_t k,
                            plan::DType dtype, bool force_mma) {
  const bool half = dtype == plan::DType::kBF16 || dtype == plan::DType::kF16;
  GemmKernelChoice c;
  c.wgmma = !force_mma && cc == 90 && half && k % 8 == 0;
  if (c.wgmma) {
    c.spec = workload == GemmWorkload::kAllGather ? jit::GemmWgmmaSpecForAllGather(m, n, k, dtype)
                                                  : jit::GemmWgmmaSpecForReduceScatter(m, n, k, dtype);
    c.source_name = "gemm_wgmma.cuh";
  } else {
    c.spec = workload == GemmWorkload::kAllGather ? jit::GemmSpecForAllGather(m, n, k, dtype)
                                                  : jit::GemmSpecForReduceScatter(m, n, k, dtype);
    c.source_name = "gemm_mma.cuh";
  }
  return c;
}

}  // namespace syncopate::cuda
