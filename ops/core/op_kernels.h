// What an op (syncopate/ops.h) or a tp-bench configuration compiles for one M: the chunk plan of
// its collective (row slabs of M over the ranks: plan templates allgather.push,
// reducescatter.direct, allreduce.direct by default, allreduce.direct_out for an op's small
// AllReduce buckets), the GEMM kernel spec bound to it
// (runtime/gemm SelectGemm: gemm_wgmma.cuh on sm_90, gemm_mma.cuh elsewhere) and the
// "communication only" variant: the same plan and tile grid with a kernel whose tiles wait for
// their chunks and publish their outgoing chunks without computing. Launched after the local
// GEMM, that variant is the unfused path: the plan's transfers by the runtime's own backends.
//
// Operands and plan buffers (what Bind needs):
//   AllGather+GEMM      A = plan buffer "data" (symmetric, [m, k]), B, C private
//   GEMM+ReduceScatter  A, B private, C = "input" (symmetric [m, n]), "output" ([m/world, n])
//   GEMM+AllReduce      A, B private, C = "data" (symmetric [m, n], reduced in place)
// Pure C++ (plans and generated source only; no CUDA). Thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/plan/plan.h"
#include "jit/compiler/kernel_spec.h"
#include "ops/core/op_plans.h"
#include "runtime/gemm/gemm_kernels.h"
#include "syncopate/ops.h"

namespace syncopate::ops {

enum class Collective { kAllGather, kReduceScatter, kAllReduce };

struct OpKernelsRequest {
  Collective collective = Collective::kAllGather;
  int64_t m = 0, n = 0, k = 0;  // per-rank GEMM C[m, n] = A[m, k] B[n, k]^T, m the full M
  int world = 1;
  plan::DType dtype = plan::DType::kBF16;
  int chunks = 1;  // per shard
  int cc = 90;     // compute capability of the GPU the kernels are for
  bool force_mma = false;
  std::optional<gemm::WgmmaConfig> tuned;  // a `syncopate tune` winner for this GEMM
  std::string plan_template;               // "" = the collective's default above
  // The fused GEMM moves its outgoing chunks a tile at a time where that is exact
  // (jit::KernelSpec::push_tiles); the comm-only kernel never does.
  bool push_tiles = false;
};

struct OpKernels {
  plan::Plan plan;
  jit::KernelSpec gemm_spec;  // the fused GEMM (and, with the identity schedule, the local GEMM)
  jit::KernelSpec comm_spec;  // same plan binding and tile grid, comm_only entry
  // The plan buffer the GEMM output lives in ("" for AllGather: C is local).
  std::string result_buffer;
  // The GEMM operand only this rank touches, which a run at a bucket's own M takes straight from
  // the caller (AllGather: its output C; the reductions: their input A). The runtime must find
  // it local (jit::PerLaunchOperandSlot), else runs copy it.
  std::string in_place_operand;
  // The rank-private plan buffer the kernels also copy the result into ("out" of
  // allreduce.direct_out), which a run at a bucket's own M points at the caller's C, so no copy
  // follows the kernel; "" = none (the result is copied out of result_buffer).
  std::string private_output;
  bool has_reductions = false;  // the copy-engine backend cannot run this plan
  std::string gemm_source;      // jit::ExampleKernelSource name of the GEMM
};

// The collective's plan at every M (the tp bench's; an op's bucket takes PlanTemplateFor's).
std::string DefaultPlanTemplate(Collective collective);

absl::StatusOr<OpKernels> BuildOpKernels(const OpKernelsRequest& request);

// The comm_only kernel's source (template over any GEMM's template arguments).
std::string_view CommOnlySource();

Collective CollectiveOf(OpKind kind);

// One bucket of an op as Op::Create builds it for `world` ranks on a GPU of compute capability
// `cc`: the path ChoosePath takes at `bucket_m`, and its kernels (of the path's plan), with a
// `syncopate tune` winner's wgmma tiles where config.cache_dir holds one. `ops_bench --fill-cache`
// builds the same on a host without a GPU. Reads at most one file.
struct BucketKernels {
  PathChoice path;
  OpKernels kernels;
};
absl::StatusOr<BucketKernels> PlanBucket(const OpConfig& config, int world, int64_t bucket_m,
                                         int cc);

}  // namespace syncopate::ops
