// Kernel-cache benchmarks: what a request costs at each level.
//   BM_ColdCompile/small  real NVRTC compile of a small kernel (sm_90 cubin), no cache
//   BM_ColdCompile/gemm   real NVRTC compile of a tiled shared-memory GEMM (a few
//                         template instantiations), no cache
//   BM_KeyFromParts       building the key for the GEMM source (hashing the source)
//   BM_MemoryHit          GetOrCompile on a key in memory (goal < 10 us)
//   BM_DiskHit            GetOrCompile with memory disabled: read + verify the entry (goal < 2 ms)
// Run: ./cache_bench [--benchmark_filter=Hit]
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "jit/cache/kernel_cache.h"
#include "jit/nvrtc/nvrtc_compiler.h"

namespace syncopate {
namespace {

constexpr char kSmallKernel[] = R"(
extern "C" __global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
)";

// A classic tiled GEMM, instantiated for three tile shapes: roughly the size of a real local
// kernel before the overlap compiler adds its schedule tables.
constexpr char kGemmKernel[] = R"(
template <int BM, int BN, int BK, int TM, int TN>
__device__ void gemm_tile(const float* __restrict__ A, const float* __restrict__ B,
                          float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BK][BM];
  __shared__ float Bs[BK][BN];
  const int tx = threadIdx.x % (BN / TN), ty = threadIdx.x / (BN / TN);
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = threadIdx.x; i < BM * BK; i += blockDim.x) {
      int r = i / BK, c = i % BK;
      As[c][r] = (row0 + r < M && k0 + c < K) ? A[(row0 + r) * K + k0 + c] : 0.f;
    }
    for (int i = threadIdx.x; i < BK * BN; i += blockDim.x) {
      int r = i / BN, c = i % BN;
      Bs[r][c] = (k0 + r < K && col0 + c < N) ? B[(k0 + r) * N + col0 + c] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int m = 0; m < TM; ++m) a[m] = As[k][ty * TM + m];
#pragma unroll
      for (int n = 0; n < TN; ++n) b[n] = Bs[k][tx * TN + n];
#pragma unroll
      for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n) acc[m][n] += a[m] * b[n];
    }
    __syncthreads();
  }
#pragma unroll
  for (int m = 0; m < TM; ++m)
#pragma unroll
    for (int n = 0; n < TN; ++n) {
      int r = row0 + ty * TM + m, c = col0 + tx * TN + n;
      if (r < M && c < N) C[r * N + c] = acc[m][n];
    }
}
extern "C" __global__ void gemm_128x128(const float* A, const float* B, float* C, int M, int N, int K) {
  gemm_tile<128, 128, 8, 8, 8>(A, B, C, M, N, K);
}
extern "C" __global__ void gemm_64x128(const float* A, const float* B, float* C, int M, int N, int K) {
  gemm_tile<64, 128, 16, 4, 8>(A, B, C, M, N, K);
}
extern "C" __global__ void gemm_64x64(const float* A, const float* B, float* C, int M, int N, int K) {
  gemm_tile<64, 64, 16, 4, 4>(A, B, C, M, N, K);
}
)";

nvrtc::CompiledKernel MustCompile(const char* source, benchmark::State& state) {
  nvrtc::CompileOptions options;
  options.arch = "sm_90";
  absl::StatusOr<nvrtc::CompiledKernel> kernel = nvrtc::Compile(source, options);
  if (!kernel.ok()) {
    state.SkipWithError(std::string(kernel.status().message()).c_str());
    return {};
  }
  return *std::move(kernel);
}

void BM_ColdCompile(benchmark::State& state) {
  const char* source = state.range(0) == 0 ? kSmallKernel : kGemmKernel;
  size_t cubin = 0;
  for (auto _ : state) cubin = MustCompile(source, state).binary.size();
  state.counters["cubin_bytes"] = static_cast<double>(cubin);
  state.SetLabel(state.range(0) == 0 ? "small" : "gemm");
}
BENCHMARK(BM_ColdCompile)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(3);

cache::CacheKey GemmKey() {
  return cache::CacheKey::FromParts({.source = kGemmKernel,
                                     .nvrtc_version = nvrtc::NvrtcVersion(),
                                     .options = {"-std=c++17"},
                                     .arch = "sm_90",
                                     .plan_hash = "bench"});
}

void BM_KeyFromParts(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(GemmKey());
}
BENCHMARK(BM_KeyFromParts);

// A scratch cache directory for one benchmark, removed afterwards.
class ScratchCache {
 public:
  explicit ScratchCache(uint64_t memory_budget) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "cache_bench_XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    cache_ = *cache::KernelCache::Open({.dir = dir_, .memory_budget_bytes = memory_budget});
  }
  ~ScratchCache() {
    cache_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  cache::KernelCache& cache() { return *cache_; }

 private:
  std::string dir_;
  std::unique_ptr<cache::KernelCache> cache_;
};

void RunHits(benchmark::State& state, uint64_t memory_budget, cache::KernelCache::Source want) {
  ScratchCache scratch(memory_budget);
  nvrtc::CompiledKernel compiled = MustCompile(kGemmKernel, state);
  cache::CacheKey key = GemmKey();
  auto compile = [&]() -> absl::StatusOr<nvrtc::CompiledKernel> { return compiled; };
  if (!scratch.cache().GetOrCompile(key, compile).ok()) {
    state.SkipWithError("priming the cache failed");
    return;
  }
  for (auto _ : state) {
    auto result = scratch.cache().GetOrCompile(key, compile);
    if (!result.ok() || result->source != want) {
      state.SkipWithError("unexpected cache level");
      break;
    }
    benchmark::DoNotOptimize(result->kernel);
  }
  state.counters["entry_bytes"] = static_cast<double>(compiled.binary.size());
}

void BM_MemoryHit(benchmark::State& state) {
  RunHits(state, 64 << 20, cache::KernelCache::Source::kMemory);
}
BENCHMARK(BM_MemoryHit)->Unit(benchmark::kMicrosecond);

void BM_DiskHit(benchmark::State& state) {
  RunHits(state, /*memory_budget=*/0, cache::KernelCache::Source::kDisk);
}
BENCHMARK(BM_DiskHit)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace syncopate
