// The one path from (plan, kernel spec, local kernel source) to a compiled cubin, in two steps:
//   1. Prepare: validate the plan, check the spec against it, generate the fused (or local)
//      source, derive NVRTC's options and the cache key. Pure (no cache, no NVRTC); its result is
//      what `syncopate compile --emit-source / --explain-key` print.
//   2. Build: the cache, then the daemon's binary (fetch), then NVRTC here, under the deadline and
//      a compile slot.
// The CLI, the runtime, the tuner, the benches and the daemon all prepare here, so a kernel
// compiled by any of them is a cache hit for the others; the daemon runs step 2 through its own
// single-flight cache call with CompilePrepared.
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
#include "core/plan/plan.h"
#include "jit/build/compile_slots.h"
#include "jit/cache/kernel_cache.h"
#include "jit/compiler/codegen.h"
#include "jit/compiler/kernel_spec.h"
#include "jit/nvrtc/nvrtc_compiler.h"

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
  // What the binary is: read by Prepare, all of it in the cache key (but the program name, which
  // only names the source in NVRTC's messages).
  std::string arch = "sm_90";  // exact target; see nvrtc::CompileOptions for PTX fallback
  std::vector<std::string> extra_options = {"-std=c++17"};
  // The caller's own in-memory headers; the generated kernel's device headers win on a name clash
  // (the generated code is built against exactly those).
  std::map<std::string, std::string> extra_headers;
  std::string cuda_include_dir;  // "": CudaIncludeDir()
  std::string program_name;      // "": <entry symbol>.cu

  // How it is got: read by Build.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  cache::KernelCache* cache = nullptr;  // nullptr: compile every time
  KernelFetcher fetch;                  // empty: NVRTC compiles every miss
  CompileSlots* slots = nullptr;        // nullptr: no bound on concurrent NVRTC compiles
};

// What step 1 derives; everything step 2 needs.
struct PreparedKernel {
  GeneratedKernel generated;            // source, entry symbol, launch metadata
  std::string plan_hash;                // "" for the local (identity-schedule) variant
  nvrtc::CompileOptions nvrtc_options;  // without a deadline: each build sets its own
  cache::CacheKeyParts key_parts;       // CacheKey::Explain of these is `--explain-key`
  cache::CacheKey key;
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

// The folders NVRTC searches for toolkit headers under `cuda_include_dir` ("": CudaIncludeDir()):
// the folder itself (cuda_bf16.h and friends) and its cccl (<cuda/ptx>). Every build gets these,
// and the daemon's compile policy allows exactly these.
std::vector<std::string> NvrtcIncludeDirs(const std::string& cuda_include_dir);

// The cache key parts of compiling `generated` under `options`; Prepare derives them (exposed
// for the key tests).
cache::CacheKeyParts CacheKeyPartsFor(const GeneratedKernel& generated, std::string_view plan_hash,
                                      const BuildOptions& options);

// Step 1 for the fused kernel: validates `plan`, checks `spec` against it, generates (with
// `codegen`: the node map, the source's name) and derives the options and key. InvalidArgument
// names the part at fault: "plan: fails validation: ...", "kernel spec (against plan): ...",
// "kernel spec x plan: ..." (generation).
absl::StatusOr<PreparedKernel> PrepareFusedKernel(const plan::Plan& plan, const KernelSpec& spec,
                                                  std::string_view kernel_source,
                                                  const BuildOptions& options,
                                                  const CodegenOptions& codegen = {});
// Step 1 for the identity-schedule variant of the same kernel (the local baseline).
absl::StatusOr<PreparedKernel> PrepareLocalKernel(const KernelSpec& spec,
                                                  std::string_view kernel_source,
                                                  const BuildOptions& options,
                                                  const CodegenOptions& codegen = {});

// NVRTC on `prepared` alone (no cache, no fetch), ending at `deadline`, holding one of `slots`
// (when given) while it runs: DeadlineExceeded naming the key when no slot frees in time.
absl::StatusOr<nvrtc::CompiledKernel> CompilePrepared(
    const PreparedKernel& prepared, std::optional<std::chrono::steady_clock::time_point> deadline,
    CompileSlots* slots);

// Step 2: the cache, the fetcher, then CompilePrepared, per `options`' second half.
absl::StatusOr<BuiltKernel> BuildKernel(const PreparedKernel& prepared,
                                        const BuildOptions& options);

// Step 2 for many kernels at once, on up to `max_threads` threads (NVRTC compiles of different
// programs run concurrently; the cache is thread-safe), so that each later BuildKernel of one of
// them (e.g. inside the runtime's Compile) hits the cache in memory. Needs options.cache; without
// one, or with fewer than two kernels, it does nothing. Errors are left for that later
// BuildKernel to report.
void BuildInParallel(const std::vector<const PreparedKernel*>& kernels, const BuildOptions& options,
                     int max_threads);

// Both steps, for callers that keep nothing of step 1.
absl::StatusOr<BuiltKernel> BuildFusedKernel(const plan::Plan& plan, const KernelSpec& spec,
                                             std::string_view kernel_source,
                                             const BuildOptions& options);
absl::StatusOr<BuiltKernel> BuildLocalKernel(const KernelSpec& spec, std::string_view kernel_source,
                                             const BuildOptions& options);

}  // namespace syncopate::jit
