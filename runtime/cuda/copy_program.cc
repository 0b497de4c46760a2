// Plan -> copy-engine program; see copy_program.h.
#include "runtime/cuda/copy_program.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "jit/compiler/copy_descriptors.h"

namespace syncopate::cuda {
absl::StatusOr<CopyProgram> BuildCopyProgram(const plan::Plan& plan, int rank,
                                             const BufferAddressFn& address,
                                             const ChunkReadyIndexFn& ready_index,
                                             const std::vector<int>& node_map) {
  if (rank < 0 || rank >= plan.world_size || rank >= static_cast<int>(plan.ranks.size())) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " not in plan '", plan.name,
                                                   "' of world size ", plan.world_size));
  }
  ASSIGN_OR_RETURN(const std::vector<int> nodes, plan::ResolveNodeMap(plan.world_size, node_map));
  auto inter_node = [&](const plan::Transfer& t) {
    return nodes[t.src_rank()] != nodes[t.dst_rank()];
  };
  CopyProgram program;
  program.rank = rank;
  const plan::RankPlan& mine = plan.ranks[rank];
  program.num_channels = static_cast<int>(mine.channels.size());
  std::vector<const plan::Transfer*> by_id = plan.TransfersById();
  for (const plan::Transfer* t : by_id) {
    if (t != nullptr) program.num_signals = std::max(program.num_signals, t->signal + 1);
    if (t != nullptr && t->kind == plan::TransferKind::kPull && t->peer == rank &&
        t->rank != rank && !inter_node(*t)) {
      if (std::find(program.pulled_by.begin(), program.pulled_by.end(), t->rank) ==
          program.pulled_by.end()) {
        program.pulled_by.push_back(t->rank);
      }
    }
  }
  std::sort(program.pulled_by.begin(), program.pulled_by.end());

  // Issue order: round-robin over channels, taking a channel's next transfer once every
  // same-rank dependency on another channel has been issued (plans are DAGs, so this finishes).
  std::map<int, int> step_of_transfer;  // transfer id -> index in program.steps
  std::vector<size_t> next(mine.channels.size(), 0);
  size_t remaining = 0;
  for (const auto& ch : mine.channels) remaining += ch.size();
  // Per channel: peers already guarded on this channel in this launch.
  std::vector<std::set<int>> guarded(mine.channels.size());
  while (remaining > 0) {
    bool progressed = false;
    for (size_t c = 0; c < mine.channels.size(); ++c) {
      while (next[c] < mine.channels[c].size()) {
        const plan::Transfer& t = mine.channels[c][next[c]];
        if (inter_node(t)) {
          if (t.kind != plan::TransferKind::kPush || t.reduce != plan::ReduceOp::kNone) {
            return absl::UnimplementedError(absl::StrCat(
                "transfer ", t.id, " (rank ", t.rank, " ", plan::TransferKindName(t.kind),
                ", reduce ", plan::ReduceOpName(t.reduce), ") crosses from node ",
                nodes[t.src_rank()], " to node ", nodes[t.dst_rank()],
                "; the host proxy carries inter-node chunks and supports plain PUSH copies only"));
          }
          ++next[c];
          --remaining;
          progressed = true;
          continue;
        }
        bool ready = true;
        for (int d : t.deps) {
          if (d < 0 || d >= static_cast<int>(by_id.size()) || by_id[d] == nullptr) {
            return absl::InvalidArgumentError(
                absl::StrCat("transfer ", t.id, " depends on unknown transfer ", d));
          }
          // Before the readiness test: a dependency the proxy runs never becomes a step here.
          if (nodes[by_id[d]->dst_rank()] != nodes[rank]) {
            return absl::UnimplementedError(
                absl::StrCat("transfer ", t.id, " (rank ", rank, " on node ", nodes[rank],
                             ") depends on transfer ", d, ", which lands on rank ",
                             by_id[d]->dst_rank(), " on node ", nodes[by_id[d]->dst_rank()],
                             "; the copy engine cannot observe a signal set on another node"));
          }
          if (by_id[d]->rank == rank && by_id[d]->channel != static_cast<int>(c) &&
              !step_of_transfer.count(d)) {
            ready = false;
          }
        }
        if (!ready) break;
        if (t.reduce != plan::ReduceOp::kNone) {
          return absl::UnimplementedError(absl::StrCat(
              "transfer ", t.id, " (rank ", t.rank, " ", plan::TransferKindName(t.kind),
              " chunk ", t.chunk, ") reduces (", plan::ReduceOpName(t.reduce),
              "); the copy-engine backend only copies: use the SM or direct backend"));
        }
        const plan::BufferSpec* sb = plan.FindBuffer(t.src_buffer);
        const plan::BufferSpec* db = plan.FindBuffer(t.dst_buffer);
        if (sb == nullptr || db == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat(
              "transfer ", t.id, " names unknown buffer '", sb ? t.dst_buffer : t.src_buffer,
              "'"));
        }
        if (sb->dtype != db->dtype) {
          return absl::InvalidArgumentError(absl::StrCat(
              "transfer ", t.id, " copies ", plan::DTypeName(sb->dtype), " into ",
              plan::DTypeName(db->dtype), " (the copy engine does not convert)"));
        }
        if (!t.src_region.InsideShape(sb->shape) || !t.dst_region.InsideShape(db->shape)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "transfer ", t.id, ": region ", t.src_region.ToString(), " or ",
              t.dst_region.ToString(), " lies outside its buffer"));
        }
        CopyStep step;
        step.transfer = t.id;
        step.channel = static_cast<int>(c);
        const int src_rank = t.src_rank();
        const int dst_rank = t.dst_rank();
        // Write-after-read guard: a peer's buffers are written (PUSH) or read (PULL) only after
        // the peer entered this launch; once per peer per channel.
        if (t.peer != rank && guarded[c].insert(t.peer).second) {
          step.waits.push_back({WaitKind::kEntered, rank, t.peer});
        }
        for (int d : t.deps) {
          const plan::Transfer& dep = *by_id[d];
          if (dep.rank == rank) {
            if (dep.channel != static_cast<int>(c)) step.after_steps.push_back(step_of_transfer[d]);
          } else if (dep.dst_rank() == rank) {
            step.waits.push_back({WaitKind::kSignal, rank, dep.signal});
          } else {
            step.waits.push_back({WaitKind::kPeerSignal, dep.dst_rank(), dep.signal});
          }
        }
        if (t.after_compute) {
          int index = t.id;
          if (ready_index) {
            ASSIGN_OR_RETURN(index, ready_index(t.id));
          }
          step.waits.push_back({WaitKind::kChunkReady, rank, index});
        }
        ASSIGN_OR_RETURN(uint64_t src_base, address(t.src_buffer, src_rank));
        ASSIGN_OR_RETURN(uint64_t dst_base, address(t.dst_buffer, dst_rank));
        absl::StatusOr<std::vector<jit::CopySegment>> segments = jit::BuildCopyDescriptors(plan, t);
        if (!segments.ok()) {
          return absl::Status(segments.status().code(), absl::StrCat("transfer ", t.id, ": ",
                                                                    segments.status().message()));
        }
        for (const jit::CopySegment& g : *segments) {
          step.copies.push_back({src_base + static_cast<uint64_t>(g.src_offset_bytes),
                                 dst_base + static_cast<uint64_t>(g.dst_offset_bytes),
                                 static_cast<uint64_t>(g.row_bytes), static_cast<uint64_t>(g.rows),
                                 static_cast<uint64_t>(g.src_pitch_bytes),
                                 static_cast<uint64_t>(g.dst_pitch_bytes)});
        }
        step.signal_rank = dst_rank;
        step.signal = t.signal;
        if (t.kind == plan::TransferKind::kPull && t.peer != rank) step.drained_rank = t.peer;
        step_of_transfer[t.id] = static_cast<int>(program.steps.size());
        program.steps.push_back(std::move(step));
        ++next[c];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", rank, "'s channels wait on each other in a cycle (plan '", plan.name, "')"));
    }
  }
  return program;
}

}  // namespace syncopate::cuda
