// Helper kernels for GPU tests and benchmarks, compiled with NVRTC for the GPU at hand: random
// fill of bf16 / fp16 buffers (counter-based hash, so any rank can regenerate any rank's data),
// NaN poisoning, an fp32 reference GEMM C[M,N] (+)= A[M,K] * B[N,K]^T (one thread per output,
// fp32 accumulation; the reference for every correctness check), and host-side comparison.
// Thread-safety: one thread at a time per TestKernels (like the context it lives in).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/plan.h"
#include "runtime/cuda/handles.h"

namespace syncopate::workloads {

class TestKernels {
 public:
  static absl::StatusOr<TestKernels> Load(const cuda::Context& context);

  // p[i] = uniform(-1, 1) from (seed, i), rounded to `dtype` (kBF16 or kF16).
  absl::Status Fill(CUdeviceptr p, int64_t count, plan::DType dtype, uint64_t seed,
                    CUstream stream) const;
  // Every 16-bit element becomes 0xFFFF (NaN in bf16 and fp16).
  absl::Status Poison16(CUdeviceptr p, int64_t count, CUstream stream) const;
  absl::Status ReferenceGemm(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c_f32, int m, int n, int k,
                             plan::DType dtype, bool accumulate, CUstream stream) const;

 private:
  const cuda::DriverApi* api_ = nullptr;
  cuda::Module module_;
  CUfunction fill_ = nullptr;
  CUfunction poison_ = nullptr;
  CUfunction gemm_ = nullptr;
};

// NVRTC-compiles `source` for `context`'s GPU (not through the kernel cache), loads it and stores
// each named function's handle through its pointer. TestKernels and tp_bench's CheckKernels share
// it.
absl::StatusOr<cuda::Module> LoadHelperModule(
    const cuda::Context& context, const std::string& source, const std::string& program_name,
    std::initializer_list<std::pair<const char*, CUfunction*>> functions);

float HalfBitsToFloat(uint16_t bits, plan::DType dtype);

// Copies `count` 16-bit elements / floats to the host (synchronous on `stream`).
absl::StatusOr<std::vector<uint16_t>> Download16(const cuda::DriverApi& api, CUdeviceptr p,
                                                 int64_t count, CUstream stream);
absl::StatusOr<std::vector<float>> DownloadF32(const cuda::DriverApi& api, CUdeviceptr p,
                                               int64_t count, CUstream stream);

// Checks every element of `got` (rows x cols, 16-bit `dtype`) against `want` (fp32): finite, and
// |got - want| <= rtol * |want| + atol * max|want|; and ||got - want|| / ||want|| <= rtol.
// The error names the first bad element and the relative error.
absl::Status CompareToReference(const std::vector<uint16_t>& got, const std::vector<float>& want,
                                int64_t rows, int64_t cols, plan::DType dtype, double rtol,
                                double atol, const std::string& what);

// The tolerances for CompareToReference shared by the workloads and tp_bench: bf16 output rounding
// is 2^-8 relative and fp32 accumulation order differs a little. Partials rounded to 16 bits before
// a reduction (ReduceScatter / AllReduce) get twice the relative and 4x the absolute slack.
inline constexpr double kRtol = 1e-2;
inline constexpr double kAtol = 2e-3;
inline constexpr double kReduceRtol = 2 * kRtol;
inline constexpr double kReduceAtol = 4 * kAtol;

}  // namespace syncopate::workloads
