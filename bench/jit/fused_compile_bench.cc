// Cold NVRTC compile of the fused AllGather+GEMM (examples/kernels/gemm_mma.cuh) through the
// shared build path, against the local (identity-schedule) variant of the same kernel: what the
// overlap tables and schedule add to compile time. No cache, so every iteration compiles.
// Args: world size; the GEMM is M=8192, N=4096, K=4096 with 128x128 tiles, 2 chunks per shard.
#include <string>

#include "benchmark/benchmark.h"
#include "core/plan/templates.h"
#include "jit/build/kernel_build.h"
#include "jit/compiler/embedded_headers.h"
#include "jit/compiler/kernel_spec.h"

namespace syncopate {
namespace {

constexpr int64_t kM = 8192, kN = 4096, kK = 4096;

std::string GemmSource() { return std::string(*jit::ExampleKernelSource("gemm_mma.cuh")); }

void BM_ColdCompileFusedAllGatherGemm(benchmark::State& state) {
  plan::TemplateParams params;
  params.world_size = static_cast<int>(state.range(0));
  params.shape = {kM, kK};
  params.dtype = plan::DType::kBF16;
  params.chunks_per_shard = 2;
  auto plan = plan::BuildTemplate("allgather.push", params);
  if (!plan.ok()) {
    state.SkipWithError(std::string(plan.status().message()).c_str());
    return;
  }
  const jit::KernelSpec spec = jit::GemmSpecForAllGather(kM, kN, kK, plan::DType::kBF16);
  const std::string source = GemmSource();
  for (auto _ : state) {
    auto built = jit::BuildFusedKernel(*plan, spec, source, jit::BuildOptions{});
    if (!built.ok()) {
      state.SkipWithError(std::string(built.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(built->compiled->binary.data());
    state.counters["source_kB"] = built->generated.source.size() / 1024.0;
  }
}
BENCHMARK(BM_ColdCompileFusedAllGatherGemm)
    ->Arg(2)
    ->Arg(8)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

void BM_ColdCompileLocalGemm(benchmark::State& state) {
  const jit::KernelSpec spec = jit::GemmSpecForAllGather(kM, kN, kK, plan::DType::kBF16);
  const std::string source = GemmSource();
  for (auto _ : state) {
    auto built = jit::BuildLocalKernel(spec, source, jit::BuildOptions{});
    if (!built.ok()) {
      state.SkipWithError(std::string(built.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(built->compiled->binary.data());
  }
}
BENCHMARK(BM_ColdCompileLocalGemm)->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace
}  // namespace syncopate
