// What each measured configuration compiles: the chunk plan of a problem's collective, the GEMM
// kernel spec bound to it (runtime/gemm/gemm_kernels.h SelectGemm: gemm_wgmma.cuh on sm_90,
// gemm_mma.cuh elsewhere or with --gemm mma) and the "communication only" variant:
// the same plan and tile grid with a kernel whose tiles wait for their chunks and publish their
// outgoing chunks without computing anything. That variant is T_comm: the plan's transfers run by
// the runtime's own backends (copy engine or SM), protocol and waits included, no compute.
//
// GEMM+AllReduce has no spec factory in jit/compiler/kernel_spec.h; it reuses the ReduceScatter
// GEMM spec with C bound to the AllReduce's in-place buffer "data" (templates.h conventions).
// Pure C++ (plans and generated source only; no CUDA). Thread-compatible.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "bench/multigpu/tp_config.h"
#include "core/plan/plan.h"
#include "jit/compiler/kernel_spec.h"

namespace syncopate::tp_bench {

struct ProblemKernels {
  plan::Plan plan;
  jit::KernelSpec gemm_spec;  // the fused GEMM (and, with the identity schedule, the local GEMM)
  jit::KernelSpec comm_spec;  // same plan binding and tile grid, comm_only entry
  // The plan buffer the GEMM output lives in for the check ("" for AllGather: C is local).
  std::string result_buffer;
  bool has_reductions = false;  // the copy-engine backend cannot run this plan
  std::string gemm_source;      // jit::ExampleKernelSource name of the GEMM
};

// Template name for `workload` (flags' --ag-plan / --rs-plan / --ar-plan).
std::string PlanTemplate(const BenchFlags& flags, Workload workload);

// `cc`: compute capability of the GPU the kernels are for (90 for sm_90).
absl::StatusOr<ProblemKernels> BuildProblemKernels(const BenchFlags& flags, const Problem& p,
                                                   int chunks, int cc);

// The comm_only kernel's source (template over any GEMM's template arguments).
std::string_view CommOnlySource();

}  // namespace syncopate::tp_bench
