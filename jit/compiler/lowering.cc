// Lowering: wait sets, producer counts, tile waves and transfer programs for every rank.
// Pure functions; thread-compatible.
#include "jit/compiler/lowering.h"

#include <algorithm>
#include <climits>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
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
  // Plan buffers transfers touch but no operand binds, in plan buffer order.
  std::vector<char> used(plan.buffers.size(), 0);
  for (const plan::RankPlan& rp : plan.ranks) {
    for (const auto& channel : rp.channels) {
      for (const plan::Transfer& t : channel) {
        for (size_t b = 0; b < plan.buffers.size(); ++b) {
          if (plan.buffers[b].name == t.src_buffer || plan.buffers[b].name == t.dst_buffer) used[b] = 1;
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

absl::StatusOr<LoweredSchedule> Lower(const plan::Plan& plan, const KernelSpec& spec,
                                      const std::vector<int>& node_map) {
  RETURN_IF_ERROR(CheckSpecAgainstPlan(spec, plan));
  if (plan.world_size < 1 || plan.world_size > kMaxRanks ||
      static_cast<int>(plan.ranks.size()) != plan.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("plan \"", plan.name, "\": world size ",
                                                   plan.world_size, " with ", plan.ranks.size(),
                                                   " rank plans (need 1..", kMaxRanks, ", equal)"));
  }
  const std::vector<const plan::Transfer*> by_id = plan.TransfersById();
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
  ASSIGN_OR_RETURN(std::vector<int> depth, ArrivalDepths(plan, by_id));
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

  // Footprints of the consumed and produced operands, per tile.
  std::vector<OperandFootprints> consumed, produced;
  for (const OperandSpec* op : spec.Operands()) {
    if (op->role == OperandRole::kLocal) continue;
    OperandFootprints f{op, {}};
    f.tiles.resize(out.num_tiles);
    for (int m = 0; m < out.tiles_m; ++m) {
      for (int n = 0; n < out.tiles_n; ++n) f.tiles[m * out.tiles_n + n] = op->Footprint(m, n);
    }
    (op->role == OperandRole::kConsumed ? consumed : produced).push_back(std::move(f));
  }

  std::vector<int> swizzle(out.num_tiles);
  for (int i = 0; i < out.num_tiles; ++i) {
    swizzle[i] = static_cast<int>(SwizzledTile(i, out.tiles_m, out.tiles_n, spec.group_m));
  }

  for (const plan::Transfer* t : by_id) out.plan_signals = std::max(out.plan_signals, t->signal + 1);

  // Pass 1, per rank: wait sets, outgoing chunks, landing guards, tile order.
  std::map<int, GuardRef> guard_of_transfer;
  for (int r = 0; r < plan.world_size; ++r) {
    RankSchedule rs;
    rs.rank = r;
    rs.waits.resize(out.num_tiles);
    rs.tile_outgoing.resize(out.num_tiles);
    rs.tile_wave.assign(out.num_tiles, 0);

    for (const plan::Transfer* t : by_id) {
      if (t->dst_rank() != r) continue;
      rs.num_signals = std::max(rs.num_signals, t->signal + 1);
      for (int tile = 0; tile < out.num_tiles; ++tile) {
        for (const OperandFootprints& f : consumed) {
          if (f.op->buffer != t->dst_buffer || !f.tiles[tile].Intersects(t->dst_region)) continue;
          rs.waits[tile].push_back(TileWait{t->signal, t->id, t->src_rank()});
          rs.tile_wave[tile] = std::max(rs.tile_wave[tile], depth[t->id]);
          break;  // several operands on one buffer: one wait suffices
        }
      }
    }
    for (auto& w : rs.waits) {
      std::sort(w.begin(), w.end(), [](const TileWait& a, const TileWait& b) {
        return a.signal != b.signal ? a.signal < b.signal : a.transfer < b.transfer;
      });
    }

    // Tiles of rank r writing `region` of `buffer` through a produced operand.
    auto producer_tiles = [&](const std::string& buffer, const plan::Region& region) {
      std::vector<int> tiles;
      for (int tile = 0; tile < out.num_tiles; ++tile) {
        for (const OperandFootprints& f : produced) {
          if (f.op->buffer == buffer && f.tiles[tile].Intersects(region)) {
            tiles.push_back(tile);
            break;
          }
        }
      }
      return tiles;
    };

    // Landing guards: incoming reductions (or any writes) onto data this rank computes.
    for (const plan::Transfer* t : by_id) {
      if (t->dst_rank() != r) continue;
      std::vector<int> tiles = producer_tiles(t->dst_buffer, t->dst_region);
      if (tiles.empty()) continue;
      LandingGuard g;
      g.transfer = t->id;
      g.signal = out.plan_signals + static_cast<int>(rs.guards.size());
      g.producers = static_cast<int>(tiles.size());
      g.producer_tiles = std::move(tiles);
      guard_of_transfer[t->id] = GuardRef{r, g.signal};
      rs.guards.push_back(std::move(g));
    }

    // Outgoing chunks, in transfer-id order.
    for (const plan::Transfer* t : by_id) {
      if (!t->after_compute || t->src_rank() != r) continue;
      OutgoingChunk c;
      c.transfer = t->id;
      c.producer_tiles = producer_tiles(t->src_buffer, t->src_region);
      c.producers = static_cast<int>(c.producer_tiles.size());
      if (c.producers > 0 && t->kind == plan::TransferKind::kPull) {
        return absl::UnimplementedError(absl::StrCat(
            "plan \"", plan.name, "\": transfer ", t->id, " pulls computed data (after_compute) "
            "from rank ", r, "; fused kernels publish computed chunks on the producing rank only, "
            "so use a PUSH for it"));
      }
      // Guards are decided for every destination rank only after this loop; `direct` is
      // finalised in pass 2.
      const LoweredTransfer& lt = out.transfers[t->id];
      const int64_t bytes = t->src_region.NumElements() * plan::DTypeSize(lt.dtype);
      c.direct = c.producers > 0 && t->deps.empty() && t->rank == r && !lt.inter_node &&
                 bytes <= kMaxDirectMoveBytes;
      rs.outgoing.push_back(std::move(c));
    }
    for (size_t c = 0; c < rs.outgoing.size(); ++c) {
      for (int tile : rs.outgoing[c].producer_tiles) rs.tile_outgoing[tile].push_back(static_cast<int>(c));
    }
    for (size_t g = 0; g < rs.guards.size(); ++g) {
      for (int tile : rs.guards[g].producer_tiles) {
        rs.tile_outgoing[tile].push_back(static_cast<int>(rs.outgoing.size() + g));
      }
    }
    rs.num_signals = rs.guards.empty() ? rs.num_signals
                                       : out.plan_signals + static_cast<int>(rs.guards.size());

    // Tile order: waves by estimated arrival; inside a wave, tiles whose outgoing chunks (or
    // landing guards) are needed earliest first; then the kernel's own swizzle.
    std::vector<int> send_priority(out.num_tiles, INT_MAX);
    for (const OutgoingChunk& c : rs.outgoing) {
      for (int tile : c.producer_tiles) {
        send_priority[tile] = std::min(send_priority[tile], depth[c.transfer]);
      }
    }
    // A guard holds back a peer's reduction into this rank: as urgent as that transfer.
    for (const LandingGuard& g : rs.guards) {
      for (int tile : g.producer_tiles) {
        send_priority[tile] = std::min(send_priority[tile], depth[g.transfer]);
      }
    }
    rs.tile_order = swizzle;
    std::stable_sort(rs.tile_order.begin(), rs.tile_order.end(), [&](int a, int b) {
      if (rs.tile_wave[a] != rs.tile_wave[b]) return rs.tile_wave[a] < rs.tile_wave[b];
      return send_priority[a] < send_priority[b];
    });
    out.ranks.push_back(std::move(rs));
  }

  // The destination's guard word is on another node than the proxy moving the chunk.
  for (const auto& [id, guard] : guard_of_transfer) {
    if (out.transfers[id].inter_node) {
      return NotProxyable(plan, *by_id[id], nodes,
                          absl::StrCat("lands on data rank ", guard.rank,
                                       " computes (it would need a landing guard)"));
    }
  }

  // Pass 2, per rank: guarded chunks are not direct; transfer programs.
  for (RankSchedule& rs : out.ranks) {
    const int r = rs.rank;
    std::map<int, int> chunk_of_transfer;
    for (size_t c = 0; c < rs.outgoing.size(); ++c) {
      OutgoingChunk& chunk = rs.outgoing[c];
      if (guard_of_transfer.count(chunk.transfer) != 0) chunk.direct = false;
      chunk_of_transfer[chunk.transfer] = static_cast<int>(c);
    }
    // Everything rank r executes, minus direct chunks and the proxy's, per channel in plan order.
    const plan::RankPlan& rp = plan.ranks[r];
    rs.program.resize(rp.channels.size());
    int live_channels = 0;
    for (size_t ch = 0; ch < rp.channels.size(); ++ch) {
      for (const plan::Transfer& t : rp.channels[ch]) {
        if (out.transfers[t.id].inter_node) {
          rs.proxied.push_back(t.id);
          continue;
        }
        // Steps wait on signal words through the node's mappings; another node's are not mapped.
        for (int d : t.deps) {
          const plan::Transfer& dep = *by_id[d];
          if (nodes[dep.dst_rank()] == nodes[r]) continue;
          return absl::UnimplementedError(
              absl::StrCat("plan \"", plan.name, "\": transfer ", t.id, " (rank ", r, " on node ",
                           nodes[r], ", channel ", ch, ") depends on ", Route(dep, nodes),
                           ", whose signal lands on node ", nodes[dep.dst_rank()],
                           "; a fused kernel cannot observe a signal set on another node"));
        }
        auto it = chunk_of_transfer.find(t.id);
        const OutgoingChunk* chunk = it == chunk_of_transfer.end() ? nullptr : &rs.outgoing[it->second];
        if (chunk != nullptr && chunk->direct) continue;
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
    out.max_signals = std::max(out.max_signals, rs.num_signals);
    out.max_outgoing = std::max(out.max_outgoing, rs.num_chunks());
    out.max_program_channels = std::max(out.max_program_channels, live_channels);
  }

  // Slots that receive reductions but no kernel operand produces: identity-filled by the runtime.
  for (const plan::Transfer* t : by_id) {
    if (t->reduce == plan::ReduceOp::kNone) continue;
    const int slot = SlotOfBuffer(out.slots, t->dst_buffer);
    if (slot >= 0 && out.slots[slot].role != OperandRole::kProduced) {
      out.slots[slot].needs_identity_fill = true;
    }
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
