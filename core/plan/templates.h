// Chunk-plan templates for the standard collectives, for any world size (1..64), shape, dtype,
// axis and chunks-per-shard count, and split(n) to re-chunk any plan.
//
// Buffer conventions (the kernel spec binds its operands to these names):
//   AllGather     "data": the full gathered tensor, in place; rank r starts with shard r.
//   ReduceScatter "input": each rank's full-size contribution (may be used as scratch);
//                 "output": shard-sized, rank r ends with the reduction of shard r.
//   AllReduce     "data": in place; every rank ends with the reduction of all ranks' data.
//                 allreduce.direct_out also "out" (same shape and dtype, no initial data): every
//                 rank ends with the same reduction there too.
//   AllToAll      "send": rank r's blocks for every destination, concatenated along `axis`;
//                 "recv": rank r's blocks from every source, concatenated along `axis`.
// Shards split `shape[axis]` into world_size near-equal contiguous slabs (the first
// shape[axis] % world_size one larger), then each shard into chunks_per_shard chunks (same rule).
// Every chunk must be non-empty: a shard shorter than chunks_per_shard is InvalidArgument.
//
// Conventions every template follows (the overlap compiler and runtimes rely on them):
// - chunk: global index j * chunks_per_shard + k for chunk k of shard j (the chunk a transfer
//   moves, whichever hop). allreduce.split numbers sub-collective i's chunks from
//   i * world_size * chunks_per_shard. AllToAll: (src * world_size + dst) * chunks_per_shard + k.
// - step: ring step (hop number) for rings, round - 1 for direct templates (round d: rank r talks
//   to r + d, so every rank has one partner per round), level for two-level (0: first hop out of
//   the owner, 1: forward / second level). The reductions' rings and direct rounds and the
//   AllGather rings are chunk-major: chunk k's hop or round s takes step k * (W-1) + s (an
//   out-of-place own LOCAL_COPY takes its chunk's first step). AllReduce's AG steps follow its RS
//   steps per chunk (allreduce.direct: chunk k's gather at (k+1) * (W-1) + round - 1, the steps
//   of chunk k+1's reductions). Each channel lists its transfers in step order.
// - signal: numbered 0, 1, ... per destination rank in transfer-id order (unique per rank).
// - deps: only on the executing rank's own transfers or on transfers whose destination it is
//   (a forward depends on the incoming transfer it forwards; an AllReduce AG send depends on the
//   RS reductions that complete its chunk on the owner).
// - channels: 0 = clockwise ring / intra-node / default; allgather.biring: 1 = counter-clockwise
//   (even global chunks go clockwise, odd ones counter-clockwise); two-level: 1 = inter-node (only
//   transfers between nodes, where node = rank / ranks_per_node); reducescatter.direct: round d
//   on channel d - 1 (the own LOCAL_COPY on channel 0; direct_inplace: the owners' copies to
//   "output" on channel W - 1); AllReduce: RS phase on channels [0, c),
//   AG phase on [c, 2c) (c = 2 for two_level, W - 1 for direct, one channel per round, else 1);
//   direct_out: the copies to "out" on channel 2c.
// - after_compute: set exactly on transfers whose source is the executing rank's own data as its
//   computation wrote it, untouched by any incoming transfer. ReduceScatter/AllReduce (always):
//   the first transfers of each rank's contribution — ring step 0, every direct push and
//   out-of-place own LOCAL_COPY, every two-level intra-node push (and the inter-node send when
//   ranks_per_node == 1) — i.e. exactly the RS transfers without deps. Forwards of partial sums
//   and AllReduce's AG sends are not marked (they depend on transfers), nor are direct_out's
//   copies to "out" except at world 1, where they have no deps. AllGather / AllToAll: the
//   owner's sends of its own shard / "send" blocks when `produced_by_compute` is set.
// - Reductions into "input" (RS) and "data" (AR) land on slabs the destination's computation
//   writes; the plan model has no cross-rank compute dependency, so the runtime must not let such
//   a reduction land before the destination has produced that slab.
//
// Per family:
//   AllGather: initial "data" shard r on rank r; postcondition: every rank's shard j == rank j's
//     initial shard j. push/pull: direct, rank-swizzled (round d: r -> r+d / r pulls from r+d).
//     ring: chunk (j, k) hops j -> j+1 -> ... (W-1 hops). two_level: owner pushes to its node
//     (level 0, channel 0) and to the same local index on every other node (level 0, channel 1),
//     which forwards to its node (level 1, channel 0).
//   ReduceScatter: "output" has extent ceil(shape[axis] / W) along axis; rank j's result is
//     output[0, Shard(j).size()) along axis (the rest is unspecified). ring: the partial of shard
//     j starts at j+1 and accumulates (reduce op) into each next rank's "input" shard j, the last
//     hop reduces into rank j's "output"; rank j adds its own shard with a reducing LOCAL_COPY.
//     direct: round d, rank q reduces its shard q+d into that rank's "output"; own part by a
//     reducing LOCAL_COPY. direct_inplace: the same rounds into the owner's "input" shard (its
//     own contribution is already there), then the owner copies each reduced chunk to "output"
//     (channel W-1, after the W-1 reductions into the chunk). two_level: level 0 rank (n,l) reduces
//     its contribution to each shard of local index l' != l into rank (n,l')'s "input"; level 1
//     (channel 1) (n,l') reduces node n's partial into the owner's "output", and the owner reduces
//     its own node partial with a LOCAL_COPY. A reduction into an element with no valid data
//     initializes it.
//   AllReduce: in place on "data"; rs_ag = ring RS (final hop into the owner's "data") + ring AG
//     of each chunk gated on its RS completion; split = sub_collectives slabs along axis
//     (near-equal, same rule), each an rs_ag whose steps are offset by i * (W - 1), so slab
//     i+1's RS shares steps with slab i's AG; direct = direct RS in place (round d's reductions
//     on channel d-1), then each owner pushes its reduced chunk to every peer (round d on channel
//     W-1+d-1), each push gated on the W-1 reductions into that chunk; direct_out = direct, then
//     each rank r copies every chunk of its "data" to the same region of its "out" (LOCAL_COPY,
//     on the channel after the AG's, chunk-major: chunk k's own copy after its reductions, at step
//     (k+1) * (W-1), then the peers' in arrival order, each after the push into r, at the push's
//     step + 1); only r's own copies touch r's "out", so the runtime may bind it per launch to
//     any memory (the caller's output); two_level = two-level RS in place + two-level AG.
//   AllToAll: uniform: shape[axis] divisible by W, block = shape[axis] / W. variable: splits is
//     W x W, non-negative, each row sum <= shape[axis] ("send" capacity; rows past the sum are
//     unused). "recv" extent along axis = max column sum (at least 1); rank d's block from s sits
//     at sum(splits[0..s-1][d]). Round 0 is the own block (LOCAL_COPY), round d pushes s -> s+d.
//     Chunks of blocks shorter than chunks_per_shard are dropped (chunk numbers keep gaps).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/plan.h"

namespace syncopate::plan {

inline constexpr int kMaxTemplateWorldSize = 64;

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
  // AllGather / AllToAll: the rank's own shard ("data" slab r) or "send" buffer is produced by
  // this launch's computation (a producer kernel: GEMM then AllGather, MoE combine), so the
  // transfers that read it get after_compute. ReduceScatter / AllReduce always mark their first
  // transfers (see the conventions at the top).
  bool produced_by_compute = false;
};

// Template names: allgather.push, allgather.pull, allgather.ring, allgather.biring,
// allgather.two_level, reducescatter.ring, reducescatter.direct, reducescatter.two_level,
// reducescatter.direct_inplace, allreduce.rs_ag, allreduce.direct, allreduce.direct_out,
// allreduce.split, allreduce.two_level, alltoall.uniform, alltoall.variable.
std::vector<std::string> TemplateNames();

// Builds the plan named `name`. Impossible parameters (world size out of 1..64, axis out of range,
// shard smaller than chunks_per_shard, ranks_per_node not dividing world_size, ...) give
// InvalidArgument naming the parameter.
absl::StatusOr<Plan> BuildTemplate(std::string_view name, const TemplateParams& params);

// Re-chunks a plan: every transfer becomes n transfers over SplitElements(n) of its regions
// (empty pieces dropped), dependencies and signals remapped so the plan stays valid. Piece i gets
// chunk = chunk * n + i and keeps rank, channel (pieces consecutive where the transfer was), step,
// reduce and after_compute. Piece i of a transfer depends on piece i of a dependency that wrote
// exactly its source region (same rank, buffer and region: element-wise correspondence), else on
// every piece of the dependency. Ids are renumbered densely, signals per destination rank; the
// name gets ".split<n>". n < 1 or a malformed plan (non-dense ids, unknown deps, element-count
// mismatch) is InvalidArgument.
absl::StatusOr<Plan> SplitPlan(const Plan& plan, int n);

}  // namespace syncopate::plan
