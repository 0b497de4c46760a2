// Lowering: wait sets, producer counts, tile waves and transfer programs for every rank.
// Pure functions; thread-compatible.
#include "jit/compiler/lowering.h"

#include <algorithm>
#include <climits>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "jit/compiler/byte_extents.h"
#include "jit/compiler/plain_reductions.h"
#include "syncopate/launch_abi.h"

namespace syncopate::jit {
namespace {

// Estimated arrival step of every transfer: a lower bound on when it can complete, counting one
// step per transfer along the longest chain of explicit deps and channel predecessors (a channel
// runs its transfers in list order).
absl::StatusOr<std::vector<int>> ArrivalDepths(const plan::Plan& plan,
                                               const std::vector<const plan::Transfer*>& by_id) {
  const int n = static_cast<int>(by_id.size());
  std::vector<int> prev(n, -1);
  for (const plan::RankPlan& rp : plan.ranks) {
    for (const auto& channel : rp.channels) {
      for (size_t i = 1; i < channel.size(); ++i) prev[channel[i].id] = channel[i - 1].id;
    }
  }
  std::vector<int> depth(n, 0);  // 0: not computed yet
  std::vector<char> on_stack(n, 0);
  for (int root = 0; root < n; ++root) {
    if (depth[root] != 0) continue;
    // Iterative DFS: (node, next predecessor index to visit).
    std::vector<std::pair<int, size_t>> stack = {{root, 0}};
    on_stack[root] = 1;
    while (!stack.empty()) {
      auto& [id, next] = stack.back();
      const plan::Transfer& t = *by_id[id];
      const size_t preds = t.deps.size() + (prev[id] >= 0 ? 1 : 0);
      if (next < preds) {
        const int p = next < t.deps.size() ? t.deps[next] : prev[id];
        ++next;
        if (p < 0 || p >= n) {
          return absl::InvalidArgumentError(
              absl::StrCat("transfer ", id, " depends on unknown transfer ", p));
        }
        if (on_stack[p]) {
          return absl::InvalidArgumentError(absl::StrCat(
              "transfer ", id, " (rank ", t.rank, ") is on a dependency cycle through transfer ", p));
        }
        if (depth[p] == 0) {
          on_stack[p] = 1;
          stack.push_back({p, 0});
        }
        continue;
      }
      int d = 0;
      for (int dep : t.deps) d = std::max(d, depth[dep]);
      if (prev[id] >= 0) d = std::max(d, depth[prev[id]]);
      depth[id] = d + 1;
      on_stack[id] = 0;
      stack.pop_back();
    }
  }
  return depth;
}

absl::StatusOr<std::vector<OperandSlot>> BuildSlots(const plan::Plan& plan,
                                                    const KernelSpec& spec) {
  std::vector<OperandSlot> slots = SpecOperandSlots(spec);
  // Plan buffers transfers touch but no operand binds, in plan buffer order; and whether a
  // transfer other than a local copy touches each (then a peer addresses it).
  std::vector<char> used(plan.buffers.size(), 0), peers_touch(plan.buffers.size(), 0);
  for (const plan::RankPlan& rp : plan.ranks) {
    for (const auto& channel : rp.channels) {
      for (const plan::Transfer& t : channel) {
        for (size_t b = 0; b < plan.buffers.size(); ++b) {
          if (plan.buffers[b].name != t.src_buffer && plan.buffers[b].name != t.dst_buffer)
            continue;
          used[b] = 1;
          if (t.kind != plan::TransferKind::kLocalCopy || t.peer != t.rank) peers_touch[b] = 1;
        }
      }
    }
  }
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const plan::BufferSpec& buf = plan.buffers[b];
    if (!used[b] || SlotOfBuffer(slots, buf.name) >= 0) continue;
    OperandSlot s;
    s.slot = static_cast<int>(slots.size());
    s.name = buf.name;
    s.buffer = buf.name;
    s.dtype = buf.dtype;
    s.role = OperandRole::kLocal;
    s.kernel_param = false;
    s.rank_private = !peers_touch[b];
    s.shape = buf.shape;
    s.bytes = plan::DTypeSize(buf.dtype) * buf.NumElements();
    slots.push_back(std::move(s));
  }
  if (slots.size() > static_cast<size_t>(kMaxOperands)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel spec \"", spec.name, "\" with plan \"", plan.name, "\" needs ", slots.size(),
        " operand slots (spec operands plus plan buffers no operand binds); the launch ABI "
        "carries at most ",
        kMaxOperands));
  }
  return slots;
}

// "transfer 5 (push, rank 0 on node 0 -> rank 2 on node 1)".
std::string Route(const plan::Transfer& t, const std::vector<int>& nodes) {
  return absl::StrCat("transfer ", t.id, " (", plan::TransferKindName(t.kind), ", rank ",
                      t.src_rank(), " on node ", nodes[t.src_rank()], " -> rank ", t.dst_rank(),
                      " on node ", nodes[t.dst_rank()], ")");
}

absl::Status NotProxyable(const plan::Plan& plan, const plan::Transfer& t,
                          const std::vector<int>& nodes, const std::string& why) {
  return absl::UnimplementedError(absl::StrCat(
      "plan \"", plan.name, "\": inter-node ", Route(t, nodes), " ", why,
      "; fused kernels carry inter-node chunks through the host proxy, which supports plain PUSH "
      "copies only"));
}

// What the host proxy can carry: plain PUSH copies whose deps it can observe, i.e. deps landing
// on its own node (the node's signal words) or other inter-node transfers (it sees them over
// UCX). Landing guards are checked once they are known (pass 1).
absl::Status CheckProxied(const plan::Plan& plan, const std::vector<const plan::Transfer*>& by_id,
                          const std::vector<int>& nodes, const plan::Transfer& t) {
  if (t.kind != plan::TransferKind::kPush) {
    return NotProxyable(plan, t, nodes,
                        absl::StrCat("is a ", plan::TransferKindName(t.kind), ", not a push"));
  }
  if (t.reduce != plan::ReduceOp::kNone) {
    return NotProxyable(plan, t, nodes,
                        absl::StrCat("reduces (", plan::ReduceOpName(t.reduce), ")"));
  }
  for (int d : t.deps) {
    const plan::Transfer& dep = *by_id[d];
    const bool dep_inter = nodes[dep.src_rank()] != nodes[dep.dst_rank()];
    if (dep_inter || nodes[dep.dst_rank()] == nodes[t.rank]) continue;
    return absl::UnimplementedError(absl::StrCat(
        "plan \"", plan.name, "\": inter-node ", Route(t, nodes), " depends on ", Route(dep, nodes),
        ", whose signal lands on node ", nodes[dep.dst_rank()], "; the host proxy on node ",
        nodes[t.rank], " can only observe signals of its own node and inter-node chunks"));
  }
  return absl::OkStatus();
}

struct OperandFootprints {
  const OperandSpec* op;
  std::vector<plan::Region> tiles;  // by canonical tile id
};

// What the per-rank passes read, fixed before the first rank is scheduled.
struct TileFacts {
  int num_tiles = 0;
  std::vector<int> depth;    // by transfer id: estimated arrival step (ArrivalDepths)
  std::vector<int> swizzle;  // the kernel's own tile order
  std::vector<OperandFootprints> consumed, produced;
  bool push_tiles = false;  // KernelSpec::push_tiles
  std::vector<char> depended_on;  // by transfer id: some transfer lists it in its deps
};

// The plan's transfers by id, once the ids are dense, every transfer sets a signal and names
// ranks inside the world: the tables index by all three.
absl::StatusOr<std::vector<const plan::Transfer*>> CheckedTransfers(const plan::Plan& plan) {
  if (plan.world_size < 1 || plan.world_size > kMaxRanks ||
      static_cast<int>(plan.ranks.size()) != plan.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("plan \"", plan.name, "\": world size ",
                                                   plan.world_size, " with ", plan.ranks.size(),
                                                   " rank plans (need 1..", kMaxRanks, ", equal)"));
  }
  std::vector<const plan::Transfer*> by_id = plan.TransfersById();
  for (size_t id = 0; id < by_id.size(); ++id) {
    const plan::Transfer* t = by_id[id];
    if (t == nullptr || t->id != static_cast<int>(id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan \"", plan.name, "\": transfer ids are not dense (missing ", id, ")"));
    }
    if (t->signal < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan \"", plan.name, "\": transfer ", id, " sets no signal"));
    }
    if (t->rank < 0 || t->rank >= plan.world_size || t->peer < 0 || t->peer >= plan.world_size) {
      return absl::InvalidArgumentError(absl::StrCat("plan \"", plan.name, "\": transfer ", id,
                                                     " names a rank outside 0..",
                                                     plan.world_size - 1));
    }
  }
  return by_id;
}

// Arrival depths, footprints of the consumed and produced operands per tile, and the swizzle.
absl::StatusOr<TileFacts> BuildTileFacts(const plan::Plan& plan,
                                         const std::vector<const plan::Transfer*>& by_id,
                                         const KernelSpec& spec, const LoweredSchedule& out) {
  TileFacts facts;
  facts.num_tiles = out.num_tiles;
  facts.push_tiles = spec.push_tiles;
  ASSIGN_OR_RETURN(facts.depth, ArrivalDepths(plan, by_id));  // also checks every dep's id
  facts.depended_on.assign(by_id.size(), 0);
  for (const plan::Transfer* t : by_id) {
    for (int d : t->deps) facts.depended_on[d] = 1;
  }
  for (const OperandSpec* op : spec.Operands()) {
    if (op->role == OperandRole::kLocal) continue;
    OperandFootprints f{op, {}};
    f.tiles.resize(out.num_tiles);
    for (int m = 0; m < out.tiles_m; ++m) {
      for (int n = 0; n < out.tiles_n; ++n) f.tiles[m * out.tiles_n + n] = op->Footprint(m, n);
    }
    (op->role == OperandRole::kConsumed ? facts.consumed : facts.produced).push_back(std::move(f));
  }
  facts.swizzle.resize(out.num_tiles);
  for (int i = 0; i < out.num_tiles; ++i) {
    facts.swizzle[i] = static_cast<int>(SwizzledTile(i, out.tiles_m, out.tiles_n, spec.group_m));
  }
  return facts;
}

// Transfer records and copy descriptors of every transfer, by id; inter-node transfers checked
// against what the host proxy can carry; plan_signals (guards take the words after it).
absl::Status LowerTransfers(const plan::Plan& plan, const std::vector<const plan::Transfer*>& by_id,
                            const std::vector<int>& nodes, LoweredSchedule& out) {
  out.segments.resize(by_id.size());
  for (size_t id = 0; id < by_id.size(); ++id) {
    const plan::Transfer& t = *by_id[id];
    out.transfers.push_back(LoweredTransfer{
        t.id, t.rank, t.src_rank(), t.dst_rank(), t.signal, t.src_buffer, t.dst_buffer, t.reduce,
        plan.FindBuffer(t.src_buffer) != nullptr ? plan.FindBuffer(t.src_buffer)->dtype
                                                 : plan::DType::kF32,
        nodes[t.src_rank()] != nodes[t.dst_rank()]});
    ASSIGN_OR_RETURN(out.segments[id], BuildCopyDescriptors(plan, *by_id[id]));
    if (out.transfers[id].inter_node) RETURN_IF_ERROR(CheckProxied(plan, by_id, nodes, t));
  }
  for (const plan::Transfer* t : by_id) {
    out.plan_signals = std::max(out.plan_signals, t->signal + 1);
  }
  return absl::OkStatus();
}

// Wait sets of rank r's tiles (ascending signal) and each tile's wave: the latest estimated
// arrival among the chunks it reads.
void AddTileWaits(int r, const std::vector<const plan::Transfer*>& by_id, const TileFacts& facts,
                  RankSchedule& rs) {
  for (const plan::Transfer* t : by_id) {
    if (t->dst_rank() != r) continue;
    rs.num_signals = std::max(rs.num_signals, t->signal + 1);
    for (int tile = 0; tile < facts.num_tiles; ++tile) {
      for (const OperandFootprints& f : facts.consumed) {
        if (f.op->buffer != t->dst_buffer || !f.tiles[tile].Intersects(t->dst_region)) continue;
        rs.waits[tile].push_back(TileWait{t->signal, t->id, t->src_rank()});
        rs.tile_wave[tile] = std::max(rs.tile_wave[tile], facts.depth[t->id]);
        break;  // several operands on one buffer: one wait suffices
      }
    }
  }
  for (auto& w : rs.waits) {
    std::sort(w.begin(), w.end(), [](const TileWait& a, const TileWait& b) {
      return a.signal != b.signal ? a.signal < b.signal : a.transfer < b.transfer;
    });
  }
}

// Tiles writing `region` of `buffer` through a produced operand, ascending.
std::vector<int> ProducerTiles(const TileFacts& facts, const std::string& buffer,
                               const plan::Region& region) {
  std::vector<int> tiles;
  for (int tile = 0; tile < facts.num_tiles; ++tile) {
    for (const OperandFootprints& f : facts.produced) {
      if (f.op->buffer == buffer && f.tiles[tile].Intersects(region)) {
        tiles.push_back(tile);
        break;
      }
    }
  }
  return tiles;
}

// Landing guards: incoming reductions (or any writes) onto data rank r computes, each with its
// own signal word after the plan's; recorded in guard_of_transfer for the transfer's executor.
void AddLandingGuards(int r, const std::vector<const plan::Transfer*>& by_id,
                      const TileFacts& facts, int plan_signals, RankSchedule& rs,
                      std::map<int, GuardRef>& guard_of_transfer) {
  for (const plan::Transfer* t : by_id) {
    if (t->dst_rank() != r) continue;
    std::vector<int> tiles = ProducerTiles(facts, t->dst_buffer, t->dst_region);
    if (tiles.empty()) continue;
    LandingGuard g;
    g.transfer = t->id;
    g.signal = plan_signals + static_cast<int>(rs.guards.size());
    g.producers = static_cast<int>(tiles.size());
    g.producer_tiles = std::move(tiles);
    guard_of_transfer[t->id] = GuardRef{r, g.signal};
    rs.guards.push_back(std::move(g));
  }
}

// Each producer tile's box of transfer `t`'s source region and its copy segments, when the
// chunk can move in tile parts (lowering.h); else an empty vector. The parts must be disjoint and
// cover the region: a reduction moved twice would add twice, one left out would never move.
absl::StatusOr<std::vector<std::vector<CopySegment>>> TilePartSegments(
    const plan::Plan& plan, const plan::Transfer& t, const TileFacts& facts,
    const std::vector<int>& producer_tiles) {
  constexpr size_t kMaxParts = 4096;  // the disjointness check is quadratic
  std::vector<std::vector<CopySegment>> none;
  const OperandFootprints* producer = nullptr;
  for (const OperandFootprints& f : facts.produced) {
    if (f.op->buffer != t.src_buffer) continue;
    if (producer != nullptr) return none;  // two operands write the buffer
    producer = &f;
  }
  const plan::BufferSpec* src = plan.FindBuffer(t.src_buffer);
  const plan::BufferSpec* dst = plan.FindBuffer(t.dst_buffer);
  if (producer == nullptr || src == nullptr || dst == nullptr || t.src_region.boxes().size() != 1 ||
      t.dst_region.boxes().size() != 1 || producer_tiles.size() > kMaxParts) {
    return none;
  }
  const plan::Box& from = t.src_region.boxes()[0];
  const plan::Box& to = t.dst_region.boxes()[0];
  if (from.Extents() != to.Extents()) return none;
  std::vector<plan::Box> parts;
  int64_t covered = 0;
  for (int tile : producer_tiles) {
    const plan::Region part = producer->tiles[tile].Intersect(t.src_region);
    if (part.boxes().size() != 1) return none;
    parts.push_back(part.boxes()[0]);
    covered += parts.back().NumElements();
  }
  if (covered != t.src_region.NumElements()) return none;
  for (size_t i = 0; i < parts.size(); ++i) {
    for (size_t j = i + 1; j < parts.size(); ++j) {
      if (plan::Region({parts[i]}).Intersects(plan::Region({parts[j]}))) return none;
    }
  }
  std::vector<std::vector<CopySegment>> segments;
  for (const plan::Box& part : parts) {
    plan::Box landing = part;  // the same elements of the destination box
    for (int axis = 0; axis < part.rank(); ++axis) {
      landing.lo[axis] += to.lo[axis] - from.lo[axis];
      landing.hi[axis] += to.lo[axis] - from.lo[axis];
    }
    ASSIGN_OR_RETURN(
        std::vector<CopySegment> s,
        BuildCopyDescriptors(*src, plan::Region({part}), *dst, plan::Region({landing})));
    segments.push_back(std::move(s));
  }
  return segments;
}

// Whether moving transfer `t` in tile parts keeps every order the plan relies on. Its parts
// leave at their tiles' times and its signal only once a group's next tile (or the kernel's end)
// counts the last part, so: no tile of the rank may wait for anything (a tile waiting, however
// indirectly, on that signal would hold the last count forever), no transfer may depend on it,
// and no other transfer of its channel may touch its bytes (channel order is part of a plan's
// semantics, channel_order.h; reductions with the same op commute).
bool TilePartsKeepOrder(const plan::Plan& plan, const plan::Transfer& t, const TileFacts& facts,
                        const LoweredSchedule& out, const RankSchedule& rs) {
  for (const auto& w : rs.waits) {
    if (!w.empty()) return false;
  }
  if (facts.depended_on[t.id]) return false;
  const ByteExtent t_src = SideExtent(out, t.id, true), t_dst = SideExtent(out, t.id, false);
  for (const auto& channel : plan.ranks[t.rank].channels) {
    const bool mine = std::any_of(channel.begin(), channel.end(),
                                  [&](const plan::Transfer& u) { return u.id == t.id; });
    if (!mine) continue;
    for (const plan::Transfer& u : channel) {
      if (u.id == t.id) continue;
      const ByteExtent u_src = SideExtent(out, u.id, true), u_dst = SideExtent(out, u.id, false);
      const bool commute = t.reduce != plan::ReduceOp::kNone && t.reduce == u.reduce;
      if (Overlap(t_dst, u_src) || Overlap(t_src, u_dst) || (Overlap(t_dst, u_dst) && !commute)) {
        return false;
      }
    }
  }
  return true;
}

// Outgoing chunks of rank r in transfer-id order, with their producer tiles; small unguarded
// ones without deps are tentatively direct, and with push_tiles those that split into tile parts
// are tentatively moved so instead (guards of every rank are known only after pass 1).
absl::Status AddOutgoingChunks(const plan::Plan& plan, int r,
                               const std::vector<const plan::Transfer*>& by_id,
                               const TileFacts& facts, const LoweredSchedule& out,
                               RankSchedule& rs) {
  for (const plan::Transfer* t : by_id) {
    if (!t->after_compute || t->src_rank() != r) continue;
    OutgoingChunk c;
    c.transfer = t->id;
    c.producer_tiles = ProducerTiles(facts, t->src_buffer, t->src_region);
    c.producers = static_cast<int>(c.producer_tiles.size());
    if (c.producers > 0 && t->kind == plan::TransferKind::kPull) {
      return absl::UnimplementedError(
          absl::StrCat("plan \"", plan.name, "\": transfer ", t->id,
                       " pulls computed data (after_compute) "
                       "from rank ",
                       r,
                       "; fused kernels publish computed chunks on the producing rank only, "
                       "so use a PUSH for it"));
    }
    // Guards are decided for every destination rank only after pass 1; `direct` is finalised
    // in pass 2.
    const LoweredTransfer& lt = out.transfers[t->id];
    const int64_t bytes = t->src_region.NumElements() * plan::DTypeSize(lt.dtype);
    const bool movable = c.producers > 0 && t->deps.empty() && t->rank == r && !lt.inter_node;
    if (movable && facts.push_tiles && TilePartsKeepOrder(plan, *t, facts, out, rs)) {
      ASSIGN_OR_RETURN(c.part_segments, TilePartSegments(plan, *t, facts, c.producer_tiles));
      c.tile_parts = !c.part_segments.empty();
    }
    c.direct = movable && !c.tile_parts && bytes <= kMaxDirectMoveBytes;
    rs.outgoing.push_back(std::move(c));
  }
  return absl::OkStatus();
}

// The local chunk indices each tile counts into (outgoing chunks, then guards) and the rank's
// signal word count once guards take words after the plan's.
void IndexTileChunks(int plan_signals, RankSchedule& rs) {
  for (size_t c = 0; c < rs.outgoing.size(); ++c) {
    for (int tile : rs.outgoing[c].producer_tiles) {
      rs.tile_outgoing[tile].push_back(static_cast<int>(c));
    }
  }
  for (size_t g = 0; g < rs.guards.size(); ++g) {
    for (int tile : rs.guards[g].producer_tiles) {
      rs.tile_outgoing[tile].push_back(static_cast<int>(rs.outgoing.size() + g));
    }
  }
  rs.num_signals =
      rs.guards.empty() ? rs.num_signals : plan_signals + static_cast<int>(rs.guards.size());
}

// Tile order: waves by estimated arrival; inside a wave, tiles whose outgoing chunks (or
// landing guards) are needed earliest first; then the kernel's own swizzle.
void OrderTiles(const TileFacts& facts, RankSchedule& rs) {
  std::vector<int> send_priority(facts.num_tiles, INT_MAX);
  for (const OutgoingChunk& c : rs.outgoing) {
    for (int tile : c.producer_tiles) {
      send_priority[tile] = std::min(send_priority[tile], facts.depth[c.transfer]);
    }
  }
  // A guard holds back a peer's reduction into this rank: as urgent as that transfer.
  for (const LandingGuard& g : rs.guards) {
    for (int tile : g.producer_tiles) {
      send_priority[tile] = std::min(send_priority[tile], facts.depth[g.transfer]);
    }
  }
  rs.tile_order = facts.swizzle;
  std::stable_sort(rs.tile_order.begin(), rs.tile_order.end(), [&](int a, int b) {
    if (rs.tile_wave[a] != rs.tile_wave[b]) return rs.tile_wave[a] < rs.tile_wave[b];
    return send_priority[a] < send_priority[b];
  });
}

// Pass 1 for rank r: wait sets, landing guards, outgoing chunks, tile order.
absl::StatusOr<RankSchedule> ScheduleRankTiles(const plan::Plan& plan, int r,
                                               const std::vector<const plan::Transfer*>& by_id,
                                               const TileFacts& facts, const LoweredSchedule& out,
                                               std::map<int, GuardRef>& guard_of_transfer) {
  RankSchedule rs;
  rs.rank = r;
  rs.waits.resize(facts.num_tiles);
  rs.tile_outgoing.resize(facts.num_tiles);
  rs.tile_wave.assign(facts.num_tiles, 0);
  AddTileWaits(r, by_id, facts, rs);
  AddLandingGuards(r, by_id, facts, out.plan_signals, rs, guard_of_transfer);
  RETURN_IF_ERROR(AddOutgoingChunks(plan, r, by_id, facts, out, rs));
  IndexTileChunks(out.plan_signals, rs);
  OrderTiles(facts, rs);
  return rs;
}

// The destination's guard word is on another node than the proxy moving the chunk.
absl::Status CheckGuardsOnNode(const plan::Plan& plan,
                               const std::vector<const plan::Transfer*>& by_id,
                               const std::vector<int>& nodes, const LoweredSchedule& out,
                               const std::map<int, GuardRef>& guard_of_transfer) {
  for (const auto& [id, guard] : guard_of_transfer) {
    if (out.transfers[id].inter_node) {
      return NotProxyable(plan, *by_id[id], nodes,
                          absl::StrCat("lands on data rank ", guard.rank,
                                       " computes (it would need a landing guard)"));
    }
  }
  return absl::OkStatus();
}

// Steps wait on signal words through the node's mappings; another node's are not mapped.
absl::Status CheckStepDepsOnNode(const plan::Plan& plan,
                                 const std::vector<const plan::Transfer*>& by_id,
                                 const std::vector<int>& nodes, int r, size_t ch,
                                 const plan::Transfer& t) {
  for (int d : t.deps) {
    const plan::Transfer& dep = *by_id[d];
    if (nodes[dep.dst_rank()] == nodes[r]) continue;
    return absl::UnimplementedError(absl::StrCat(
        "plan \"", plan.name, "\": transfer ", t.id, " (rank ", r, " on node ", nodes[r],
        ", channel ", ch, ") depends on ", Route(dep, nodes), ", whose signal lands on node ",
        nodes[dep.dst_rank()], "; a fused kernel cannot observe a signal set on another node"));
  }
  return absl::OkStatus();
}

// Pass 2 for one rank: guarded chunks are neither direct nor in tile parts; the transfer program
// is everything the rank executes, minus direct and tile-part chunks and the proxy's, per
// channel in plan order. Returns the
// number of channels with at least one step.
absl::StatusOr<int> BuildTransferProgram(const plan::Plan& plan,
                                         const std::vector<const plan::Transfer*>& by_id,
                                         const std::vector<int>& nodes,
                                         const std::vector<LoweredTransfer>& transfers,
                                         const std::map<int, GuardRef>& guard_of_transfer,
                                         RankSchedule& rs) {
  const int r = rs.rank;
  std::map<int, int> chunk_of_transfer;
  for (size_t c = 0; c < rs.outgoing.size(); ++c) {
    OutgoingChunk& chunk = rs.outgoing[c];
    if (guard_of_transfer.count(chunk.transfer) != 0) {
      chunk.direct = false;
      chunk.tile_parts = false;
      chunk.part_segments.clear();
    }
    chunk_of_transfer[chunk.transfer] = static_cast<int>(c);
  }
  const plan::RankPlan& rp = plan.ranks[r];
  rs.program.resize(rp.channels.size());
  int live_channels = 0;
  for (size_t ch = 0; ch < rp.channels.size(); ++ch) {
    for (const plan::Transfer& t : rp.channels[ch]) {
      if (transfers[t.id].inter_node) {
        rs.proxied.push_back(t.id);
        continue;
      }
      RETURN_IF_ERROR(CheckStepDepsOnNode(plan, by_id, nodes, r, ch, t));
      auto it = chunk_of_transfer.find(t.id);
      const OutgoingChunk* chunk =
          it == chunk_of_transfer.end() ? nullptr : &rs.outgoing[it->second];
      if (chunk != nullptr && (chunk->direct || chunk->tile_parts)) continue;
      ProgramStep step;
      step.transfer = t.id;
      step.deps = t.deps;
      if (auto g = guard_of_transfer.find(t.id); g != guard_of_transfer.end()) {
        step.guards.push_back(g->second);
      }
      if (chunk != nullptr && chunk->producers > 0) step.ready_chunk = it->second;
      rs.program[ch].push_back(std::move(step));
    }
    if (!rs.program[ch].empty()) ++live_channels;
  }
  return live_channels;
}

// Slots that receive reductions but no kernel operand produces: identity-filled by the runtime.
void MarkIdentityFills(const std::vector<const plan::Transfer*>& by_id,
                       std::vector<OperandSlot>& slots) {
  for (const plan::Transfer* t : by_id) {
    if (t->reduce == plan::ReduceOp::kNone) continue;
    const int slot = SlotOfBuffer(slots, t->dst_buffer);
    if (slot >= 0 && slots[slot].role != OperandRole::kProduced) {
      slots[slot].needs_identity_fill = true;
    }
  }
}

}  // namespace

int64_t SwizzledTile(int64_t i, int64_t tiles_m, int64_t tiles_n, int64_t group_m) {
  if (group_m <= 1) return i;
  const int64_t per_group = group_m * tiles_n;
  const int64_t group = i / per_group;
  const int64_t first_m = group * group_m;
  const int64_t rows = std::min(tiles_m - first_m, group_m);
  const int64_t in_group = i - group * per_group;
  const int64_t m = first_m + in_group % rows;
  const int64_t n = in_group / rows;
  return m * tiles_n + n;
}

int SlotOfBuffer(const std::vector<OperandSlot>& slots, std::string_view buffer) {
  for (const OperandSlot& s : slots) {
    if (!s.buffer.empty() && s.buffer == buffer) return s.slot;
  }
  return -1;
}

bool IsPerLaunchOperand(const OperandSlot& slot) {
  return (slot.role == OperandRole::kLocal && slot.kernel_param && slot.buffer.empty()) ||
         slot.rank_private;
}

bool IsCopyProgramOperand(const OperandSlot& slot) { return !slot.buffer.empty(); }

absl::Status CheckPerLaunchOperands(const std::vector<OperandSlot>& slots, bool copy_program,
                                    absl::Span<void* const> pointers) {
  for (int i = 0; i < static_cast<int>(pointers.size()); ++i) {
    if (pointers[i] == nullptr) continue;
    const auto slot =
        std::find_if(slots.begin(), slots.end(), [i](const OperandSlot& s) { return s.slot == i; });
    if (slot == slots.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("local_operands[", i, "]: the kernel has no operand in this slot"));
    }
    if (!IsPerLaunchOperand(*slot)) {
      return absl::InvalidArgumentError(absl::StrCat("local_operands[", i, "]: operand '",
                                                     slot->name,
                                                     "' is not local to this rank (see "
                                                     "LocalOperandSlot)"));
    }
    if (copy_program && IsCopyProgramOperand(*slot)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "local_operands[", i, "]: plan buffer \"", slot->buffer,
          "\" is moved by the copy engine's copy program at its bound address; a per-launch "
          "pointer there needs the SM backend"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> PerLaunchOperandSlot(const std::vector<OperandSlot>& slots,
                                         std::string_view name) {
  for (const OperandSlot& slot : slots) {
    if (slot.name != name) continue;
    if (!IsPerLaunchOperand(slot)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "operand '", slot.name, "' (", OperandRoleName(slot.role),
          slot.buffer.empty() ? "" : absl::StrCat(", plan buffer \"", slot.buffer, "\""),
          slot.kernel_param ? "" : ", not a kernel parameter, and a peer addresses it",
          ") is not local to this rank: its pointer is fixed by the binding"));
    }
    return slot.slot;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("kernel has no operand '", absl::string_view(name.data(), name.size()), "'"));
}

absl::StatusOr<LoweredSchedule> Lower(const plan::Plan& plan, const KernelSpec& spec,
                                      const std::vector<int>& node_map) {
  RETURN_IF_ERROR(CheckSpecAgainstPlan(spec, plan));
  ASSIGN_OR_RETURN(const std::vector<const plan::Transfer*> by_id, CheckedTransfers(plan));
  absl::StatusOr<std::vector<int>> resolved = plan::ResolveNodeMap(plan.world_size, node_map);
  if (!resolved.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan \"", plan.name, "\": ", resolved.status().message()));
  }
  const std::vector<int> nodes = *std::move(resolved);

  LoweredSchedule out;
  out.plan_name = plan.name;
  out.plan_hash = plan::PlanHash(plan);
  out.world_size = plan.world_size;
  out.nodes = nodes;
  out.tiles_m = static_cast<int>(spec.tiles_m());
  out.tiles_n = static_cast<int>(spec.tiles_n());
  out.num_tiles = static_cast<int>(spec.num_tiles());
  ASSIGN_OR_RETURN(out.slots, BuildSlots(plan, spec));
  ASSIGN_OR_RETURN(const TileFacts facts, BuildTileFacts(plan, by_id, spec, out));
  RETURN_IF_ERROR(LowerTransfers(plan, by_id, nodes, out));

  // Pass 1, per rank: wait sets, outgoing chunks, landing guards, tile order.
  std::map<int, GuardRef> guard_of_transfer;
  for (int r = 0; r < plan.world_size; ++r) {
    ASSIGN_OR_RETURN(RankSchedule rs,
                     ScheduleRankTiles(plan, r, by_id, facts, out, guard_of_transfer));
    out.ranks.push_back(std::move(rs));
  }
  RETURN_IF_ERROR(CheckGuardsOnNode(plan, by_id, nodes, out, guard_of_transfer));

  // Pass 2, per rank: guarded chunks are not direct; transfer programs.
  for (RankSchedule& rs : out.ranks) {
    ASSIGN_OR_RETURN(
        const int live_channels,
        BuildTransferProgram(plan, by_id, nodes, out.transfers, guard_of_transfer, rs));
    out.max_signals = std::max(out.max_signals, rs.num_signals);
    out.max_outgoing = std::max(out.max_outgoing, rs.num_chunks());
    out.max_program_channels = std::max(out.max_program_channels, live_channels);
  }
  MarkIdentityFills(by_id, out.slots);
  const std::vector<bool> plain = PlainReductions(by_id, out);
  // Conservative: PlainReductions' proofs were made for chunks that move whole, and have not
  // been redone for parts; with any chunk in tile parts, no reduction is plain.
  bool any_tile_parts = false;
  for (const RankSchedule& rs : out.ranks) {
    for (const OutgoingChunk& c : rs.outgoing) any_tile_parts |= c.tile_parts;
  }
  for (size_t id = 0; id < plain.size(); ++id) {
    out.transfers[id].plain_reduce = plain[id] && !any_tile_parts;
  }
  return out;
}

std::vector<OperandSlot> SpecOperandSlots(const KernelSpec& spec) {
  std::vector<OperandSlot> slots;
  for (const OperandSpec* op : spec.Operands()) {
    OperandSlot s;
    s.slot = static_cast<int>(slots.size());
    s.name = op->name;
    s.buffer = op->buffer;
    s.dtype = op->dtype;
    s.role = op->role;
    s.shape = op->shape;
    s.bytes = plan::DTypeSize(op->dtype);
    for (int64_t d : op->shape) s.bytes *= d;
    slots.push_back(std::move(s));
  }
  return slots;
}

}  // namespace syncopate::jit
