// Internal building blocks shared by the collective templates (templates_*.cc): shard/chunk slab
// arithmetic, a plan builder that orders, numbers and signals transfers, and the per-collective
// phase builders that AllReduce composes. Not part of the plan API; only templates_*.cc include it.
// Plain value types and functions; nothing here is shared between threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/plan.h"
#include "core/plan/region.h"
#include "core/plan/templates.h"

namespace syncopate::plan::internal {

// Half-open index range [begin, end) along the collective's axis.
struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// Part i of `parts` near-equal contiguous parts of [begin, begin + extent): the first
// extent % parts parts are one longer. The one partition rule every template uses.
Range PartOf(int64_t begin, int64_t extent, int parts, int i);

// The slab arithmetic of one (sub-)collective: the slab [begin, begin + extent) along `axis` of a
// tensor of `shape` is cut into `world` shards and each shard into `chunks` chunks (PartOf twice).
// Global chunk index of (shard j, chunk k) is chunk_base + j * chunks + k.
class ShardLayout {
 public:
  ShardLayout(Shape shape, int axis, int world, int chunks, Range slab, int chunk_base = 0);

  int world() const { return world_; }
  int chunks() const { return chunks_; }
  int axis() const { return axis_; }
  const Shape& shape() const { return shape_; }

  Range Shard(int j) const;
  Range Chunk(int j, int k) const;
  int64_t MinShardExtent() const { return Shard(world_ - 1).size(); }
  int64_t MaxShardExtent() const { return Shard(0).size(); }
  int GlobalChunk(int j, int k) const { return chunk_base_ + j * chunks_ + k; }

  // Regions in a buffer of this layout's shape.
  Region ShardRegion(int j) const;
  Region ChunkRegion(int j, int k) const;
  // Chunk (j, k) relative to its shard, in a shard-sized buffer of `shard_shape` (RS "output").
  Region ChunkInShard(const Shape& shard_shape, int j, int k) const;

 private:
  Shape shape_;
  int axis_;
  int world_;
  int chunks_;
  Range slab_;
  int chunk_base_;
};

// [shard][chunk] -> transfer handles. Used for "the transfers that complete chunk (j, k) on its
// owner rank j" (RS phase -> AG phase of AllReduce).
using ChunkDeps = std::vector<std::vector<std::vector<int>>>;
ChunkDeps EmptyChunkDeps(const ShardLayout& layout);

// Collects transfers, then lays them out as a Plan. Transfers are ordered by (step, insertion
// order): that order gives the dense ids, each channel's list order and the per-destination signal
// numbers. Every dependency must sort before its dependent (checked), so channel order plus
// dependencies can never form a cycle.
class PlanBuilder {
 public:
  PlanBuilder(std::string name, CollectiveKind kind, int world_size, int num_channels);

  void AddBuffer(BufferSpec buffer) { plan_.buffers.push_back(std::move(buffer)); }
  // Appends the region's boxes to the rank's initial region of `buffer`.
  void AddInitial(int rank, const std::string& buffer, const Region& region);
  void AddExpectation(Expectation expectation);

  // Adds a transfer; `id`, `signal` are assigned by Finish. Returns a handle for deps (the handle
  // is the insertion index; deps of `t` hold handles). Transfers with empty regions are kept.
  int Add(Transfer t);

  absl::StatusOr<Plan> Finish() &&;

 private:
  Plan plan_;
  int num_channels_;
  std::vector<Transfer> transfers_;
};

// Common fields of one transfer; the phase builders fill these and call PlanBuilder::Add.
Transfer MakeTransfer(TransferKind kind, int rank, int peer, int channel,
                      const std::string& src_buf, Region src, const std::string& dst_buf,
                      Region dst, int chunk, int step);

// Where an AllGather phase runs and what gates the owner's first sends.
struct GatherPhase {
  std::string buffer = "data";
  int channel_base = 0;
  int step_base = 0;
  // Owner-side readiness of each chunk (e.g. the RS transfers that complete it); empty = ready.
  const ChunkDeps* ready = nullptr;
  // Sets after_compute on the transfers that read the owner's own shard.
  bool owner_after_compute = false;
  int ranks_per_node = 0;  // two-level only
};
absl::Status AddAllGatherPush(PlanBuilder& b, const ShardLayout& l, const GatherPhase& p);
// [owner][chunk][dest] -> the handle of the push of chunk (owner, chunk) into dest (-1 where
// dest == owner): what a transfer that reads the gathered chunk on dest waits for.
using ChunkPushes = std::vector<std::vector<std::vector<int>>>;
// Round d (every owner j pushes to j + d) on channel channel_base + d - 1, chunk-major: chunk k's
// round d at step step_base + k * (W-1) + d - 1 (allreduce.direct's gather). `pushes`, if given,
// is filled with the push handles.
absl::Status AddAllGatherDirect(PlanBuilder& b, const ShardLayout& l, const GatherPhase& p,
                                ChunkPushes* pushes = nullptr);
absl::Status AddAllGatherPull(PlanBuilder& b, const ShardLayout& l, const GatherPhase& p);
absl::Status AddAllGatherRing(PlanBuilder& b, const ShardLayout& l, const GatherPhase& p);
absl::Status AddAllGatherBiring(PlanBuilder& b, const ShardLayout& l, const GatherPhase& p);
absl::Status AddAllGatherTwoLevel(PlanBuilder& b, const ShardLayout& l, const GatherPhase& p);

// Where a ReduceScatter phase runs. `in_place`: the result of shard j lands in `input`'s shard j
// on rank j (AllReduce), which already holds rank j's own contribution; otherwise it lands in
// `output` (shard-sized, `output_shape`), and rank j adds its own contribution with a LOCAL_COPY.
struct ScatterPhase {
  std::string input = "input";
  std::string output = "output";
  Shape output_shape;
  bool in_place = false;
  ReduceOp op = ReduceOp::kSum;
  int channel_base = 0;
  int step_base = 0;
  int ranks_per_node = 0;  // two-level only
};
// Each returns, per chunk, the transfers into the owner that complete that chunk's reduction.
absl::StatusOr<ChunkDeps> AddReduceScatterRing(PlanBuilder& b, const ShardLayout& l,
                                               const ScatterPhase& p);
absl::StatusOr<ChunkDeps> AddReduceScatterDirect(PlanBuilder& b, const ShardLayout& l,
                                                 const ScatterPhase& p);
// Out of place only (the owners' copies from "input" to "output" complete each chunk).
absl::StatusOr<ChunkDeps> AddReduceScatterDirectInPlace(PlanBuilder& b, const ShardLayout& l,
                                                        const ScatterPhase& p);
absl::StatusOr<ChunkDeps> AddReduceScatterTwoLevel(PlanBuilder& b, const ShardLayout& l,
                                                   const ScatterPhase& p);

// The rank grid of a two-level template: `ranks_per_node` consecutive ranks per node; transfers
// within a node on channel `channel_base`, between nodes on the next one.
struct TwoLevelGrid {
  TwoLevelGrid(int world, int ranks_per_node, int channel_base)
      : rpn(ranks_per_node),
        nodes(world / ranks_per_node),
        intra(channel_base),
        inter(channel_base + 1) {}
  int at(int node, int local) const { return node * rpn + local; }
  int rpn, nodes, intra, inter;
};

// Parameter checks shared by the template families; errors name the parameter.
absl::Status CheckCommonParams(const TemplateParams& params);
absl::Status CheckShardExtent(const ShardLayout& layout, const TemplateParams& params,
                              std::string_view what);
absl::Status CheckRanksPerNode(const TemplateParams& params);
absl::Status CheckReduceOp(const TemplateParams& params);

// Family entry points (name without the family prefix, e.g. "ring").
absl::StatusOr<Plan> BuildAllGather(std::string_view algo, const TemplateParams& params);
absl::StatusOr<Plan> BuildReduceScatter(std::string_view algo, const TemplateParams& params);
absl::StatusOr<Plan> BuildAllReduce(std::string_view algo, const TemplateParams& params);
absl::StatusOr<Plan> BuildAllToAll(std::string_view algo, const TemplateParams& params);

}  // namespace syncopate::plan::internal
