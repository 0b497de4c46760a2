// Plans and kernel specs of syncopate_tp_bench's configurations; see kernels.h.
#include "bench/multigpu/kernels.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/plan/templates.h"
#include "jit/compiler/embedded_headers.h"
#include "runtime/gemm/gemm_kernels.h"

namespace syncopate::tp_bench {
namespace {

// Same call as gemm_mma / gemm_wgmma (any int template arguments after T: tile sizes, stages); every tile
// still waits for the chunks its A footprint reads (AllGather) and counts into the chunks its C
// footprint writes (ReduceScatter / AllReduce), so the transfers, their order and the protocol
// are exactly the fused kernel's.
constexpr char kCommOnlySource[] = R"cuda(
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <syncopate/device.cuh>

namespace syncopate_tp_bench {

template <class Schedule, class T, int... kTileArgs>
__device__ void comm_only(Schedule& s, const T* __restrict__ A, const T* __restrict__ B,
                          T* __restrict__ C, int M, int N, int K) {
  for (int i = s.first(); i < s.num_tiles(); i += s.stride()) {
    const syncopate::Tile t = s.tile(i);
    if (!s.wait(t)) return;
    s.done(t);
  }
}

}  // namespace syncopate_tp_bench
)cuda";

}  // namespace

std::string PlanTemplate(const BenchFlags& flags, Workload workload) {
  switch (workload) {
    case Workload::kAllGatherGemm:
      return flags.ag_plan;
    case Workload::kGemmReduceScatter:
      return flags.rs_plan;
    case Workload::kGemmAllReduce:
      return flags.ar_plan;
  }
  return "";
}

std::string_view CommOnlySource() { return kCommOnlySource; }

absl::StatusOr<ProblemKernels> BuildProblemKernels(const BenchFlags& flags, const Problem& p,
                                                   int chunks, int cc) {
  const plan::DType dt = plan::DType::kBF16;
  plan::TemplateParams tp;
  tp.world_size = p.world;
  tp.dtype = dt;
  tp.axis = 0;  // shards are row slabs (tokens)
  tp.chunks_per_shard = chunks;
  ProblemKernels out;
  const bool ag = p.workload == Workload::kAllGatherGemm;
  // A `syncopate tune` winner for this per-rank GEMM in the bench's cache directory, if any.
  ASSIGN_OR_RETURN(std::optional<gemm::WgmmaConfig> tuned,
                   gemm::FindTunedWgmma(flags.cache_dir, cc, p.m, p.n, p.k, dt));
  gemm::GemmKernelChoice gemm = gemm::SelectGemm(
      cc, ag ? gemm::GemmWorkload::kAllGather : gemm::GemmWorkload::kReduceScatter, p.m, p.n, p.k,
      dt, /*force_mma=*/flags.gemm == "mma", tuned ? &*tuned : nullptr);
  out.gemm_spec = std::move(gemm.spec);
  out.gemm_source = gemm.source_name;
  switch (p.workload) {
    case Workload::kAllGatherGemm:
      tp.shape = {p.m, p.k};
      break;
    case Workload::kGemmReduceScatter:
      tp.shape = {p.m, p.n};
      out.result_buffer = "output";
      break;
    case Workload::kGemmAllReduce: {
      tp.shape = {p.m, p.n};
      out.gemm_spec.name += "_allreduce";
      bool rebound = false;
      for (jit::KernelParam& param : out.gemm_spec.params) {
        auto* op = std::get_if<jit::OperandSpec>(&param);
        if (op != nullptr && op->name == "C") {
          op->buffer = "data";
          rebound = true;
        }
      }
      if (!rebound) return absl::InternalError("the ReduceScatter GEMM spec has no operand C");
      out.result_buffer = "data";
      break;
    }
  }
  const std::string name = PlanTemplate(flags, p.workload);
  auto built = plan::BuildTemplate(name, tp);
  if (!built.ok()) {
    return absl::Status(built.status().code(),
                        absl::StrCat("plan ", name, " (", chunks, " chunks per shard): ",
                                     built.status().message()));
  }
  out.plan = *std::move(built);
  for (const plan::Transfer* t : out.plan.TransfersById()) {
    if (t != nullptr && t->reduce != plan::ReduceOp::kNone) out.has_reductions = true;
  }
  out.comm_spec = out.gemm_spec;
  out.comm_spec.name += "_comm_only";
  out.comm_spec.entry = "syncopate_tp_bench::comm_only";
  // No shared memory: more of these tiny CTAs fit, and they only spin on flags.
  out.comm_spec.dynamic_smem_bytes = 0;
  RETURN_IF_ERROR(jit::ValidateKernelSpec(out.comm_spec));
  RETURN_IF_ERROR(jit::CheckSpecAgainstPlan(out.gemm_spec, out.plan));
  return out;
}

}  // namespace syncopate::tp_bench
