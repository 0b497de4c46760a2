// AllGather templates (push, pull, ring, biring, two_level) and the AllGather phase builders that
// AllReduce reuses. Buffer "data" is gathered in place; rank r starts with shard r.
// Stateless functions; safe to call from any thread.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "core/plan/templates_internal.h"

namespace syncopate::plan::internal {
namespace {

std::vector<int> Ready(const GatherPhase& p, int shard, int chunk) {
  return p.ready == nullptr ? std::vector<int>{} : (*p.ready)[shard][chunk];
}

// A push of chunk (j, k) of the gathered buffer from `from` to `to` (same region on both ranks).
Transfer GatherPush(const ShardLayout& l, const GatherPhase& p, int j, int k, int from, int to,
                    int channel, int step) {
  Region region = l.ChunkRegion(j, k);
  return MakeTransfer(TransferKind::kPush, from, to, channel, p.buffer, region, p.buffer, region,
                      l.GlobalChunk(j, k), step);
}

// The first hop of chunk (j, k) out of its owner j: gated by the owner's readiness and, for a
// producer, by the local computation.
Transfer OwnerPush(const ShardLayout& l, const GatherPhase& p, int j, int k, int to, int channel,
                   int step) {
  Transfer t = GatherPush(l, p, j, k, j, to, channel, step);
  t.deps = Ready(p, j, k);
  t.after_compute = p.owner_after_compute;
  return t;
}

// Chunk (j, k) travels from its owner around the ring in direction `dir` (+1 or -1), W-1 hops;
// hop s is sent by owner + s*dir and depends on hop s-1, whose destination it is. Hop s takes
// step k*(W-1) + s past the phase's base (chunk-major: a rank forwards chunk k before chunk
// k+1's first hop, which may wait for computation; the ReduceScatter rings do the same, so an
// AllReduce's gather of chunk k sorts after its reduction).
void AddRingChain(PlanBuilder& b, const ShardLayout& l, const GatherPhase& p, int j, int k, int dir,
                  int channel) {
  const int w = l.world();
  const int chunk_step = p.step_base + k * (w - 1);
  int prev = -1;
  for (int s = 0; s + 1 < w; ++s) {
    const int from = ((j + s * dir) % w + w) % w;
    const int to = ((from + dir) % w + w) % w;
    Transfer t = s == 0 ? OwnerPush(l, p, j, k, to, channel, chunk_step)
                        : GatherPush(l, p, j, k, from, to, channel, chunk_step + s);
    if (s > 0) t.deps = {prev};
    prev = b.Add(std::move(t));
  }
}

}  // namespace

absl::Status AddAllGatherPush(PlanBuilder& b, const ShardLayout& l, const GatherPhase& p) {
  const int w = l.world();
  // Round d: every rank r pushes to r + d, so each rank receives from exactly one peer per round.
  for (int d = 1; d < w; ++d) {
    for (int k = 0; k < l.chunks(); ++k) {
      for (int r = 0; r < w; ++r) {
        b.Add(OwnerPush(l, p, r, k, (r + d) % w, p.channel_base, p.step_base + d - 1));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status AddAllGatherDirect(PlanBuilder& b, const ShardLayout& l, const GatherPhase& p,
                                ChunkPushes* pushes) {
  const int w = l.world();
  if (pushes != nullptr) {
    pushes->assign(w, std::vector<std::vector<int>>(l.chunks(), std::vector<int>(w, -1)));
  }
  // Chunk-major, one channel per round: chunk k's round d at step k * (W-1) + d - 1 past the base.
  for (int k = 0; k < l.chunks(); ++k) {
    for (int d = 1; d < w; ++d) {
      for (int j = 0; j < w; ++j) {
        const int to = (j + d) % w;
        const int handle = b.Add(
            OwnerPush(l, p, j, k, to, p.channel_base + d - 1, p.step_base + k * (w - 1) + d - 1));
        if (pushes != nullptr) (*pushes)[j][k][to] = handle;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status AddAllGatherPull(PlanBuilder& b, const ShardLayout& l, const GatherPhase& p) {
  if (p.ready != nullptr || p.owner_after_compute) {
    // A puller cannot observe the owner's readiness (transfers into, or computation on, the peer).
    return absl::InternalError("allgather pull phase cannot be gated on the owner");
  }
  const int w = l.world();
  // Round d: rank r pulls shard r + d from its owner, so each owner serves one puller per round.
  for (int d = 1; d < w; ++d) {
    for (int k = 0; k < l.chunks(); ++k) {
      for (int r = 0; r < w; ++r) {
        const int owner = (r + d) % w;
        Region region = l.ChunkRegion(owner, k);
        b.Add(MakeTransfer(TransferKind::kPull, r, owner, p.channel_base, p.buffer, region,
                           p.buffer, region, l.GlobalChunk(owner, k), p.step_base + d - 1));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status AddAllGatherRing(PlanBuilder& b, const ShardLayout& l, const GatherPhase& p) {
  for (int j = 0; j < l.world(); ++j) {
    for (int k = 0; k < l.chunks(); ++k) AddRingChain(b, l, p, j, k, +1, p.channel_base);
  }
  return absl::OkStatus();
}

absl::Status AddAllGatherBiring(PlanBuilder& b, const ShardLayout& l, const GatherPhase& p) {
  // Even global chunks clockwise on channel base, odd ones counter-clockwise on channel base+1:
  // with one chunk per shard, shards alternate direction, so both link directions carry half.
  for (int j = 0; j < l.world(); ++j) {
    for (int k = 0; k < l.chunks(); ++k) {
      const bool clockwise = l.GlobalChunk(j, k) % 2 == 0;
      AddRingChain(b, l, p, j, k, clockwise ? +1 : -1, p.channel_base + (clockwise ? 0 : 1));
    }
  }
  return absl::OkStatus();
}

absl::Status AddAllGatherTwoLevel(PlanBuilder& b, const ShardLayout& l, const GatherPhase& p) {
  const int w = l.world();
  const TwoLevelGrid grid(w, p.ranks_per_node, p.channel_base);
  const int rpn = grid.rpn, nodes = grid.nodes, intra = grid.intra, inter = grid.inter;
  auto at = [&grid](int node, int local) { return grid.at(node, local); };
  // Level 0, intra-node: the owner pushes its shard to every other rank of its node.
  for (int dl = 1; dl < rpn; ++dl) {
    for (int k = 0; k < l.chunks(); ++k) {
      for (int j = 0; j < w; ++j) {
        b.Add(OwnerPush(l, p, j, k, at(j / rpn, (j % rpn + dl) % rpn), intra, p.step_base));
      }
    }
  }
  // Level 0, inter-node: the owner pushes its shard to the same local index on every other node.
  // handle[dn][k][j]: the inter-node transfer of chunk (j, k) to node j/rpn + dn.
  std::vector<std::vector<std::vector<int>>> handle(
      nodes, std::vector<std::vector<int>>(l.chunks(), std::vector<int>(w, -1)));
  for (int dn = 1; dn < nodes; ++dn) {
    for (int k = 0; k < l.chunks(); ++k) {
      for (int j = 0; j < w; ++j) {
        const int to = at((j / rpn + dn) % nodes, j % rpn);
        handle[dn][k][j] = b.Add(OwnerPush(l, p, j, k, to, inter, p.step_base));
      }
    }
  }
  // Level 1: the inter-node receiver forwards the chunk to the rest of its node.
  for (int dn = 1; dn < nodes; ++dn) {
    for (int dl = 1; dl < rpn; ++dl) {
      for (int k = 0; k < l.chunks(); ++k) {
        for (int j = 0; j < w; ++j) {
          const int node = (j / rpn + dn) % nodes;
          const int from = at(node, j % rpn);
          const int to = at(node, (j % rpn + dl) % rpn);
          Transfer t = GatherPush(l, p, j, k, from, to, intra, p.step_base + 1);
          t.deps = {handle[dn][k][j]};
          b.Add(std::move(t));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Plan> BuildAllGather(std::string_view algo, const TemplateParams& params) {
  const int w = params.world_size;
  ShardLayout layout(params.shape, params.axis, w, params.chunks_per_shard,
                     Range{0, params.shape[params.axis]});
  RETURN_IF_ERROR(CheckShardExtent(layout, params, "shape[axis]"));
  GatherPhase phase;
  phase.owner_after_compute = params.produced_by_compute;
  int channels = 1;
  if (algo == "biring") channels = 2;
  if (algo == "two_level") {
    RETURN_IF_ERROR(CheckRanksPerNode(params));
    phase.ranks_per_node = params.ranks_per_node;
    channels = 2;
  }
  if (algo == "pull" && params.produced_by_compute) {
    return absl::InvalidArgumentError(
        "produced_by_compute: allgather.pull reads the peer's shard, which the puller cannot "
        "order after the peer's computation; use allgather.push");
  }

  PlanBuilder b(absl::StrCat("allgather.", std::string(algo)), CollectiveKind::kAllGather, w,
                channels);
  b.AddBuffer(MakeBuffer(phase.buffer, params.dtype, params.shape));
  for (int r = 0; r < w; ++r) {
    b.AddInitial(r, phase.buffer, layout.ShardRegion(r));
    for (int j = 0; j < w; ++j) {
      b.AddExpectation(Expectation{.rank = r,
                                   .buffer = phase.buffer,
                                   .region = layout.ShardRegion(j),
                                   .op = ReduceOp::kNone,
                                   .sources = {{j, phase.buffer, layout.ShardRegion(j)}}});
    }
  }
  if (algo == "push") RETURN_IF_ERROR(AddAllGatherPush(b, layout, phase));
  if (algo == "pull") RETURN_IF_ERROR(AddAllGatherPull(b, layout, phase));
  if (algo == "ring") RETURN_IF_ERROR(AddAllGatherRing(b, layout, phase));
  if (algo == "biring") RETURN_IF_ERROR(AddAllGatherBiring(b, layout, phase));
  if (algo == "two_level") RETURN_IF_ERROR(AddAllGatherTwoLevel(b, layout, phase));
  return std::move(b).Finish();
}

}  // namespace syncopate::plan::internal
