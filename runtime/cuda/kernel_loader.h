// Generated kernel -> loaded CUfunction: compile through the shared build path (jit/build, so the
// cache keys match the CLI's and the daemon's) for this GPU's arch, load the module, raise the
// dynamic shared-memory limit and read the occupancy. Used by the runtime and the GPU benchmark.
// Thread-safety: as the Context and the cache (KernelCache is thread-safe).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "jit/build/kernel_build.h"
#include "jit/cache/kernel_cache.h"
#include "jit/compiler/codegen.h"
#include "runtime/cuda/handles.h"

namespace syncopate::cuda {

struct LoadedKernel {
  Module module;
  CUfunction function = nullptr;
  int ctas_per_sm = 0;  // resident CTAs per SM at the kernel's block size and shared memory
  double compile_ms = 0;
  bool fetched = false;     // the binary came from `fetch` (the daemon), not NVRTC here
  std::string fetch_error;  // why a fetcher's answer was not used
};

// NVRTC target for a device of compute capability `cc` (e.g. 90): "sm_90a" on sm_90, where the
// arch-specific features (wgmma, setmaxnreg) exist and the cubin only ever runs on that exact
// chip; "sm_<cc>" elsewhere.
std::string ArchFor(int cc);

// The build options for `ctx`'s GPU (arch: ArchFor its compute capability; the default NVRTC
// options, then those of the environment variable SYNCOPATE_NVRTC_OPTIONS), for
// jit::Prepare*Kernel and then CompileAndLoad. `cache` may be null (compile every time); `fetch`
// may be empty (NVRTC compiles every miss; see jit::KernelFetcher).
jit::BuildOptions BuildOptionsFor(const Context& ctx, cache::KernelCache* cache = nullptr,
                                  jit::KernelFetcher fetch = {});
// The same for a GPU of compute capability `cc` that need not be here (kernels built on a host
// without one, for ranks that load them from `cache`).
jit::BuildOptions BuildOptionsFor(int cc, cache::KernelCache* cache = nullptr,
                                  jit::KernelFetcher fetch = {});

// SYNCOPATE_NVRTC_OPTIONS's value as NVRTC options: split at whitespace. A developer's knob for
// A/B runs of the runtime's kernels (e.g. "-DSYNCOPATE_MOVER_INLINE=1"); the options are part of
// every cache key, so such builds never mix with the default ones in a cache.
std::vector<std::string> SplitNvrtcOptions(std::string_view value);

// Builds `prepared` (jit::BuildKernel under `options`) and loads it in `ctx`. ResourceExhausted
// when no CTA fits on an SM.
absl::StatusOr<LoadedKernel> CompileAndLoad(const Context& ctx, const jit::PreparedKernel& prepared,
                                            const jit::BuildOptions& options);

}  // namespace syncopate::cuda
