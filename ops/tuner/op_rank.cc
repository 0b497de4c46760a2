// One rank of an op as a measurement drives it; see op_rank.h.
#include "ops/tuner/op_rank.h"

#include <algorithm>
#include <utility>

#include "core/plan/plan.h"
#include "runtime/cuda/workloads/test_kernels.h"

namespace syncopate::ops {

absl::StatusOr<OpRank> SetUpOpRank(const GroupConfig& group, const OpConfig& config) {
  OpRank r;
  Result<std::unique_ptr<Op>> created = Op::Create(group, config);
  RETURN_IF_ERROR(ToAbsl(created.status()));
  r.op = std::move(*created);
  ASSIGN_OR_RETURN(r.api, cuda::Driver());
  constexpr int64_t kBytes = 2;  // bf16 or fp16
  ASSIGN_OR_RETURN(r.a, cuda::DeviceBuffer::Allocate(*r.api, config.max_m * config.k * kBytes));
  ASSIGN_OR_RETURN(r.w, cuda::DeviceBuffer::Allocate(*r.api, config.n * config.k * kBytes));
  ASSIGN_OR_RETURN(r.out, cuda::DeviceBuffer::Allocate(*r.api, config.max_m * config.n * kBytes));
  ASSIGN_OR_RETURN(r.stream, cuda::Stream::Create(*r.api));
  // Filled on the device, as the tp bench does: the host fill copied from pageable memory before
  // it crashed rank 0 on the H100 every time (signal 11, 2026-12-06; not traced).
  ASSIGN_OR_RETURN(cuda::Context context, cuda::Context::Retain(group.device));
  ASSIGN_OR_RETURN(workloads::TestKernels fill, workloads::TestKernels::Load(context));
  const int rank = group.rank;
  const plan::DType dtype = config.dtype == DType::kFP16 ? plan::DType::kF16 : plan::DType::kBF16;
  RETURN_IF_ERROR(
      fill.Fill(r.a.get(), config.max_m * config.k, dtype, 2 * rank + 1, r.stream.get()));
  RETURN_IF_ERROR(fill.Fill(r.w.get(), config.n * config.k, dtype, 2 * rank + 2, r.stream.get()));
  RETURN_IF_ERROR(r.stream.Synchronize());
  return r;
}

RunArgs RunArgsAt(const OpRank& r, int64_t m) {
  const CUdeviceptr workspace = r.shard_in_workspace ? r.op->InputWorkspace(m) : 0;
  return {.m = m, .a = workspace != 0 ? workspace : r.a.get(), .b = r.w.get(), .c = r.out.get()};
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 == 1 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

}  // namespace syncopate::ops
