#include "jit/build/kernel_build.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/plan/validate.h"
#include "spdlog/spdlog.h"

namespace syncopate::jit {
namespace {

using Clock = std::chrono::steady_clock;

double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The path with symlinks resolved (and normalized where it does not exist); as given only when
// the filesystem cannot be asked.
std::string CanonicalPath(const std::string& path) {
  std::error_code error;
  std::filesystem::path canonical = std::filesystem::weakly_canonical(path, error);
  return error ? path : canonical.string();
}

}  // namespace

std::string CudaIncludeDir() {
  if (const char* dir = std::getenv("SYNCOPATE_CUDA_INCLUDE"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') {
    return absl::StrCat(home, "/include");
  }
#ifdef SYNCOPATE_BUILD_CUDA_INCLUDE
  return SYNCOPATE_BUILD_CUDA_INCLUDE;
#else
  return "/usr/local/cuda/include";
#endif
}

nvrtc::CompileOptions NvrtcOptionsFor(const GeneratedKernel& generated,
                                      const BuildOptions& options) {
  nvrtc::CompileOptions nvrtc_options;
  nvrtc_options.arch = options.arch;
  nvrtc_options.headers = options.extra_headers;
  for (const auto& [name, content] : generated.headers) nvrtc_options.headers[name] = content;
  const std::string include_dir =
      options.cuda_include_dir.empty() ? CudaIncludeDir() : options.cuda_include_dir;
  // cuda_bf16.h and friends; cccl for <cuda/ptx>.
  nvrtc_options.include_paths = {include_dir, include_dir + "/cccl"};
  nvrtc_options.extra_options = options.extra_options;
  nvrtc_options.program_name = absl::StrCat(generated.entry_symbol, ".cu");
  nvrtc_options.deadline = options.deadline;
  return nvrtc_options;
}

cache::CacheKeyParts CacheKeyPartsFor(const GeneratedKernel& generated, std::string_view plan_hash,
                                      const BuildOptions& options) {
  const nvrtc::CompileOptions nvrtc_options = NvrtcOptionsFor(generated, options);
  cache::CacheKeyParts parts;
  parts.source = generated.source;
  parts.headers = nvrtc_options.headers;
  parts.nvrtc_version = nvrtc::NvrtcVersion();
  parts.options = nvrtc_options.extra_options;
  // Toolkit headers (cuda_bf16.h) come from these directories; their content follows the NVRTC
  // version, which is already a key part, so the paths stand in for them.
  // Canonical, so /usr/local/cuda/include and the versioned directory it links to are one key.
  for (const std::string& dir : nvrtc_options.include_paths) {
    parts.options.push_back(absl::StrCat("--include-path=", CanonicalPath(dir)));
  }
  parts.arch = options.arch;
  parts.plan_hash = std::string(plan_hash);
  return parts;
}

absl::StatusOr<BuiltKernel> BuildGeneratedKernel(GeneratedKernel generated,
                                                 std::string_view plan_hash,
                                                 const BuildOptions& options) {
  const Clock::time_point start = Clock::now();
  BuiltKernel built;
  const cache::CacheKey key =
      cache::CacheKey::FromParts(CacheKeyPartsFor(generated, plan_hash, options));
  built.cache_key = key.hex();
  const nvrtc::CompileOptions nvrtc_options = NvrtcOptionsFor(generated, options);
  auto compile = [&]() { return nvrtc::Compile(generated.source, nvrtc_options); };
  // The fetcher's answer, accepted only for this build's key; why not is kept for the caller.
  auto fetch = [&]() -> absl::StatusOr<nvrtc::CompiledKernel> {
    absl::StatusOr<FetchedKernel> fetched =
        options.fetch(FetchQuery{built.cache_key, std::string(plan_hash), options.arch});
    if (!fetched.ok()) {
      built.fetch_error = fetched.status().ToString();
    } else if (fetched->cache_key != built.cache_key) {
      built.fetch_error = absl::StrCat("the fetched binary is for key ", fetched->cache_key,
                                       ", this build's key is ", built.cache_key);
    } else if (fetched->kernel.binary.empty()) {
      built.fetch_error = "the fetched binary is empty";
    } else {
      return std::move(fetched->kernel);
    }
    return absl::UnavailableError(built.fetch_error);
  };
  if (options.cache != nullptr) {
    const cache::KernelCache::CompileFn fetch_fn =
        options.fetch ? cache::KernelCache::CompileFn(fetch) : nullptr;
    ASSIGN_OR_RETURN(cache::KernelCache::Result result,
                     options.cache->GetOrCompile(key, compile, fetch_fn, options.deadline));
    built.compiled = std::move(result.kernel);
    built.source = result.source;
    built.fetched = result.source == cache::KernelCache::Source::kFetched;
  } else {
    absl::StatusOr<nvrtc::CompiledKernel> compiled = absl::NotFoundError("no fetcher");
    if (options.fetch) compiled = fetch();
    built.fetched = compiled.ok();
    if (!compiled.ok()) compiled = compile();
    if (!compiled.ok()) return compiled.status();
    built.compiled = std::make_shared<const nvrtc::CompiledKernel>(*std::move(compiled));
  }
  if (!built.fetch_error.empty()) {
    // Said here, where it is known: a node whose daemon and ranks disagree on keys (another
    // toolkit directory, say) would otherwise compile in every rank without a word.
    spdlog::warn("kernel build: compiled {} here, not the fetched binary: {}",
                 generated.entry_symbol, built.fetch_error);
  }
  built.generated = std::move(generated);
  built.elapsed_ms = MillisecondsSince(start);
  return built;
}

absl::StatusOr<BuiltKernel> BuildFusedKernel(const plan::Plan& plan, const KernelSpec& spec,
                                             std::string_view kernel_source,
                                             const BuildOptions& options) {
  const Clock::time_point start = Clock::now();
  RETURN_IF_ERROR(plan::ValidatePlan(plan));
  RETURN_IF_ERROR(CheckSpecAgainstPlan(spec, plan));
  ASSIGN_OR_RETURN(GeneratedKernel generated, GenerateFusedKernel(plan, spec, kernel_source));
  ASSIGN_OR_RETURN(BuiltKernel built,
                   BuildGeneratedKernel(std::move(generated), plan::PlanHash(plan), options));
  built.elapsed_ms = MillisecondsSince(start);
  return built;
}

absl::StatusOr<BuiltKernel> BuildLocalKernel(const KernelSpec& spec, std::string_view kernel_source,
                                             const BuildOptions& options) {
  const Clock::time_point start = Clock::now();
  ASSIGN_OR_RETURN(GeneratedKernel generated, GenerateLocalKernel(spec, kernel_source));
  ASSIGN_OR_RETURN(BuiltKernel built, BuildGeneratedKernel(std::move(generated), "", options));
  built.elapsed_ms = MillisecondsSince(start);
  return built;
}

}  // namespace syncopate::jit
