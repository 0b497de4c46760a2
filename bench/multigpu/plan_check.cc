// --plan-only: plans, generated sources and (optionally) NVRTC compiles; see plan_check.h.
#include "bench/multigpu/plan_check.h"

#include <cstdio>
#include <memory>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/multigpu/kernels.h"
#include "core/base/status_macros.h"
#include "jit/build/kernel_build.h"
#include "jit/cache/kernel_cache.h"
#include "jit/compiler/embedded_headers.h"
#include "runtime/cuda/control_block.h"
#include "runtime/cuda/kernel_loader.h"
#include "runtime/gemm/gemm_kernels.h"

namespace syncopate::tp_bench {
namespace {

// " nvrtc N ms" for a compile, " cached" for a kernel `cache` already held.
std::string BuildNote(const jit::BuiltKernel& built) {
  if (built.source == cache::KernelCache::Source::kCompiled) {
    return absl::StrCat(" nvrtc ", static_cast<int>(built.compiled->compile_ms), " ms");
  }
  return " cached";
}

// One kernel of one configuration: generated, checked against the runtime's capacities, and
// compiled when asked. With `cache`, built through it, local variant too, with the options and
// node map the ranks use (one node: no map), so that their builds on the GPU hit it. Returns a
// one-line summary.
absl::StatusOr<std::string> CheckKernel(const BenchFlags& flags, int cc, const plan::Plan& plan,
                                        const jit::KernelSpec& spec, std::string_view source,
                                        cache::KernelCache* cache) {
  jit::BuildOptions build;
  build.arch = cuda::ArchFor(cc);
  build.extra_options.insert(build.extra_options.end(), flags.nvrtc_options.begin(),
                             flags.nvrtc_options.end());
  build.cache = cache;
  ASSIGN_OR_RETURN(const jit::PreparedKernel prepared,
                   jit::PrepareFusedKernel(plan, spec, source, build));
  const jit::GeneratedKernel& gen = prepared.generated;
  const jit::LaunchMetadata& md = gen.metadata;
  if (md.num_signals > cuda::kSignalCapacity || md.num_outgoing_chunks > cuda::kChunkCapacity) {
    return absl::ResourceExhaustedError(
        absl::StrCat(md.num_signals, " signals / ", md.num_outgoing_chunks,
                     " outgoing chunks exceed the runtime's ", cuda::kSignalCapacity, " / ",
                     cuda::kChunkCapacity));
  }
  std::string line = absl::StrCat("tiles ", md.num_tiles, " signals ", md.num_signals,
                                  " out-chunks ", md.num_outgoing_chunks, " comm-ctas ",
                                  md.suggested_comm_ctas, " source ", gen.source.size() / 1024,
                                  " KiB");
  if (cache != nullptr) {
    ASSIGN_OR_RETURN(const jit::BuiltKernel fused, jit::BuildKernel(prepared, build));
    ASSIGN_OR_RETURN(const jit::PreparedKernel local_prepared,
                     jit::PrepareLocalKernel(spec, source, build));
    ASSIGN_OR_RETURN(const jit::BuiltKernel local, jit::BuildKernel(local_prepared, build));
    absl::StrAppend(&line, BuildNote(fused), ", local", BuildNote(local));
  } else if (flags.plan_only_nvrtc) {
    // No cache: the check times a cold compile, as a first build on a fresh node would.
    ASSIGN_OR_RETURN(nvrtc::CompiledKernel k,
                     jit::CompilePrepared(prepared, std::nullopt, nullptr));
    absl::StrAppend(&line, " nvrtc ", static_cast<int>(k.compile_ms), " ms");
    if (!flags.nvrtc_options.empty() && !k.log.empty()) absl::StrAppend(&line, "\n", k.log);
  }
  return line;
}

}  // namespace

absl::Status CheckPlans(const BenchFlags& flags) {
  ASSIGN_OR_RETURN(std::vector<int> worlds, WorldSizes(flags));
  int cc = 0;
  if (flags.arch.rfind("sm_", 0) != 0 || !absl::SimpleAtoi(flags.arch.substr(3, 2), &cc)) {
    return absl::InvalidArgumentError(absl::StrCat("--arch ", flags.arch, ": want sm_NN"));
  }
  std::unique_ptr<cache::KernelCache> cache;
  if (!flags.fill_cache_dir.empty()) {  // implies plan_only_nvrtc (ParseFlags)
    cache::KernelCache::Options options;
    options.dir = flags.fill_cache_dir;
    ASSIGN_OR_RETURN(cache, cache::KernelCache::Open(options));
  }
  int ok = 0, failed = 0;
  for (int world : worlds) {
    for (const Problem& p : ProblemsFor(flags, world)) {
      for (int chunks : flags.chunks) {
        std::string prefix = absl::StrCat(p.Label(), " chunks=", chunks);
        absl::StatusOr<ProblemKernels> pk = BuildProblemKernels(flags, p, chunks, cc);
        if (!pk.ok()) {
          std::printf("FAIL %s: %s\n", prefix.c_str(), std::string(pk.status().message()).c_str());
          ++failed;
          continue;
        }
        absl::StatusOr<std::string_view> gemm_src = jit::ExampleKernelSource(pk->gemm_source);
        if (!gemm_src.ok()) return gemm_src.status();
        for (int variant = 0; variant < 2; ++variant) {
          const bool comm = variant == 1;
          absl::StatusOr<std::string> r =
              CheckKernel(flags, cc, pk->plan, comm ? pk->comm_spec : pk->gemm_spec,
                          comm ? CommOnlySource() : *gemm_src, cache.get());
          const std::string what = comm ? "comm_only" : pk->gemm_source;
          if (r.ok()) {
            std::printf("ok   %s %s: %s%s\n", prefix.c_str(), what.c_str(), r->c_str(),
                        pk->has_reductions ? " (reduces: SM backend only)" : "");
            ++ok;
          } else {
            std::printf("FAIL %s %s: %s\n", prefix.c_str(), what.c_str(),
                        std::string(r.status().message()).c_str());
            ++failed;
          }
          std::fflush(stdout);
        }
      }
    }
  }
  std::printf("plan-only: %d kernels ok, %d failed\n", ok, failed);
  if (failed > 0) return absl::FailedPreconditionError(absl::StrCat(failed, " configurations failed"));
  return absl::OkStatus();
}

}  // namespace syncopate::tp_bench
