// One path from (plan, kernel spec, local kernel source) to a compiled cubin: validate, check the
// spec against the plan, generate the fused (or local) source, derive the cache key, and compile
// through the kernel cache with NVRTC. The CLI, the runtime and the daemon all build kernels
// here, so a kernel compiled by any of them is a cache hit for the others.
// Thread-safe when the cache is (KernelCache is); the functions keep no state of their own.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "jit/cache/kernel_cache.h"
#include "jit/compiler/codegen.h"
#include "jit/compiler/kernel_spec.h"
#include "jit/nvrtc/nvrtc_compiler.h"
#include "runtime/plan/plan.h"

namespace syncopate::jit {

// A kernel's cubin from somewhere other than this process's NVRTC: the node's daemon, which
// compiles once for every rank on the node (client/kernel_fetch.h). Asked on a cache miss, before
// NVRTC; its answer is used only if it names the cache key this build derived, which covers
// source, headers, NVRTC version, options, arch and plan, so a binary for anything else is never
// loaded. Any error, or another key, and NVRTC compiles here as if there were no fetcher.
struct FetchQuery {
  std::string cache_key;  // hex: what the binary must be for
  std::string plan_hash;  // "" for the local (identity-schedule) variant
  std::string arch;
};
struct FetchedKernel {
  std::string cache_key;  // what the source says the binary is for
  nvrtc::CompiledKernel kernel;
};
using KernelFetcher = std::function<absl::StatusOr<FetchedKernel>(const FetchQuery&)>;

struct BuildOptions {
  std::string arch = "sm_90";  // exact target; see nvrtc::CompileOptions for PTX fallback
  std::vector<std::string> extra_options = {"-std=c++17"};
  std::optional<std::chrono::steady_clock::time_point> deadline;
  cache::KernelCache* cache = nullptr;  // nullptr: compile every time
  // The caller's own in-memory headers; the generated kernel's device headers win on a name clash
  // (the generated code is built against exactly those).
  std::map<std::string, std::string> extra_headers;
  std::string cuda_include_dir;  // "": CudaIncludeDir()
  KernelFetcher fetch;           // empty: NVRTC compiles every miss
};

struct BuiltKernel {
  GeneratedKernel generated;  // source, entry symbol, launch metadata
  std::shared_ptr<const nvrtc::CompiledKernel> compiled;
  std::string cache_key;  // hex; also computed when no cache is used
  cache::KernelCache::Source source = cache::KernelCache::Source::kCompiled;
  bool fetched = false;     // the binary came from BuildOptions::fetch, not from NVRTC here
  std::string fetch_error;  // why the fetcher's answer was not used ("" when it was, or unasked)
  double elapsed_ms = 0;  // generation + cache lookup / compile, as seen by this call
};

// Directory holding cuda_bf16.h etc. for NVRTC: $SYNCOPATE_CUDA_INCLUDE, else
// $CUDA_HOME/include, else the toolkit this build was configured with. Cache keys name it with
// symlinks resolved, so two spellings of one toolkit give one key.
std::string CudaIncludeDir();

// What NVRTC is given for `generated` under `options`, and the cache key parts of that compile
// (for `cache key --explain`). Every builder (CLI, runtime, daemon) derives both here, so the same
// kernel built by any of them has the same key.
nvrtc::CompileOptions NvrtcOptionsFor(const GeneratedKernel& generated,
                                      const BuildOptions& options);
cache::CacheKeyParts CacheKeyPartsFor(const GeneratedKernel& generated, std::string_view plan_hash,
                                      const BuildOptions& options);

// Validates `plan`, checks `spec` against it, generates and compiles the fused kernel.
absl::StatusOr<BuiltKernel> BuildFusedKernel(const plan::Plan& plan, const KernelSpec& spec,
                                             std::string_view kernel_source,
                                             const BuildOptions& options);

// The identity-schedule variant of the same kernel (the local baseline).
absl::StatusOr<BuiltKernel> BuildLocalKernel(const KernelSpec& spec, std::string_view kernel_source,
                                             const BuildOptions& options);

// Compiles already generated source (what the two above end with).
absl::StatusOr<BuiltKernel> BuildGeneratedKernel(GeneratedKernel generated,
                                                 std::string_view plan_hash,
                                                 const BuildOptions& options);

}  // namespace syncopate::jit
