// cuBLAS through dlopen; see cublas_lib.h.
#include "runtime/gemm/cublas_lib.h"

#include <cublas_v2.h>
#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace syncopate::gemm {

struct CublasLib::Impl {
  void* lib = nullptr;
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  // cublasGemmEx is overloaded in C++: the C entry point's type, spelled out.
  cublasStatus_t (*gemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                         const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                         int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                         cublasGemmAlgo_t) = nullptr;
  cublasHandle_t handle = nullptr;
};

CublasLib::CublasLib(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CublasLib::~CublasLib() {
  if (impl_ && impl_->handle != nullptr) impl_->destroy(impl_->handle);
  // The library stays loaded: cuBLAS registers process-wide state that outlives handles.
}

absl::StatusOr<std::unique_ptr<CublasLib>> CublasLib::Open(CUstream stream) {
  auto impl = std::make_unique<Impl>();
  for (const char* name : {"libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so.13",
                           "libcublas.so.12", "libcublas.so"}) {
    impl->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (impl->lib != nullptr) break;
  }
  if (impl->lib == nullptr) {
    return absl::NotFoundError(absl::StrCat("cuBLAS not found (libcublas.so.13): ", dlerror()));
  }
  impl->create = reinterpret_cast<decltype(impl->create)>(dlsym(impl->lib, "cublasCreate_v2"));
  impl->destroy = reinterpret_cast<decltype(impl->destroy)>(dlsym(impl->lib, "cublasDestroy_v2"));
  impl->set_stream =
      reinterpret_cast<decltype(impl->set_stream)>(dlsym(impl->lib, "cublasSetStream_v2"));
  impl->gemm = reinterpret_cast<decltype(impl->gemm)>(dlsym(impl->lib, "cublasGemmEx"));
  if (!impl->create || !impl->destroy || !impl->set_stream || !impl->gemm) {
    dlclose(impl->lib);
    return absl::NotFoundError("cuBLAS symbols missing");
  }
  if (cublasStatus_t s = impl->create(&impl->handle); s != CUBLAS_STATUS_SUCCESS) {
    impl->handle = nullptr;
    dlclose(impl->lib);
    return absl::InternalError(absl::StrCat("cublasCreate: status ", static_cast<int>(s)));
  }
  // Unbound, cuBLAS would run on the legacy stream, outside the caller's events and ordering.
  if (cublasStatus_t s = impl->set_stream(impl->handle, reinterpret_cast<cudaStream_t>(stream));
      s != CUBLAS_STATUS_SUCCESS) {
    impl->destroy(impl->handle);
    impl->handle = nullptr;
    return absl::InternalError(absl::StrCat("cublasSetStream: status ", static_cast<int>(s)));
  }
  return std::unique_ptr<CublasLib>(new CublasLib(std::move(impl)));
}

absl::Status CublasLib::Gemm(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, int64_t m, int64_t n,
                             int64_t k, plan::DType in, bool out_f32, bool accumulate) const {
  if (in != plan::DType::kBF16 && in != plan::DType::kF16) {
    return absl::InvalidArgumentError("cuBLAS GEMM: inputs must be bf16 or f16");
  }
  const cudaDataType_t t = in == plan::DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  // Row-major C[m,n] = A[m,k] B[n,k]^T is column-major C^T[n,m] = op(B)[n,k] A^T[k,m], with B
  // stored as column-major [k, n] (op = T) and A as column-major [k, m].
  const float alpha = 1.0f, beta = out_f32 && accumulate ? 1.0f : 0.0f;
  const cublasStatus_t s = impl_->gemm(
      impl_->handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
      static_cast<int>(k), &alpha, reinterpret_cast<void*>(b), t, static_cast<int>(k),
      reinterpret_cast<void*>(a), t, static_cast<int>(k), &beta, reinterpret_cast<void*>(c),
      out_f32 ? CUDA_R_32F : t, static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cublasGemmEx(", m, "x", n, "x", k, ", ",
                                            out_f32 ? "f32" : plan::DTypeName(in), " out): status ",
                                            static_cast<int>(s)));
  }
  return absl::OkStatus();
}

}  // namespace syncopate::gemm
