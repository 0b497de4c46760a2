// Chunk-plan templates for the standard collectives, for any world size (1..64), shape, dtype,
// axis and chunks-per-shard count, and split(n) to re-chunk any plan.
//
// Buffer conventions (the kernel spec binds its operands to these names):
//   AllGather     "data": the full gathered tensor, in place; rank r starts with shard r.
//   ReduceScatter "input": each rank's full-size contribution (may be used as scratch);
//                 "output": shard-sized, rank r ends with the reduction of shard r.
//   AllReduce     "data": in place; every rank ends with the reduction of all ranks' data.
//   AllToAll      "send": rank r's blocks for every destination, concatenated along `axis`;
//                 "recv": rank r's blocks from every source, concatenated along `axis`.
// Shards split `shape[axis]` into world_size near-equal contiguous slabs (the first
// shape[axis] % world_size one larger), then each shard into chunks_per_shard chunks.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/plan/plan.h"

namespace syncopate::plan {

struct TemplateParams {
  int world_size = 1;
  Shape shape;  // the full tensor (AllGather, ReduceScatter input, AllReduce), or see AllToAll
  DType dtype = DType::kBF16;
  int axis = 0;
  int chunks_per_shard = 1;
  ReduceOp op = ReduceOp::kSum;  // ReduceScatter / AllReduce
  int ranks_per_node = 0;        // two-level templates: ranks [n*rpn, (n+1)*rpn) form node n
  int sub_collectives = 1;       // AllReduce "split": k sub-collectives along `axis`
  // AllToAll: rows (along axis) that rank src sends to rank dst: splits[src][dst]. Empty means
  // uniform: shape[axis] is the send buffer's extent, divided equally among destinations.
  std::vector<std::vector<int64_t>> splits;
};

// Template names: allgather.push, allgather.pull, allgather.ring, allgather.biring,
// allgather.two_level, reducescatter.ring, reducescatter.direct, reducescatter.two_level,
// allreduce.rs_ag, allreduce.split, allreduce.two_level, alltoall.uniform, alltoall.variable.
std::vector<std::string> TemplateNames();

// Builds the plan named `name`. Impossible parameters (world size out of 1..64, axis out of range,
// shard smaller than chunks_per_shard, ranks_per_node not dividing world_size, ...) give
// InvalidArgument naming the parameter.
absl::StatusOr<Plan> BuildTemplate(std::string_view name, const TemplateParams& params);

// Re-chunks a plan: every transfer becomes n transfers over SplitElements(n) of its regions
// (empty pieces dropped), dependencies and signals remapped so the plan stays valid.
absl::StatusOr<Plan> SplitPlan(const Plan& plan, int n);

}  // namespace syncopate::plan
