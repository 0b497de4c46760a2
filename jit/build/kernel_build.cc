#include "jit/build/kernel_build.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/base/sha256.h"
#include "core/base/status_macros.h"
#include "core/plan/validate.h"
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

std::string ToHexDigest(Sha256& hasher) {
  const std::array<uint8_t, 32> digest = hasher.Finish();
  return ToHex(digest.data(), digest.size());
}

// What stands for the toolkit headers under the include folder `dir` in a cache key: a digest of
// the content of the ones fused kernels include (cuda_bf16.h, cuda_fp16.h and the .hpp files
// they pull in). Content, not the folder's path: two machines with one toolkit installed at
// different places (/usr/local/cuda-13.0/include here, .../targets/x86_64-linux/include there)
// must share keys, or a cache filled on a build host is never hit on the GPU machine. The path
// stands in only where none of the headers can be read. Read once per folder per process.
std::string ToolkitHeadersDigest(const std::string& dir) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* digests = new std::map<std::string, std::string>();
  absl::MutexLock lock(&mu);
  auto [it, inserted] = digests->try_emplace(dir);
  if (!inserted) return it->second;
  Sha256 hasher;
  bool read_any = false;
  for (const char* name : {"cuda_bf16.h", "cuda_bf16.hpp", "cuda_fp16.h", "cuda_fp16.hpp"}) {
    std::ifstream in(std::filesystem::path(dir) / name, std::ios::binary);
    if (!in) continue;
    const std::string content((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    hasher.Update(absl::StrCat(name, ":", content.size(), ":"));
    hasher.Update(content);
    read_any = true;
  }
  it->second = read_any ? absl::StrCat("toolkit-headers=", ToHexDigest(hasher))
                        : absl::StrCat("include-path=", CanonicalPath(dir));
  return it->second;
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

std::vector<std::string> NvrtcIncludeDirs(const std::string& cuda_include_dir) {
  const std::string dir = cuda_include_dir.empty() ? CudaIncludeDir() : cuda_include_dir;
  return {dir, dir + "/cccl"};
}

namespace {

// What NVRTC is given for `generated` under `options` (no deadline: a build sets its own).
nvrtc::CompileOptions NvrtcOptionsFor(const GeneratedKernel& generated,
                                      const BuildOptions& options) {
  nvrtc::CompileOptions nvrtc_options;
  nvrtc_options.arch = options.arch;
  nvrtc_options.headers = options.extra_headers;
  for (const auto& [name, content] : generated.headers) nvrtc_options.headers[name] = content;
  nvrtc_options.include_paths = NvrtcIncludeDirs(options.cuda_include_dir);
  nvrtc_options.extra_options = options.extra_options;
  nvrtc_options.program_name = options.program_name.empty()
                                   ? absl::StrCat(generated.entry_symbol, ".cu")
                                   : options.program_name;
  return nvrtc_options;
}

// The key of a compile of `generated` with `nvrtc_options` (NvrtcOptionsFor's answer).
cache::CacheKeyParts KeyPartsOf(const GeneratedKernel& generated,
                                const nvrtc::CompileOptions& nvrtc_options,
                                std::string_view plan_hash) {
  cache::CacheKeyParts parts;
  parts.source = generated.source;
  parts.headers = nvrtc_options.headers;
  parts.nvrtc_version = nvrtc::NvrtcVersion();
  parts.options = nvrtc_options.extra_options;
  // The toolkit headers the kernels include come from the first folder (the second is cccl's,
  // whose cuda/ptx follows the NVRTC version, already a key part).
  if (!nvrtc_options.include_paths.empty()) {
    parts.options.push_back(
        absl::StrCat("--", ToolkitHeadersDigest(nvrtc_options.include_paths.front())));
  }
  parts.arch = nvrtc_options.arch;
  parts.plan_hash = std::string(plan_hash);
  return parts;
}

}  // namespace

cache::CacheKeyParts CacheKeyPartsFor(const GeneratedKernel& generated, std::string_view plan_hash,
                                      const BuildOptions& options) {
  return KeyPartsOf(generated, NvrtcOptionsFor(generated, options), plan_hash);
}

namespace {

absl::Status Prefixed(const absl::Status& status, const char* prefix) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

PreparedKernel Derive(GeneratedKernel generated, std::string plan_hash,
                      const BuildOptions& options) {
  PreparedKernel prepared;
  prepared.nvrtc_options = NvrtcOptionsFor(generated, options);
  prepared.key_parts = KeyPartsOf(generated, prepared.nvrtc_options, plan_hash);
  prepared.key = cache::CacheKey::FromParts(prepared.key_parts);
  prepared.plan_hash = std::move(plan_hash);
  prepared.generated = std::move(generated);
  return prepared;
}

}  // namespace

absl::StatusOr<PreparedKernel> PrepareFusedKernel(const plan::Plan& plan, const KernelSpec& spec,
                                                  std::string_view kernel_source,
                                                  const BuildOptions& options,
                                                  const CodegenOptions& codegen) {
  if (absl::Status s = plan::ValidatePlan(plan); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("plan: fails validation: ", s.message()));
  }
  if (absl::Status s = CheckSpecAgainstPlan(spec, plan); !s.ok()) {
    return Prefixed(s, "kernel spec (against plan): ");
  }
  absl::StatusOr<GeneratedKernel> generated =
      GenerateFusedKernel(plan, spec, kernel_source, codegen);
  if (!generated.ok()) return Prefixed(generated.status(), "kernel spec x plan: ");
  return Derive(*std::move(generated), plan::PlanHash(plan), options);
}

absl::StatusOr<PreparedKernel> PrepareLocalKernel(const KernelSpec& spec,
                                                  std::string_view kernel_source,
                                                  const BuildOptions& options,
                                                  const CodegenOptions& codegen) {
  absl::StatusOr<GeneratedKernel> generated = GenerateLocalKernel(spec, kernel_source, codegen);
  if (!generated.ok()) return Prefixed(generated.status(), "kernel spec: ");
  return Derive(*std::move(generated), "", options);
}

absl::StatusOr<nvrtc::CompiledKernel> CompilePrepared(const PreparedKernel& prepared,
                                                      std::optional<Clock::time_point> deadline,
                                                      CompileSlots* slots) {
  CompileSlots::Held slot;
  if (slots != nullptr) {
    slot = slots->Acquire(deadline);
    if (!slot) {
      return absl::DeadlineExceededError(absl::StrCat(
          "kernel ", prepared.key.hex(),
          ": deadline passed while waiting for a free compile slot (compile_threads)"));
    }
  }
  nvrtc::CompileOptions options = prepared.nvrtc_options;
  options.deadline = deadline;
  return nvrtc::Compile(prepared.generated.source, options);
}

absl::StatusOr<BuiltKernel> BuildKernel(const PreparedKernel& prepared,
                                        const BuildOptions& options) {
  const Clock::time_point start = Clock::now();
  BuiltKernel built;
  built.cache_key = prepared.key.hex();
  auto compile = [&]() { return CompilePrepared(prepared, options.deadline, options.slots); };
  // The fetcher's answer, accepted only for this build's key; why not is kept for the caller.
  auto fetch = [&]() -> absl::StatusOr<nvrtc::CompiledKernel> {
    absl::StatusOr<FetchedKernel> fetched =
        options.fetch(FetchQuery{built.cache_key, prepared.plan_hash, options.arch});
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
    ASSIGN_OR_RETURN(
        cache::KernelCache::Result result,
        options.cache->GetOrCompile(prepared.key, compile, fetch_fn, options.deadline));
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
                 prepared.generated.entry_symbol, built.fetch_error);
  }
  built.generated = prepared.generated;
  built.elapsed_ms = MillisecondsSince(start);
  return built;
}

void BuildInParallel(const std::vector<const PreparedKernel*>& kernels, const BuildOptions& options,
                     int max_threads) {
  if (options.cache == nullptr || kernels.size() < 2) return;
  std::atomic<size_t> next{0};
  const size_t workers =
      std::min<size_t>(kernels.size(), static_cast<size_t>(std::max(1, max_threads)));
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < kernels.size(); i = next++) {
        (void)BuildKernel(*kernels[i], options);
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

absl::StatusOr<BuiltKernel> BuildFusedKernel(const plan::Plan& plan, const KernelSpec& spec,
                                             std::string_view kernel_source,
                                             const BuildOptions& options) {
  const Clock::time_point start = Clock::now();
  ASSIGN_OR_RETURN(PreparedKernel prepared, PrepareFusedKernel(plan, spec, kernel_source, options));
  ASSIGN_OR_RETURN(BuiltKernel built, BuildKernel(prepared, options));
  built.elapsed_ms = MillisecondsSince(start);
  return built;
}

absl::StatusOr<BuiltKernel> BuildLocalKernel(const KernelSpec& spec, std::string_view kernel_source,
                                             const BuildOptions& options) {
  const Clock::time_point start = Clock::now();
  ASSIGN_OR_RETURN(PreparedKernel prepared, PrepareLocalKernel(spec, kernel_source, options));
  ASSIGN_OR_RETURN(BuiltKernel built, BuildKernel(prepared, options));
  built.elapsed_ms = MillisecondsSince(start);
  return built;
}

}  // namespace syncopate::jit
