// Plans and kernel specs of syncopate_tp_bench's configurations; see kernels.h.
#include "bench/multigpu/kernels.h"

#include "core/base/status_macros.h"
#include "runtime/gemm/gemm_kernels.h"

namespace syncopate::tp_bench {

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

std::string_view CommOnlySource() { return ops::CommOnlySource(); }

absl::StatusOr<ProblemKernels> BuildProblemKernels(const BenchFlags& flags, const Problem& p,
                                                   int chunks, int cc) {
  ops::OpKernelsRequest request;
  switch (p.workload) {
    case Workload::kAllGatherGemm:
      request.collective = ops::Collective::kAllGather;
      break;
    case Workload::kGemmReduceScatter:
      request.collective = ops::Collective::kReduceScatter;
      break;
    case Workload::kGemmAllReduce:
      request.collective = ops::Collective::kAllReduce;
      break;
  }
  request.m = p.m;
  request.n = p.n;
  request.k = p.k;
  request.world = p.world;
  request.dtype = plan::DType::kBF16;
  request.chunks = chunks;
  request.cc = cc;
  request.force_mma = flags.gemm == "mma";
  request.plan_template = PlanTemplate(flags, p.workload);
  request.push_tiles = flags.push_tiles;
  // A `syncopate tune` winner for this per-rank GEMM in the bench's cache directory, if any.
  ASSIGN_OR_RETURN(request.tuned,
                   gemm::FindTunedWgmma(flags.cache_dir, cc, p.m, p.n, p.k, request.dtype));
  return ops::BuildOpKernels(request);
}

}  // namespace syncopate::tp_bench
