// Template registry, parameter checks, shard/chunk slab arithmetic and the plan builder shared by
// every collective template. The per-collective algorithms live in templates_allgather.cc,
// templates_reduce.cc (ReduceScatter, AllReduce) and templates_alltoall.cc.
// Stateless functions; safe to call from any thread.
#include "core/plan/templates.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/plan/templates_internal.h"

namespace syncopate::plan {
namespace internal {

Range PartOf(int64_t begin, int64_t extent, int parts, int i) {
  const int64_t base = extent / parts;
  const int64_t extra = extent % parts;
  const int64_t start = begin + i * base + std::min<int64_t>(i, extra);
  return {start, start + base + (i < extra ? 1 : 0)};
}

ShardLayout::ShardLayout(Shape shape, int axis, int world, int chunks, Range slab, int chunk_base)
    : shape_(std::move(shape)),
      axis_(axis),
      world_(world),
      chunks_(chunks),
      slab_(slab),
      chunk_base_(chunk_base) {}

Range ShardLayout::Shard(int j) const { return PartOf(slab_.begin, slab_.size(), world_, j); }

Range ShardLayout::Chunk(int j, int k) const {
  const Range shard = Shard(j);
  return PartOf(shard.begin, shard.size(), chunks_, k);
}

Region ShardLayout::ShardRegion(int j) const {
  const Range r = Shard(j);
  return Region::Slab(shape_, axis_, r.begin, r.end);
}

Region ShardLayout::ChunkRegion(int j, int k) const {
  const Range r = Chunk(j, k);
  return Region::Slab(shape_, axis_, r.begin, r.end);
}

Region ShardLayout::ChunkInShard(const Shape& shard_shape, int j, int k) const {
  const int64_t shard_begin = Shard(j).begin;
  const Range r = Chunk(j, k);
  return Region::Slab(shard_shape, axis_, r.begin - shard_begin, r.end - shard_begin);
}

ChunkDeps EmptyChunkDeps(const ShardLayout& layout) {
  return ChunkDeps(layout.world(), std::vector<std::vector<int>>(layout.chunks()));
}

PlanBuilder::PlanBuilder(std::string name, CollectiveKind kind, int world_size, int num_channels)
    : num_channels_(num_channels) {
  plan_.name = std::move(name);
  plan_.collective = kind;
  plan_.world_size = world_size;
  plan_.ranks.resize(world_size);
}

void PlanBuilder::AddInitial(int rank, const std::string& buffer, const Region& region) {
  if (region.empty()) return;
  std::vector<Box> boxes;
  if (auto it = plan_.ranks[rank].initial.find(buffer); it != plan_.ranks[rank].initial.end()) {
    boxes = it->second.boxes();
  }
  boxes.insert(boxes.end(), region.boxes().begin(), region.boxes().end());
  plan_.ranks[rank].initial[buffer] = Region(std::move(boxes));
}

void PlanBuilder::AddExpectation(Expectation expectation) {
  if (expectation.region.empty()) return;
  plan_.postcondition.push_back(std::move(expectation));
}

int PlanBuilder::Add(Transfer t) {
  transfers_.push_back(std::move(t));
  return static_cast<int>(transfers_.size()) - 1;
}

absl::StatusOr<Plan> PlanBuilder::Finish() && {
  const int n = static_cast<int>(transfers_.size());
  // Stable by step: within a step, insertion order (which the templates make round/chunk order).
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return transfers_[a].step < transfers_[b].step; });
  std::vector<int> new_id(n);
  for (int i = 0; i < n; ++i) new_id[order[i]] = i;

  for (RankPlan& rp : plan_.ranks) rp.channels.assign(num_channels_, {});
  std::vector<int> next_signal(plan_.world_size, 0);
  for (int i = 0; i < n; ++i) {
    Transfer t = std::move(transfers_[order[i]]);
    t.id = i;
    for (int& dep : t.deps) {
      if (dep < 0 || dep >= n || new_id[dep] >= i) {
        return absl::InternalError(absl::StrFormat(
            "template %s: transfer %d depends on handle %d that does not precede it", plan_.name, i,
            dep));
      }
      dep = new_id[dep];
    }
    if (t.channel < 0 || t.channel >= num_channels_) {
      return absl::InternalError(
          absl::StrFormat("template %s: channel %d out of range", plan_.name, t.channel));
    }
    t.signal = next_signal[t.dst_rank()]++;
    plan_.ranks[t.rank].channels[t.channel].push_back(std::move(t));
  }
  return std::move(plan_);
}

Transfer MakeTransfer(TransferKind kind, int rank, int peer, int channel,
                      const std::string& src_buf, Region src, const std::string& dst_buf,
                      Region dst, int chunk, int step) {
  Transfer t;
  t.kind = kind;
  t.rank = rank;
  t.peer = peer;
  t.channel = channel;
  t.src_buffer = src_buf;
  t.src_region = std::move(src);
  t.dst_buffer = dst_buf;
  t.dst_region = std::move(dst);
  t.chunk = chunk;
  t.step = step;
  return t;
}

absl::Status CheckCommonParams(const TemplateParams& params) {
  if (params.world_size < 1 || params.world_size > kMaxTemplateWorldSize) {
    return absl::InvalidArgumentError(absl::StrFormat("world_size %d out of range 1..%d",
                                                      params.world_size, kMaxTemplateWorldSize));
  }
  if (params.shape.empty()) {
    return absl::InvalidArgumentError("shape must have rank >= 1");
  }
  for (size_t i = 0; i < params.shape.size(); ++i) {
    if (params.shape[i] < 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("shape[%d] = %d: every extent must be >= 1", i, params.shape[i]));
    }
  }
  const int rank = static_cast<int>(params.shape.size());
  if (params.axis < 0 || params.axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrFormat("axis %d out of range for a shape of rank %d", params.axis, rank));
  }
  if (params.chunks_per_shard < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("chunks_per_shard %d must be >= 1", params.chunks_per_shard));
  }
  return absl::OkStatus();
}

absl::Status CheckShardExtent(const ShardLayout& layout, const TemplateParams& params,
                              std::string_view what) {
  if (layout.MinShardExtent() >= params.chunks_per_shard) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "chunks_per_shard %d exceeds the smallest shard extent %d along axis %d (%s split over "
      "world_size %d); every chunk must be non-empty",
      params.chunks_per_shard, layout.MinShardExtent(), params.axis, what, params.world_size));
}

absl::Status CheckRanksPerNode(const TemplateParams& params) {
  if (params.ranks_per_node < 1 || params.world_size % params.ranks_per_node != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ranks_per_node %d must be >= 1 and divide world_size %d",
                        params.ranks_per_node, params.world_size));
  }
  return absl::OkStatus();
}

absl::Status CheckReduceOp(const TemplateParams& params) {
  if (params.op == ReduceOp::kNone) {
    return absl::InvalidArgumentError("op must be a reduction (sum or max), not none");
  }
  return absl::OkStatus();
}

}  // namespace internal

std::vector<std::string> TemplateNames() {
  return {"allgather.push",          "allgather.pull",
          "allgather.ring",          "allgather.biring",
          "allgather.two_level",     "reducescatter.ring",
          "reducescatter.direct",    "reducescatter.direct_inplace",
          "reducescatter.two_level", "allreduce.rs_ag",
          "allreduce.direct",        "allreduce.direct_out",
          "allreduce.split",         "allreduce.two_level",
          "alltoall.uniform",        "alltoall.variable"};
}

absl::StatusOr<Plan> BuildTemplate(std::string_view name, const TemplateParams& params) {
  const std::vector<std::string> names = TemplateNames();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown template '", std::string(name),
                                                   "'; valid names: ", absl::StrJoin(names, ", ")));
  }
  RETURN_IF_ERROR(internal::CheckCommonParams(params));
  const size_t dot = name.find('.');
  const std::string_view family = name.substr(0, dot);
  const std::string_view algo = name.substr(dot + 1);
  if (family == "allgather") return internal::BuildAllGather(algo, params);
  if (family == "reducescatter") return internal::BuildReduceScatter(algo, params);
  if (family == "allreduce") return internal::BuildAllReduce(algo, params);
  return internal::BuildAllToAll(algo, params);
}

}  // namespace syncopate::plan
