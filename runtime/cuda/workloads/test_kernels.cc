// Helper kernels for GPU tests and benchmarks; see test_kernels.h.
#include "runtime/cuda/workloads/test_kernels.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/half_float.h"
#include "core/base/status_macros.h"
#include "jit/nvrtc/nvrtc_compiler.h"

namespace syncopate::workloads {
namespace {

constexpr char kSource[] = R"cuda(
__device__ __forceinline__ float ToF(unsigned short b, int is_bf16) {
  if (is_bf16) return __uint_as_float(((unsigned)b) << 16);
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(b));
  return f;
}
extern "C" __global__ void fill_random(unsigned short* p, long long n, unsigned long long seed,
                                       int is_bf16) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    unsigned long long x = seed ^ ((unsigned long long)i * 0x9E3779B97F4A7C15ull);
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    float f = (float)(x >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
    unsigned short bits;
    if (is_bf16) {
      unsigned u = __float_as_uint(f);
      u += 0x7fffu + ((u >> 16) & 1u);
      bits = (unsigned short)(u >> 16);
    } else {
      asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(f));
    }
    p[i] = bits;
  }
}
extern "C" __global__ void poison16(unsigned short* p, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    p[i] = 0xFFFFu;
  }
}
extern "C" __global__ void ref_gemm(const unsigned short* A, const unsigned short* B, float* C,
                                    int M, int N, int K, int is_bf16, int accumulate) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  const int m = blockIdx.y;
  if (n >= N || m >= M) return;
  const unsigned short* a = A + (long long)m * K;
  const unsigned short* b = B + (long long)n * K;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(ToF(a[k], is_bf16), ToF(b[k], is_bf16), acc);
  float* c = C + (long long)m * N + n;
  *c = accumulate ? *c + acc : acc;
}
)cuda";

template <class T>
absl::StatusOr<std::vector<T>> Download(const cuda::DriverApi& api, CUdeviceptr p, int64_t count,
                                        CUstream stream) {
  CU_RETURN_IF_ERROR(api.cuStreamSynchronize(stream));
  std::vector<T> out(static_cast<size_t>(count));
  CU_RETURN_IF_ERROR(api.cuMemcpyDtoH(out.data(), p, out.size() * sizeof(T)));
  return out;
}

}  // namespace

absl::StatusOr<cuda::Module> LoadHelperModule(
    const cuda::Context& context, const std::string& source, const std::string& program_name,
    std::initializer_list<std::pair<const char*, CUfunction*>> functions) {
  nvrtc::CompileOptions options;
  options.arch = absl::StrCat("sm_", context.compute_capability());
  options.program_name = program_name;
  ASSIGN_OR_RETURN(nvrtc::CompiledKernel compiled, nvrtc::Compile(source, options));
  ASSIGN_OR_RETURN(cuda::Module module, cuda::Module::LoadCompiled(context.api(), compiled));
  for (const auto& [name, function] : functions) {
    ASSIGN_OR_RETURN(*function, module.Function(name));
  }
  return module;
}

absl::StatusOr<TestKernels> TestKernels::Load(const cuda::Context& context) {
  TestKernels k;
  k.api_ = &context.api();
  ASSIGN_OR_RETURN(k.module_, LoadHelperModule(context, kSource, "syncopate_test_kernels.cu",
                                               {{"fill_random", &k.fill_},
                                                {"poison16", &k.poison_},
                                                {"ref_gemm", &k.gemm_}}));
  return k;
}

absl::Status TestKernels::Fill(CUdeviceptr p, int64_t count, plan::DType dtype, uint64_t seed,
                               CUstream stream) const {
  long long n = count;
  unsigned long long s = seed;
  int is_bf16 = dtype == plan::DType::kBF16;
  void* params[] = {&p, &n, &s, &is_bf16};
  CU_RETURN_IF_ERROR(api_->cuLaunchKernel(fill_, 1024, 1, 1, 256, 1, 1, 0, stream, params, nullptr));
  return absl::OkStatus();
}

absl::Status TestKernels::Poison16(CUdeviceptr p, int64_t count, CUstream stream) const {
  long long n = count;
  void* params[] = {&p, &n};
  CU_RETURN_IF_ERROR(
      api_->cuLaunchKernel(poison_, 1024, 1, 1, 256, 1, 1, 0, stream, params, nullptr));
  return absl::OkStatus();
}

absl::Status TestKernels::ReferenceGemm(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c_f32, int m,
                                        int n, int k, plan::DType dtype, bool accumulate,
                                        CUstream stream) const {
  int is_bf16 = dtype == plan::DType::kBF16;
  int acc = accumulate ? 1 : 0;
  void* params[] = {&a, &b, &c_f32, &m, &n, &k, &is_bf16, &acc};
  CU_RETURN_IF_ERROR(api_->cuLaunchKernel(gemm_, (n + 127) / 128, m, 1, 128, 1, 1, 0, stream,
                                          params, nullptr));
  return absl::OkStatus();
}

float HalfBitsToFloat(uint16_t bits, plan::DType dtype) {
  return dtype == plan::DType::kBF16 ? Bf16ToFloat(bits) : HalfToFloat(bits);
}

absl::StatusOr<std::vector<uint16_t>> Download16(const cuda::DriverApi& api, CUdeviceptr p,
                                                 int64_t count, CUstream stream) {
  return Download<uint16_t>(api, p, count, stream);
}

absl::StatusOr<std::vector<float>> DownloadF32(const cuda::DriverApi& api, CUdeviceptr p,
                                               int64_t count, CUstream stream) {
  return Download<float>(api, p, count, stream);
}

absl::Status CompareToReference(const std::vector<uint16_t>& got, const std::vector<float>& want,
                                int64_t rows, int64_t cols, plan::DType dtype, double rtol,
                                double atol, const std::string& what) {
  const int64_t n = rows * cols;
  if (static_cast<int64_t>(got.size()) < n || static_cast<int64_t>(want.size()) < n) {
    return absl::InternalError("compare: buffers too small");
  }
  double max_ref = 0, err2 = 0, ref2 = 0;
  for (int64_t i = 0; i < n; ++i) max_ref = std::max(max_ref, std::fabs(double(want[i])));
  int64_t bad = 0, first_bad = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double g = HalfBitsToFloat(got[i], dtype);
    const double w = want[i];
    const double d = g - w;
    err2 += d * d;
    ref2 += w * w;
    if (!std::isfinite(g) || std::fabs(d) > rtol * std::fabs(w) + atol * max_ref) {
      if (first_bad < 0) first_bad = i;
      ++bad;
    }
  }
  const double rel = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  if (bad > 0 || !(rel <= rtol)) {
    std::string where = "none";
    if (first_bad >= 0) {
      where = absl::StrFormat("[%d, %d]: got %g, want %g", first_bad / cols, first_bad % cols,
                              HalfBitsToFloat(got[first_bad], dtype), want[first_bad]);
    }
    return absl::DataLossError(absl::StrFormat(
        "%s: %d of %d elements wrong (first %s); relative error %g (tolerance %g)", what, bad, n,
        where, rel, rtol));
  }
  return absl::OkStatus();
}

}  // namespace syncopate::workloads
