// Plans and kernel specs of the ops and the tp bench; see op_kernels.h.
#include "ops/core/op_kernels.h"

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/plan/templates.h"
#include "syncopate/status_absl.h"

namespace syncopate::ops {
namespace {

// Same call as gemm_mma / gemm_wgmma (any int template arguments after T: tile sizes, stages);
// every tile still waits for the chunks its A footprint reads (AllGather) and counts into the
// chunks its C footprint writes (ReduceScatter / AllReduce), so the transfers, their order and
// the protocol are exactly the fused kernel's.
constexpr char kCommOnlySource[] = R"cuda(
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <syncopate/device.cuh>

namespace syncopate_ops {

template <class Schedule, class T, int... kTileArgs>
__device__ void comm_only(Schedule& s, const T* __restrict__ A, const T* __restrict__ B,
                          T* __restrict__ C, int M, int N, int K) {
  for (int i = s.first(); i < s.num_tiles(); i += s.stride()) {
    const syncopate::Tile t = s.tile(i);
    if (!s.wait(t)) return;
    s.done(t);
  }
}

}  // namespace syncopate_ops
)cuda";

// GEMM+AllReduce has no spec factory of its own: the ReduceScatter GEMM spec with C bound to
// the AllReduce's in-place buffer "data" (templates.h conventions).
absl::Status RebindOutputToData(jit::KernelSpec& spec) {
  spec.name += "_allreduce";
  for (jit::KernelParam& param : spec.params) {
    auto* op = std::get_if<jit::OperandSpec>(&param);
    if (op != nullptr && op->name == "C") {
      op->buffer = "data";
      return absl::OkStatus();
    }
  }
  return absl::InternalError("the ReduceScatter GEMM spec has no operand C");
}

// allreduce.direct_out's buffer that only its own rank's copies write (jit::OperandSlot::
// rank_private).
constexpr char kPrivateOutput[] = "out";

}  // namespace

std::string DefaultPlanTemplate(Collective collective) {
  static constexpr const char* kTemplates[] = {"allgather.push", "reducescatter.direct",
                                               "allreduce.direct"};
  const int i = static_cast<int>(collective);
  return i >= 0 && i < 3 ? kTemplates[i] : "";
}

absl::StatusOr<OpKernels> BuildOpKernels(const OpKernelsRequest& r) {
  plan::TemplateParams tp;
  tp.world_size = r.world;
  tp.dtype = r.dtype;
  tp.axis = 0;  // shards are row slabs (tokens)
  tp.chunks_per_shard = r.chunks;
  OpKernels out;
  const bool ag = r.collective == Collective::kAllGather;
  gemm::GemmKernelChoice gemm = gemm::SelectGemm(
      r.cc, ag ? gemm::GemmWorkload::kAllGather : gemm::GemmWorkload::kReduceScatter, r.m, r.n, r.k,
      r.dtype, r.force_mma, r.tuned ? &*r.tuned : nullptr);
  out.gemm_spec = std::move(gemm.spec);
  out.gemm_source = gemm.source_name;
  // A string, not a literal's assign(): gcc 12 warns (-Wrestrict) falsely on that.
  out.in_place_operand = std::string(ag ? "C" : "A");
  switch (r.collective) {
    case Collective::kAllGather:
      tp.shape = {r.m, r.k};
      break;
    case Collective::kReduceScatter:
      tp.shape = {r.m, r.n};
      out.result_buffer = "output";
      break;
    case Collective::kAllReduce:
      tp.shape = {r.m, r.n};
      RETURN_IF_ERROR(RebindOutputToData(out.gemm_spec));
      out.result_buffer = "data";
      break;
  }
  const std::string name =
      r.plan_template.empty() ? DefaultPlanTemplate(r.collective) : r.plan_template;
  auto built = plan::BuildTemplate(name, tp);
  if (!built.ok()) {
    return absl::Status(built.status().code(),
                        absl::StrCat("plan ", name, " (", r.chunks,
                                     " chunks per shard): ", built.status().message()));
  }
  out.plan = *std::move(built);
  for (const plan::Transfer* t : out.plan.TransfersById()) {
    if (t != nullptr && t->reduce != plan::ReduceOp::kNone) out.has_reductions = true;
  }
  if (r.collective == Collective::kAllReduce && out.plan.FindBuffer(kPrivateOutput) != nullptr) {
    out.private_output = kPrivateOutput;
  }
  out.gemm_spec.push_tiles = r.push_tiles;
  out.comm_spec = out.gemm_spec;
  out.comm_spec.push_tiles = false;
  out.comm_spec.name += "_comm_only";
  out.comm_spec.entry = "syncopate_ops::comm_only";
  // No shared memory: more of these tiny CTAs fit, and they only spin on flags.
  out.comm_spec.dynamic_smem_bytes = 0;
  RETURN_IF_ERROR(jit::ValidateKernelSpec(out.comm_spec));
  RETURN_IF_ERROR(jit::CheckSpecAgainstPlan(out.gemm_spec, out.plan));
  return out;
}

std::string_view CommOnlySource() { return kCommOnlySource; }

Collective CollectiveOf(OpKind kind) {
  switch (kind) {
    case OpKind::kAllGatherMatmul:
      return Collective::kAllGather;
    case OpKind::kMatmulReduceScatter:
      return Collective::kReduceScatter;
    case OpKind::kMatmulAllReduce:
      return Collective::kAllReduce;
  }
  return Collective::kAllGather;
}

absl::StatusOr<BucketKernels> PlanBucket(const OpConfig& config, int world, int64_t bucket_m,
                                         int cc) {
  BucketKernels b;
  Result<PathChoice> path = ChoosePath(config, world, bucket_m);
  if (!path.ok()) return ToAbsl(path.status());
  b.path = *path;
  OpKernelsRequest request;
  request.collective = CollectiveOf(config.kind);
  request.m = bucket_m;
  request.n = config.n;
  request.k = config.k;
  request.world = world;
  request.dtype = config.dtype == DType::kFP16 ? plan::DType::kF16 : plan::DType::kBF16;
  request.chunks = b.path.chunks;
  request.push_tiles = b.path.tile_parts;
  request.plan_template = b.path.plan;
  request.cc = cc;
  if (!config.cache_dir.empty()) {
    ASSIGN_OR_RETURN(request.tuned, gemm::FindTunedWgmma(config.cache_dir, cc, bucket_m, config.n,
                                                         config.k, request.dtype));
  }
  absl::StatusOr<OpKernels> kernels = BuildOpKernels(request);
  if (!kernels.ok()) {
    return absl::Status(kernels.status().code(),
                        absl::StrCat("bucket M=", bucket_m, ": ", kernels.status().message()));
  }
  b.kernels = *std::move(kernels);
  // Path(m) names this plan: it must be the one built (a template's name is its plan's).
  if (b.kernels.plan.name != b.path.plan) {
    return absl::InternalError(absl::StrCat("bucket M=", bucket_m, ": built plan ",
                                            b.kernels.plan.name, " for path plan ", b.path.plan));
  }
  return b;
}

}  // namespace syncopate::ops
