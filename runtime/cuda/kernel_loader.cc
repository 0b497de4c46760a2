#include "runtime/cuda/kernel_loader.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"
#include "jit/build/kernel_build.h"

namespace syncopate::cuda {

std::string ArchFor(int cc) { return cc == 90 ? "sm_90a" : absl::StrCat("sm_", cc); }

std::vector<std::string> SplitNvrtcOptions(std::string_view value) {
  std::vector<std::string> options;
  for (absl::string_view option : absl::StrSplit(absl::string_view(value.data(), value.size()),
                                                 absl::ByAnyChar(" \t\n"), absl::SkipEmpty())) {
    options.emplace_back(option);
  }
  return options;
}

jit::BuildOptions BuildOptionsFor(const Context& ctx, cache::KernelCache* cache,
                                  jit::KernelFetcher fetch) {
  return BuildOptionsFor(ctx.compute_capability(), cache, std::move(fetch));
}

jit::BuildOptions BuildOptionsFor(int cc, cache::KernelCache* cache, jit::KernelFetcher fetch) {
  jit::BuildOptions options;
  options.arch = ArchFor(cc);
  if (const char* extra = std::getenv("SYNCOPATE_NVRTC_OPTIONS"); extra != nullptr) {
    for (std::string& option : SplitNvrtcOptions(extra)) {
      options.extra_options.push_back(std::move(option));
    }
  }
  options.cache = cache;
  options.fetch = std::move(fetch);
  return options;
}

absl::StatusOr<LoadedKernel> CompileAndLoad(const Context& ctx, const jit::PreparedKernel& prepared,
                                            const jit::BuildOptions& options) {
  const DriverApi& api = ctx.api();
  const jit::GeneratedKernel& gen = prepared.generated;
  ASSIGN_OR_RETURN(jit::BuiltKernel built, jit::BuildKernel(prepared, options));
  const std::shared_ptr<const nvrtc::CompiledKernel>& compiled = built.compiled;
  LoadedKernel v;
  v.compile_ms = compiled->compile_ms;
  v.fetched = built.fetched;
  v.fetch_error = built.fetch_error;
  RETURN_IF_ERROR(ctx.MakeCurrent());
  ASSIGN_OR_RETURN(v.module, Module::LoadCompiled(api, *compiled));
  ASSIGN_OR_RETURN(v.function, v.module.Function(gen.entry_symbol));
  const int smem = gen.metadata.dynamic_smem_bytes;
  if (smem > 48 * 1024) {
    CU_RETURN_IF_ERROR(api.cuFuncSetAttribute(
        v.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));
  }
  CU_RETURN_IF_ERROR(api.cuOccupancyMaxActiveBlocksPerMultiprocessor(
      &v.ctas_per_sm, v.function, gen.metadata.block_dim, smem));
  if (v.ctas_per_sm < 1) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "kernel ", gen.entry_symbol, " cannot run: no CTA of ", gen.metadata.block_dim,
        " threads with ", smem, " bytes of shared memory fits on an SM"));
  }
  return v;
}

}  // namespace syncopate::cuda
