// cuBLAS, opened at run time (libcublas.so.13 dlopen'ed, like libcuda: the binary starts where no
// CUDA libraries are installed). Two uses: the cuBLAS GEMM time of each per-rank problem (a
// reference figure next to the local kernel), and the fp32 reference GEMM every output is
// checked against (bf16 inputs, fp32 accumulation and output: independent of the kernels tested).
// Thread-safety: one thread at a time per CublasLib (a cuBLAS handle bound to one stream).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace syncopate::tp_bench {

class CublasLib {
 public:
  // The calling thread's current context is the one the handle is created in.
  static absl::StatusOr<std::unique_ptr<CublasLib>> Open(CUstream stream);
  ~CublasLib();
  CublasLib(const CublasLib&) = delete;
  CublasLib& operator=(const CublasLib&) = delete;

  // Row-major C[m, n] = A[m, k] B[n, k]^T with bf16 A, B. out_f32: C is fp32 (+= when
  // accumulate), else bf16 (accumulate ignored).
  absl::Status Gemm(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, int64_t m, int64_t n, int64_t k,
                    bool out_f32, bool accumulate) const;

 private:
  struct Impl;
  explicit CublasLib(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace syncopate::tp_bench
