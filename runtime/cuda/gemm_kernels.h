// Which local GEMM kernel runs on which GPU: the Hopper wgmma kernel (examples/kernels/
// gemm_wgmma.cuh, needs the sm_90a target) on compute capability 9.0, the mma.sync kernel
// (gemm_mma.cuh) everywhere else and for shapes the wgmma kernel would only run slowly; and the
// NVRTC target each GPU gets. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "jit/compiler/kernel_spec.h"
#include "runtime/plan/plan.h"

namespace syncopate::cuda {

// NVRTC target for a device of compute capability `cc` (e.g. 90): "sm_90a" on sm_90, where the
// arch-specific features (wgmma, setmaxnreg) exist and the cubin only ever runs on that exact
// chip; "sm_<cc>" elsewhere.
std::string ArchFor(int cc);

enum class GemmWorkload { kAllGather, kReduceScatter };

struct GemmKernelChoice {
  jit::KernelSpec spec;
  std::string source_name;  // jit::ExampleKernelSource name: "gemm_wgmma.cuh" / "gemm_mma.cuh"
  bool wgmma = false;
};

// The GEMM kernel for C[m, n] = A[m, k] B[n, k]^T on a GPU of compute capability `cc`. wgmma
// needs cc 90 and k % 8 == 0 (its cp.async producer path; other k would take its slow
// element-wise path, where mma.sync is faster). `force_mma` keeps the fallback (baselines).
GemmKernelChoice SelectGemm(int cc, GemmWorkload workload, int64_t m, int64_t n, int64_t k,
                            plan::DType dtype, bool force_mma = false);

}  // namespace syncopate::cuda
