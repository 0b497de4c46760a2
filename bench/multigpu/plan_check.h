// The no-GPU path of syncopate_tp_bench (--plan-only [--nvrtc]): for every problem, world size
// and chunks-per-shard value, builds the plan, generates the fused GEMM and comm_only kernels'
// source through the overlap compiler and, with --nvrtc, compiles them with NVRTC for --arch.
// Catches unsupported plan x kernel combinations and compile errors before device time is spent.
// Thread-compatible.
#pragma once

#include "absl/status/status.h"
#include "bench/multigpu/tp_config.h"

namespace syncopate::tp_bench {

// Prints one line per configuration; non-OK when any configuration failed.
absl::Status CheckPlans(const BenchFlags& flags);

}  // namespace syncopate::tp_bench
