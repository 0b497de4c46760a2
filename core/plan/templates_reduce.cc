// ReduceScatter templates (ring, direct, direct_inplace, two_level) and AllReduce templates (rs_ag,
// direct, direct_out, split, two_level), which compose a ReduceScatter phase in place with an
// AllGather phase gated on it.
//
// after_compute rule for both families: a transfer gets after_compute exactly when its source is
// the executing rank's own contribution as its computation wrote it (nothing has been reduced into
// it yet): the first transfers of each rank's contribution. That is ring step 0, every direct
// push, every two-level intra-node push, and the out-of-place LOCAL_COPY when it has no deps (and
// the two-level inter-node send when ranks_per_node == 1; allreduce.direct_out's copies at world
// 1). Transfers that forward a partial sum depend on the reduction that landed in their source and
// are not marked; neither are AllReduce's AllGather sends (they depend on the ReduceScatter), nor
// allreduce.direct_out's copies at larger worlds. ValidatePlan models an after_compute source
// as exactly the rank's own contribution, so marking a forward would be wrong, not just redundant.
//
// Ordering obligation outside the plan model: reductions into "input" (RS) or "data" (AR) land on
// slabs the destination's computation writes. The runtime must not let such a reduction land
// before the destination's computation has written that slab (the plan model has no cross-rank
// compute dependency). Out-of-place RS results ("output") are never written by computation.
// Stateless functions; safe to call from any thread.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/plan/templates_internal.h"

namespace syncopate::plan::internal {
namespace {

// Where the reduced chunk (j, k) ends on its owner j.
Region ResultRegion(const ShardLayout& l, const ScatterPhase& p, int j, int k) {
  return p.in_place ? l.ChunkRegion(j, k) : l.ChunkInShard(p.output_shape, j, k);
}
const std::string& ResultBuffer(const ScatterPhase& p) { return p.in_place ? p.input : p.output; }

// A reduction of the sender's partial of chunk (j, k) into `to`, either into `to`'s own input
// (an intermediate hop) or into the owner's result.
Transfer ReducePush(const ShardLayout& l, const ScatterPhase& p, int j, int k, int from, int to,
                    bool into_result, bool own_contribution, int channel, int step) {
  Transfer t =
      into_result
          ? MakeTransfer(TransferKind::kPush, from, to, channel, p.input, l.ChunkRegion(j, k),
                         ResultBuffer(p), ResultRegion(l, p, j, k), l.GlobalChunk(j, k), step)
          : MakeTransfer(TransferKind::kPush, from, to, channel, p.input, l.ChunkRegion(j, k),
                         p.input, l.ChunkRegion(j, k), l.GlobalChunk(j, k), step);
  t.reduce = p.op;
  t.after_compute = own_contribution;
  return t;
}

// Out of place only: the owner reduces its own contribution (plus, with deps, what was reduced into
// its input first) into "output". It is a reduction too, not a copy, so it commutes with the
// incoming ones; whichever lands first initializes the element.
int AddOwnContribution(PlanBuilder& b, const ShardLayout& l, const ScatterPhase& p, int j, int k,
                       int channel, int step, std::vector<int> deps) {
  Transfer t = MakeTransfer(TransferKind::kLocalCopy, j, j, channel, p.input, l.ChunkRegion(j, k),
                            p.output, ResultRegion(l, p, j, k), l.GlobalChunk(j, k), step);
  t.reduce = p.op;
  t.after_compute = deps.empty();
  t.deps = std::move(deps);
  return b.Add(std::move(t));
}

}  // namespace

absl::StatusOr<ChunkDeps> AddReduceScatterRing(PlanBuilder& b, const ShardLayout& l,
                                               const ScatterPhase& p) {
  const int w = l.world();
  ChunkDeps done = EmptyChunkDeps(l);
  for (int j = 0; j < w; ++j) {
    for (int k = 0; k < l.chunks(); ++k) {
      // Chunk-major steps (as the direct template's): chunk k's hops take steps k * (W-1) + s, so
      // a rank's channel forwards chunk 0 before it sends chunk 1's first hop, which waits for
      // chunk 1's tiles, and never queues an early chunk's hop behind the last chunk's.
      const int chunk_step = p.step_base + k * (w - 1);
      if (!p.in_place) {
        done[j][k].push_back(AddOwnContribution(b, l, p, j, k, p.channel_base, chunk_step, {}));
      }
      // The partial of shard j starts at j + 1 and travels W-1 hops to j; hop s is sent by
      // j + 1 + s (ring step s) and accumulates into the receiver's input, the last into the
      // result.
      int prev = -1;
      for (int s = 0; s + 1 < w; ++s) {
        const int from = (j + 1 + s) % w;
        const int to = (from + 1) % w;
        Transfer t = ReducePush(l, p, j, k, from, to, /*into_result=*/s + 2 == w,
                                /*own_contribution=*/s == 0, p.channel_base, chunk_step + s);
        if (s > 0) t.deps = {prev};
        prev = b.Add(std::move(t));
      }
      if (prev >= 0) done[j][k].push_back(prev);
    }
  }
  return done;
}

// Round d = 1 .. W-1: rank q reduces its contribution to shard q + d into that owner's result, on
// channel channel_base + d - 1 (one channel per round); out of place, the owner's own
// contribution goes on round 1's channel. Every transfer waits only for its chunk's tiles and
// reductions commute, so nothing orders the rounds: one channel per round lets a rank's comm
// CTAs and joined compute CTAs move the rounds at once, where one channel for all of them moved
// its steps strictly one after another (a fused kernel keeps channel order; bench/RESULTS.md,
// twelfth session). Each channel is chunk-major: chunk k's transfer (step k * (W-1) + d - 1)
// before chunk k+1's, since a round-major order (every chunk's own contribution, then every
// chunk's round 1, ...) made chunk 0's reductions wait for the last chunk's tiles (eleventh
// session).
absl::StatusOr<ChunkDeps> AddReduceScatterDirect(PlanBuilder& b, const ShardLayout& l,
                                                 const ScatterPhase& p) {
  const int w = l.world();
  ChunkDeps done = EmptyChunkDeps(l);
  for (int k = 0; k < l.chunks(); ++k) {
    const int chunk_step = p.step_base + k * (w - 1);
    if (!p.in_place) {
      for (int j = 0; j < w; ++j) {
        done[j][k].push_back(AddOwnContribution(b, l, p, j, k, p.channel_base, chunk_step, {}));
      }
    }
    for (int d = 1; d < w; ++d) {
      for (int q = 0; q < w; ++q) {
        const int j = (q + d) % w;
        done[j][k].push_back(b.Add(ReducePush(l, p, j, k, q, j, /*into_result=*/true,
                                              /*own_contribution=*/true, p.channel_base + d - 1,
                                              chunk_step + d - 1)));
      }
    }
  }
  return done;
}

// reducescatter.direct_inplace: the direct rounds reduce into the owner's "input" shard (in
// place, as allreduce.direct's ReduceScatter: the owner's own contribution is what its
// computation wrote there, so no transfer adds it), then the owner copies each reduced chunk to
// "output" on channel W - 1, once the W-1 reductions into it landed. Against "direct": W-1
// atomic reductions per element instead of W (the own contribution's is gone), no identity fill
// of "output", and a local copy at the end of each chunk. Measured slower than "direct" (H200
// under MPS, bench/RESULTS.md, fourteenth session): the copy waits for every reduction, a
// dependent step the direct plan does not have. The result of chunk (j, k) is its copy.
absl::StatusOr<ChunkDeps> AddReduceScatterDirectInPlace(PlanBuilder& b, const ShardLayout& l,
                                                        const ScatterPhase& p) {
  const int w = l.world();
  ScatterPhase in_place = p;
  in_place.in_place = true;
  ASSIGN_OR_RETURN(const ChunkDeps reduced, AddReduceScatterDirect(b, l, in_place));
  ChunkDeps done = EmptyChunkDeps(l);
  for (int k = 0; k < l.chunks(); ++k) {
    for (int j = 0; j < w; ++j) {
      Transfer copy =
          MakeTransfer(TransferKind::kLocalCopy, j, j, p.channel_base + w - 1, p.input,
                       l.ChunkRegion(j, k), p.output, l.ChunkInShard(p.output_shape, j, k),
                       l.GlobalChunk(j, k), p.step_base + k * (w - 1) + std::max(0, w - 2));
      copy.deps = reduced[j][k];
      copy.after_compute = copy.deps.empty();  // world 1: the contribution as computed
      done[j][k].push_back(b.Add(std::move(copy)));
    }
  }
  return done;
}

absl::StatusOr<ChunkDeps> AddReduceScatterTwoLevel(PlanBuilder& b, const ShardLayout& l,
                                                   const ScatterPhase& p) {
  const int w = l.world();
  const TwoLevelGrid grid(w, p.ranks_per_node, p.channel_base);
  const int rpn = grid.rpn, nodes = grid.nodes, intra = grid.intra, inter = grid.inter;
  auto at = [&grid](int node, int local) { return grid.at(node, local); };
  // Level 0, intra-node: rank (n, l) reduces its contribution to every shard (n', l'), l' != l,
  // into the input of (n, l'), which thereby collects node n's partial of the shards of local
  // index l'. into[x][j][k]: the intra-node reductions of chunk (j, k) into rank x.
  std::vector<std::vector<std::vector<std::vector<int>>>> into(
      w, std::vector<std::vector<std::vector<int>>>(w, std::vector<std::vector<int>>(l.chunks())));
  for (int dl = 1; dl < rpn; ++dl) {
    for (int dn = 0; dn < nodes; ++dn) {
      for (int k = 0; k < l.chunks(); ++k) {
        for (int x = 0; x < w; ++x) {
          const int to = at(x / rpn, (x % rpn + dl) % rpn);
          const int j = at((x / rpn + dn) % nodes, to % rpn);
          into[to][j][k].push_back(
              b.Add(ReducePush(l, p, j, k, x, to, /*into_result=*/false,
                               /*own_contribution=*/true, intra, p.step_base)));
        }
      }
    }
  }
  // Level 1, inter-node: (n, l') reduces node n's partial of shard (n', l') into that owner's
  // result, once its node's partial is complete (the reductions into itself).
  ChunkDeps done = EmptyChunkDeps(l);
  for (int j = 0; j < w; ++j) {
    for (int k = 0; k < l.chunks(); ++k) {
      if (p.in_place) {
        done[j][k] = into[j][j][k];
      } else {
        done[j][k].push_back(
            AddOwnContribution(b, l, p, j, k, intra, p.step_base + 1, into[j][j][k]));
      }
    }
  }
  for (int dn = 1; dn < nodes; ++dn) {
    for (int k = 0; k < l.chunks(); ++k) {
      for (int y = 0; y < w; ++y) {
        const int j = at((y / rpn + dn) % nodes, y % rpn);
        Transfer t = ReducePush(l, p, j, k, y, j, /*into_result=*/true,
                                /*own_contribution=*/into[y][j][k].empty(), inter, p.step_base + 1);
        t.deps = into[y][j][k];
        done[j][k].push_back(b.Add(std::move(t)));
      }
    }
  }
  return done;
}

namespace {

absl::StatusOr<ChunkDeps> AddScatterPhase(std::string_view algo, PlanBuilder& b,
                                          const ShardLayout& l, const ScatterPhase& p) {
  if (algo == "ring") return AddReduceScatterRing(b, l, p);
  if (algo == "direct") return AddReduceScatterDirect(b, l, p);
  if (algo == "direct_inplace") return AddReduceScatterDirectInPlace(b, l, p);
  return AddReduceScatterTwoLevel(b, l, p);
}

// "data" starts valid everywhere and must end as the reduction of every rank's data; with `out`,
// so must that buffer (same shape and dtype), which starts with nothing.
void AddAllReduceContract(PlanBuilder& b, const TemplateParams& params,
                          const std::string& out = "") {
  b.AddBuffer(MakeBuffer("data", params.dtype, params.shape));
  if (!out.empty()) b.AddBuffer(MakeBuffer(out, params.dtype, params.shape));
  const Region whole = Region::Whole(params.shape);
  std::vector<Contribution> sources;
  for (int q = 0; q < params.world_size; ++q) sources.push_back({q, "data", whole});
  for (int r = 0; r < params.world_size; ++r) {
    b.AddInitial(r, "data", whole);
    b.AddExpectation(Expectation{
        .rank = r, .buffer = "data", .region = whole, .op = params.op, .sources = sources});
    if (!out.empty()) {
      b.AddExpectation(Expectation{
          .rank = r, .buffer = out, .region = whole, .op = params.op, .sources = sources});
    }
  }
}

// allreduce.split: sub-collective i covers slab i of shape[axis] (PartOf into sub_collectives),
// runs a ring RS (channel 0, steps from i*(W-1)) then a ring AG (channel 1, steps from
// (i+1)*(W-1)), so sub-collective i+1's RS runs while sub-collective i's AG does. Both rings
// take chunk k's hops at k*(W-1) past their base: AG chunk k's first hop sorts after RS chunk
// k's last.
absl::StatusOr<Plan> BuildAllReduceSplit(const TemplateParams& params) {
  const int w = params.world_size;
  const int subs = params.sub_collectives;
  if (subs < 1) {
    return absl::InvalidArgumentError(absl::StrCat("sub_collectives ", subs, " must be >= 1"));
  }
  PlanBuilder b("allreduce.split", CollectiveKind::kAllReduce, w, 2);
  AddAllReduceContract(b, params);
  for (int i = 0; i < subs; ++i) {
    ShardLayout layout(params.shape, params.axis, w, params.chunks_per_shard,
                       PartOf(0, params.shape[params.axis], subs, i),
                       i * w * params.chunks_per_shard);
    RETURN_IF_ERROR(CheckShardExtent(
        layout, params, absl::StrCat("sub-collective ", i, " of sub_collectives ", subs)));
    ScatterPhase rs{.input = "data",
                    .in_place = true,
                    .op = params.op,
                    .channel_base = 0,
                    .step_base = i * (w - 1)};
    ASSIGN_OR_RETURN(ChunkDeps done, AddReduceScatterRing(b, layout, rs));
    GatherPhase ag{.buffer = "data",
                   .channel_base = 1,
                   .step_base = (i + 1) * (w - 1),
                   .ready = &done,
                   .owner_after_compute = false};
    RETURN_IF_ERROR(AddAllGatherRing(b, layout, ag));
  }
  return std::move(b).Finish();
}

// allreduce.direct: the direct ReduceScatter in place (round d on channel d - 1), then every
// owner pushes its reduced chunk (j, k) to each peer j + d on channel W - 1 + d - 1, once the W-1
// reductions into it landed. Each chunk's reduction is one round of independent transfers and its
// gather one more, where the rings chain 2(W-1) dependent hops; every channel is chunk-major, and
// chunk k's pushes take steps after its reductions'. The push into q overwrites q's partial of
// (j, k), which q's own reduction read: the push depends on that reduction having landed.
//
// allreduce.direct_out: the same, plus every rank r copies each chunk (j, k) of its "data" into
// the same region of "out" (LOCAL_COPY) once the chunk is final on r: its own chunks after the
// W-1 reductions into them, a peer's after that peer's push into r. Only r's own copies touch
// r's "out", so no peer ever addresses it and the runtime may bind it to any device memory per
// launch (the caller's output tensor), which saves the copy an op would otherwise run after the
// kernel. The copies of each source have a channel of their own after the gather's, chunk-major:
// r's own chunks on channel 2(W-1), round d's chunks (pushed from r - d) on 2(W-1) + d. A fused
// kernel keeps channel order, so on one channel for all of them (the twenty-first session's
// layout) an own chunk's copy, final once the peers' reductions land, waited behind the previous
// peer chunk's copy, which waits for that peer's push; and round-robin dealing gave comm CTA 0
// the ReduceScatter's and every copy's channel at 2 ranks (bench/RESULTS.md, twenty-second
// session: that layout was 4-7% slower than direct at M=8192). The own copy takes step
// (k+1) * (W-1), after its reductions', and the copy of round d's push the push's step + 1.
// World 1: one copy per chunk with no deps, of data as computed.
absl::StatusOr<Plan> BuildAllReduceDirect(const TemplateParams& params, const ShardLayout& layout,
                                          bool copy_out) {
  const int w = params.world_size;
  const int rounds = std::max(1, w - 1);
  // direct_out: one copy channel for r's own chunks, one per round for the peers' (w - 1).
  PlanBuilder b(copy_out ? "allreduce.direct_out" : "allreduce.direct", CollectiveKind::kAllReduce,
                w, 2 * rounds + (copy_out ? w : 0));
  AddAllReduceContract(b, params, copy_out ? "out" : "");
  ScatterPhase rs{.input = "data", .in_place = true, .op = params.op};
  ASSIGN_OR_RETURN(ChunkDeps done, AddReduceScatterDirect(b, layout, rs));
  GatherPhase ag{.buffer = "data",
                 .channel_base = rounds,
                 .step_base = w - 1,
                 .ready = &done,
                 .owner_after_compute = false};
  ChunkPushes pushes;
  RETURN_IF_ERROR(AddAllGatherDirect(b, layout, ag, &pushes));
  if (!copy_out) return std::move(b).Finish();
  // Round d = 0 is r's own chunk.
  auto copy = [&](int r, int d, int k, std::vector<int> deps, int step) {
    const int owner = (r - d + w) % w;
    const Region region = layout.ChunkRegion(owner, k);
    Transfer t = MakeTransfer(TransferKind::kLocalCopy, r, r, 2 * rounds + d, "data", region, "out",
                              region, layout.GlobalChunk(owner, k), step);
    t.after_compute = deps.empty();
    t.deps = std::move(deps);
    b.Add(std::move(t));
  };
  for (int k = 0; k < layout.chunks(); ++k) {
    const int chunk_step = (w - 1) + k * (w - 1);
    for (int r = 0; r < w; ++r) {
      copy(r, 0, k, done[r][k], chunk_step);
      for (int d = 1; d < w; ++d) copy(r, d, k, {pushes[(r - d + w) % w][k][r]}, chunk_step + d);
    }
  }
  return std::move(b).Finish();
}

}  // namespace

absl::StatusOr<Plan> BuildReduceScatter(std::string_view algo, const TemplateParams& params) {
  RETURN_IF_ERROR(CheckReduceOp(params));
  const int w = params.world_size;
  ShardLayout layout(params.shape, params.axis, w, params.chunks_per_shard,
                     Range{0, params.shape[params.axis]});
  RETURN_IF_ERROR(CheckShardExtent(layout, params, "shape[axis]"));
  if (algo == "two_level") RETURN_IF_ERROR(CheckRanksPerNode(params));

  // "output" is as large as the largest shard; rank j's result is its leading Shard(j) rows.
  Shape out_shape = params.shape;
  out_shape[params.axis] = layout.MaxShardExtent();
  // Channels: two-level one per level, direct one per round (direct_inplace one more for the
  // owners' copies), ring one.
  const int channels = algo == "two_level"        ? 2
                       : algo == "direct"         ? std::max(1, w - 1)
                       : algo == "direct_inplace" ? w
                                                  : 1;
  PlanBuilder b(absl::StrCat("reducescatter.", std::string(algo)), CollectiveKind::kReduceScatter,
                w, channels);
  b.AddBuffer(MakeBuffer("input", params.dtype, params.shape));
  b.AddBuffer(MakeBuffer("output", params.dtype, out_shape));
  for (int r = 0; r < w; ++r) b.AddInitial(r, "input", Region::Whole(params.shape));
  for (int j = 0; j < w; ++j) {
    std::vector<Contribution> sources;
    for (int q = 0; q < w; ++q) sources.push_back({q, "input", layout.ShardRegion(j)});
    b.AddExpectation(
        Expectation{.rank = j,
                    .buffer = "output",
                    .region = Region::Slab(out_shape, params.axis, 0, layout.Shard(j).size()),
                    .op = params.op,
                    .sources = std::move(sources)});
  }
  ScatterPhase phase{.input = "input",
                     .output = "output",
                     .output_shape = out_shape,
                     .in_place = false,
                     .op = params.op,
                     .channel_base = 0,
                     .step_base = 0,
                     .ranks_per_node = params.ranks_per_node};
  RETURN_IF_ERROR(AddScatterPhase(algo, b, layout, phase).status());
  return std::move(b).Finish();
}

absl::StatusOr<Plan> BuildAllReduce(std::string_view algo, const TemplateParams& params) {
  RETURN_IF_ERROR(CheckReduceOp(params));
  if (algo == "split") return BuildAllReduceSplit(params);
  const int w = params.world_size;
  ShardLayout layout(params.shape, params.axis, w, params.chunks_per_shard,
                     Range{0, params.shape[params.axis]});
  RETURN_IF_ERROR(CheckShardExtent(layout, params, "shape[axis]"));
  if (algo == "direct" || algo == "direct_out") {
    return BuildAllReduceDirect(params, layout, /*copy_out=*/algo == "direct_out");
  }
  const bool two_level = algo == "two_level";
  if (two_level) RETURN_IF_ERROR(CheckRanksPerNode(params));

  // RS phase on channels [0, c), AG phase on [c, 2c) with c = 2 for two-level (intra, inter),
  // 1 otherwise; AG steps follow the RS steps.
  const int phase_channels = two_level ? 2 : 1;
  PlanBuilder b(absl::StrCat("allreduce.", std::string(algo)), CollectiveKind::kAllReduce, w,
                2 * phase_channels);
  AddAllReduceContract(b, params);
  ScatterPhase rs{.input = "data",
                  .in_place = true,
                  .op = params.op,
                  .channel_base = 0,
                  .step_base = 0,
                  .ranks_per_node = params.ranks_per_node};
  ASSIGN_OR_RETURN(ChunkDeps done,
                   AddScatterPhase(two_level ? "two_level" : "ring", b, layout, rs));
  GatherPhase ag{.buffer = "data",
                 .channel_base = phase_channels,
                 .step_base = two_level ? 2 : w - 1,
                 .ready = &done,
                 .owner_after_compute = false,
                 .ranks_per_node = params.ranks_per_node};
  if (two_level) {
    RETURN_IF_ERROR(AddAllGatherTwoLevel(b, layout, ag));
  } else {
    RETURN_IF_ERROR(AddAllGatherRing(b, layout, ag));
  }
  return std::move(b).Finish();
}

}  // namespace syncopate::plan::internal
