// A step of `syncopate demo`: the plan and kernel of the earlier steps through syncopated's
// services, embedded in the CLI's process (no daemon to start): one thread per rank joins a
// group and proposes the plan, every rank gets the same plan hash, the daemon compiles the fused
// kernel by that hash through the kernel cache, and the runtime's build path takes the daemon's
// binary for its own cache key (client/kernel_fetch.h) instead of running NVRTC.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "core/plan/plan.h"
#include "jit/compiler/kernel_spec.h"

namespace syncopate::cli {

// `cache_dir`: the daemon's kernel cache; the demo passes its own, so the daemon finds the
// kernel the demo built before (one key for every builder). Prints its lines; the error names
// the part that failed.
absl::Status RunThroughDaemon(const plan::Plan& plan, const jit::KernelSpec& spec,
                              std::string_view kernel_source, const std::string& arch,
                              const std::string& cache_dir);

}  // namespace syncopate::cli
