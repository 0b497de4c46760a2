// AllToAll templates (uniform and variable splits, for MoE dispatch/combine): rank s's "send" holds
// its blocks for destinations 0..W-1 concatenated along the axis; rank d's "recv" receives the
// blocks from sources 0..W-1 concatenated along the axis in source order.
// Stateless functions; safe to call from any thread.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "core/plan/templates_internal.h"

namespace syncopate::plan::internal {
namespace {

using Splits = std::vector<std::vector<int64_t>>;

absl::StatusOr<Splits> UniformSplits(const TemplateParams& params) {
  const int w = params.world_size;
  const int64_t extent = params.shape[params.axis];
  if (extent % w != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shape[axis] = %d must be divisible by world_size %d for a uniform alltoall (use "
        "alltoall.variable with splits)",
        extent, w));
  }
  if (extent / w < params.chunks_per_shard) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "chunks_per_shard %d exceeds the block extent %d (shape[axis] %d over world_size %d); "
        "every chunk must be non-empty",
        params.chunks_per_shard, extent / w, extent, w));
  }
  return Splits(w, std::vector<int64_t>(w, extent / w));
}

absl::Status CheckSplits(const TemplateParams& params) {
  const int w = params.world_size;
  const Splits& splits = params.splits;
  if (static_cast<int>(splits.size()) != w) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "splits has %d rows, want world_size x world_size = %d x %d", splits.size(), w, w));
  }
  for (int s = 0; s < w; ++s) {
    if (static_cast<int>(splits[s].size()) != w) {
      return absl::InvalidArgumentError(
          absl::StrFormat("splits[%d] has %d entries, want world_size %d", s, splits[s].size(), w));
    }
    int64_t sum = 0;
    for (int d = 0; d < w; ++d) {
      if (splits[s][d] < 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("splits[%d][%d] = %d is negative", s, d, splits[s][d]));
      }
      sum += splits[s][d];
    }
    if (sum > params.shape[params.axis]) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "splits[%d] sums to %d, more than shape[axis] = %d (the send buffer's extent)", s, sum,
          params.shape[params.axis]));
    }
  }
  return absl::OkStatus();
}

// Offsets along the axis: send_at[s][d] in rank s's "send", recv_at[s][d] in rank d's "recv".
struct BlockOffsets {
  Splits send_at;
  Splits recv_at;
  int64_t recv_extent = 1;
};

BlockOffsets ComputeOffsets(const Splits& splits) {
  const int w = static_cast<int>(splits.size());
  BlockOffsets o{Splits(w, std::vector<int64_t>(w)), Splits(w, std::vector<int64_t>(w)), 1};
  for (int s = 0; s < w; ++s) {
    for (int d = 1; d < w; ++d) o.send_at[s][d] = o.send_at[s][d - 1] + splits[s][d - 1];
  }
  for (int d = 0; d < w; ++d) {
    int64_t at = 0;
    for (int s = 0; s < w; ++s) {
      o.recv_at[s][d] = at;
      at += splits[s][d];
    }
    o.recv_extent = std::max(o.recv_extent, at);
  }
  return o;
}

}  // namespace

absl::StatusOr<Plan> BuildAllToAll(std::string_view algo, const TemplateParams& params) {
  const int w = params.world_size;
  const int axis = params.axis;
  const int chunks = params.chunks_per_shard;
  Splits splits;
  if (algo == "uniform" && !params.splits.empty()) {
    return absl::InvalidArgumentError(
        "splits must be empty for alltoall.uniform; use alltoall.variable");
  }
  if (params.splits.empty()) {
    ASSIGN_OR_RETURN(splits, UniformSplits(params));
  } else {
    RETURN_IF_ERROR(CheckSplits(params));
    splits = params.splits;
  }
  const BlockOffsets at = ComputeOffsets(splits);
  const Shape& send_shape = params.shape;
  Shape recv_shape = params.shape;
  recv_shape[axis] = at.recv_extent;

  PlanBuilder b(absl::StrCat("alltoall.", std::string(algo)), CollectiveKind::kAllToAll, w, 1);
  b.AddBuffer(MakeBuffer("send", params.dtype, send_shape));
  b.AddBuffer(MakeBuffer("recv", params.dtype, recv_shape));
  auto send_slab = [&](int s, int d, Range r) {
    return Region::Slab(send_shape, axis, at.send_at[s][d] + r.begin, at.send_at[s][d] + r.end);
  };
  auto recv_slab = [&](int s, int d, Range r) {
    return Region::Slab(recv_shape, axis, at.recv_at[s][d] + r.begin, at.recv_at[s][d] + r.end);
  };
  for (int s = 0; s < w; ++s) {
    b.AddInitial(s, "send", Region::Whole(send_shape));
    for (int d = 0; d < w; ++d) {
      const Range block{0, splits[s][d]};
      b.AddExpectation(Expectation{.rank = d,
                                   .buffer = "recv",
                                   .region = recv_slab(s, d, block),
                                   .op = ReduceOp::kNone,
                                   .sources = {{s, "send", send_slab(s, d, block)}}});
    }
  }
  // Round 0 is each rank's own block (LOCAL_COPY); in round d >= 1 rank s pushes to s + d, so
  // each rank receives from one source per round. Empty chunks of small blocks are dropped.
  for (int d = 0; d < w; ++d) {
    for (int k = 0; k < chunks; ++k) {
      for (int s = 0; s < w; ++s) {
        const int dst = (s + d) % w;
        const Range part = PartOf(0, splits[s][dst], chunks, k);
        if (part.size() == 0) continue;
        Transfer t =
            MakeTransfer(d == 0 ? TransferKind::kLocalCopy : TransferKind::kPush, s, dst, 0, "send",
                         send_slab(s, dst, part), "recv", recv_slab(s, dst, part),
                         (s * w + dst) * chunks + k, std::max(d - 1, 0));
        t.after_compute = params.produced_by_compute;
        b.Add(std::move(t));
      }
    }
  }
  return std::move(b).Finish();
}

}  // namespace syncopate::plan::internal
