// Device-side output checks; see check_kernels.h.
#include "bench/multigpu/check_kernels.h"

#include <cmath>
#include <cstring>
#include <span>
#include <string>

#include "core/base/status_macros.h"
#include "runtime/cuda/workloads/test_kernels.h"

namespace syncopate::tp_bench {
namespace {

// acc (doubles): [0] sum (got-want)^2, [1] sum want^2, [2] sum got, [3] sum got^2;
// (unsigned long long, after the doubles): [4] non-finite, [5] out of tolerance, [6] mismatches;
// [7] absmax as float bits (non-negative floats order like their bits).
// Per-block reduction through shared memory first: one atomic per block and quantity.
constexpr char kSource[] = R"cuda(
__device__ __forceinline__ float Bf16(unsigned short b) { return __uint_as_float(((unsigned)b) << 16); }

template <class T>
__device__ T BlockSum(T v, T* smem) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  T total = 0;
  if (threadIdx.x == 0) for (int w = 0; w < blockDim.x / 32; ++w) total += smem[w];
  return total;  // meaningful in thread 0 only
}

extern "C" __global__ void compare(const unsigned short* got, const float* want, long long n,
                                   float rtol, float atol, double* acc) {
  __shared__ double sd[32];
  __shared__ unsigned long long su[32];
  double e2 = 0, r2 = 0, s = 0, s2 = 0;
  unsigned long long bad = 0, tol = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const float g = Bf16(got[i]);
    const float w = want[i];
    if (!isfinite(g)) { ++bad; continue; }
    const double d = (double)g - (double)w;
    e2 += d * d;
    r2 += (double)w * w;
    s += g;
    s2 += (double)g * g;
    if (fabsf(g - w) > rtol * fabsf(w) + atol) ++tol;
  }
  double t;
  t = BlockSum(e2, sd); if (threadIdx.x == 0) atomicAdd(&acc[0], t);
  t = BlockSum(r2, sd); if (threadIdx.x == 0) atomicAdd(&acc[1], t);
  t = BlockSum(s, sd);  if (threadIdx.x == 0) atomicAdd(&acc[2], t);
  t = BlockSum(s2, sd); if (threadIdx.x == 0) atomicAdd(&acc[3], t);
  unsigned long long* u = (unsigned long long*)acc;
  unsigned long long c;
  c = BlockSum(bad, su); if (threadIdx.x == 0) atomicAdd(&u[4], c);
  c = BlockSum(tol, su); if (threadIdx.x == 0) atomicAdd(&u[5], c);
}

extern "C" __global__ void mismatch(const unsigned short* a, const unsigned short* b, long long n,
                                    double* acc) {
  __shared__ unsigned long long su[32];
  unsigned long long c = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    c += a[i] != b[i];
  }
  c = BlockSum(c, su);
  if (threadIdx.x == 0) atomicAdd(&((unsigned long long*)acc)[6], c);
}

extern "C" __global__ void absmax(const float* p, long long n, double* acc) {
  float m = 0.f;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const float v = fabsf(p[i]);
    m = isfinite(v) && v > m ? v : m;
  }
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0) atomicMax(&((unsigned*)(acc + 7))[0], __float_as_uint(m));
}
)cuda";

constexpr int kAccWords = 8;
constexpr unsigned kBlocks = 1056;  // 8 per SM on an H200; grid-stride covers any size
constexpr unsigned kThreads = 256;

struct Acc {
  double d[4];
  unsigned long long u[3];
  unsigned absmax_bits[2];
};
static_assert(sizeof(Acc) == kAccWords * 8);

}  // namespace

absl::StatusOr<CheckKernels> CheckKernels::Load(const cuda::Context& context) {
  CheckKernels k;
  k.api_ = &context.api();
  ASSIGN_OR_RETURN(
      k.module_,
      workloads::LoadHelperModule(
          context, kSource, "syncopate_tp_bench_checks.cu",
          {{"compare", &k.compare_}, {"mismatch", &k.mismatch_}, {"absmax", &k.absmax_}}));
  ASSIGN_OR_RETURN(k.acc_, cuda::DeviceBuffer::Allocate(context.api(), sizeof(Acc)));
  return k;
}

namespace {

absl::StatusOr<Acc> RunAndRead(const cuda::DriverApi& api, CUfunction fn, void** params,
                               CUdeviceptr acc, CUstream stream) {
  CU_RETURN_IF_ERROR(api.cuMemsetD32Async(acc, 0, sizeof(Acc) / 4, stream));
  CU_RETURN_IF_ERROR(
      api.cuLaunchKernel(fn, kBlocks, 1, 1, kThreads, 1, 1, 0, stream, params, nullptr));
  CU_RETURN_IF_ERROR(api.cuStreamSynchronize(stream));
  Acc out;
  // Synchronous copy into pageable memory is safe here: the stream is already drained.
  CU_RETURN_IF_ERROR(api.cuMemcpyDtoH(&out, acc, sizeof(Acc)));
  return out;
}

}  // namespace

absl::StatusOr<CompareResult> CheckKernels::Compare(CUdeviceptr got_bf16, CUdeviceptr want_f32,
                                                    int64_t rows, int64_t cols, double rtol,
                                                    double atol_abs, CUstream stream) const {
  long long n = rows * cols;
  float rt = static_cast<float>(rtol), at = static_cast<float>(atol_abs);
  CUdeviceptr acc = acc_.get();
  void* params[] = {&got_bf16, &want_f32, &n, &rt, &at, &acc};
  ASSIGN_OR_RETURN(Acc a, RunAndRead(*api_, compare_, params, acc, stream));
  CompareResult r;
  r.elements = n;
  r.nonfinite = static_cast<int64_t>(a.u[0]);
  r.out_of_tolerance = static_cast<int64_t>(a.u[1]);
  r.rel_err = a.d[1] > 0 ? std::sqrt(a.d[0] / a.d[1]) : (a.d[0] > 0 ? INFINITY : 0.0);
  r.out_sum = a.d[2];
  r.out_sq = a.d[3];
  return r;
}

absl::StatusOr<int64_t> CheckKernels::Mismatch(CUdeviceptr a, CUdeviceptr b, int64_t count16,
                                               CUstream stream) const {
  long long n = count16;
  CUdeviceptr acc = acc_.get();
  void* params[] = {&a, &b, &n, &acc};
  ASSIGN_OR_RETURN(Acc r, RunAndRead(*api_, mismatch_, params, acc, stream));
  return static_cast<int64_t>(r.u[2]);
}

absl::StatusOr<double> CheckKernels::AbsMax(CUdeviceptr p_f32, int64_t count,
                                            CUstream stream) const {
  long long n = count;
  CUdeviceptr acc = acc_.get();
  void* params[] = {&p_f32, &n, &acc};
  ASSIGN_OR_RETURN(Acc r, RunAndRead(*api_, absmax_, params, acc, stream));
  float f;
  std::memcpy(&f, &r.absmax_bits[0], 4);
  return static_cast<double>(f);
}

}  // namespace syncopate::tp_bench
