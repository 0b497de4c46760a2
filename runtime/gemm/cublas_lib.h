// cuBLAS, opened at run time (libcublas.so.13 dlopen'ed, like libcuda: the binary starts where no
// CUDA libraries are installed), for the benchmarks and the autotuner: cuBLAS's GEMM time as the
// reference figure next to Syncopate's kernels, and an fp32 reference GEMM to check outputs
// against (16-bit inputs, fp32 accumulation and output: independent of the kernels tested).
// Thread-safety: one thread at a time per CublasLib (a cuBLAS handle bound to one stream).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "core/plan/plan.h"

namespace syncopate::gemm {

class CublasLib {
 public:
  // The calling thread's current context is the one the handle is created in.
  static absl::StatusOr<std::unique_ptr<CublasLib>> Open(CUstream stream);
  ~CublasLib();
  CublasLib(const CublasLib&) = delete;
  CublasLib& operator=(const CublasLib&) = delete;

  // Row-major C[m, n] = A[m, k] B[n, k]^T with A, B of `in` (bf16 or f16). out_f32: C is fp32
  // (+= when accumulate), else of `in` (accumulate ignored).
  absl::Status Gemm(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, int64_t m, int64_t n, int64_t k,
                    plan::DType in, bool out_f32, bool accumulate) const;

 private:
  struct Impl;
  explicit CublasLib(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace syncopate::gemm
