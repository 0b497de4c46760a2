// What each measured configuration compiles: ops/core/op_kernels.h's plans and specs (the
// fused GEMM, and the "communication only" variant that is T_comm: the plan's transfers run by
// the runtime's own backends, protocol and waits included, no compute) for the bench's flags
// (--ag-plan / --rs-plan / --ar-plan, --gemm mma, a `syncopate tune` winner in --cache-dir).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "bench/multigpu/tp_config.h"
#include "core/plan/plan.h"
#include "jit/compiler/kernel_spec.h"
#include "ops/core/op_kernels.h"

namespace syncopate::tp_bench {

using ProblemKernels = ops::OpKernels;

// Template name for `workload` (flags' --ag-plan / --rs-plan / --ar-plan).
std::string PlanTemplate(const BenchFlags& flags, Workload workload);

// `cc`: compute capability of the GPU the kernels are for (90 for sm_90).
absl::StatusOr<ProblemKernels> BuildProblemKernels(const BenchFlags& flags, const Problem& p,
                                                   int chunks, int cc);

// The comm_only kernel's source (template over any GEMM's template arguments).
std::string_view CommOnlySource();

}  // namespace syncopate::tp_bench
