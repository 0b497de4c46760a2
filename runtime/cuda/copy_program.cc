// Plan -> copy-engine program; see copy_program.h.
#include "runtime/cuda/copy_program.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "jit/compiler/copy_descriptors.h"

namespace syncopate::cuda {
namespace {

// What building one rank's program reads and what it has issued so far.
struct ProgramBuild {
  const plan::Plan& plan;
  int rank;
  std::vector<int> nodes;  // rank -> node
  std::vector<const plan::Transfer*> by_id;
  const BufferAddressFn& address;
  const ChunkReadyIndexFn& ready_index;
  std::map<int, int> step_of_transfer;  // transfer id -> index in the program's steps
  std::vector<std::set<int>> guarded;   // per channel: peers already guarded this launch

  bool InterNode(const plan::Transfer& t) const {
    return nodes[t.src_rank()] != nodes[t.dst_rank()];
  }
};

// Signals every rank's transfers use, and the peers of this node that pull from `rank` (each
// must drain before the buffers they read are reused).
void CountSignalsAndPullers(const ProgramBuild& b, CopyProgram& program) {
  for (const plan::Transfer* t : b.by_id) {
    if (t == nullptr) continue;
    program.num_signals = std::max(program.num_signals, t->signal + 1);
    if (t->kind == plan::TransferKind::kPull && t->peer == b.rank && t->rank != b.rank &&
        !b.InterNode(*t) &&
        std::find(program.pulled_by.begin(), program.pulled_by.end(), t->rank) ==
            program.pulled_by.end()) {
      program.pulled_by.push_back(t->rank);
    }
  }
  std::sort(program.pulled_by.begin(), program.pulled_by.end());
}

// The host proxy carries inter-node chunks, plain pushes only.
absl::Status CheckProxyCarries(const ProgramBuild& b, const plan::Transfer& t) {
  if (t.kind == plan::TransferKind::kPush && t.reduce == plan::ReduceOp::kNone) {
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat(
      "transfer ", t.id, " (rank ", t.rank, " ", plan::TransferKindName(t.kind), ", reduce ",
      plan::ReduceOpName(t.reduce), ") crosses from node ", b.nodes[t.src_rank()], " to node ",
      b.nodes[t.dst_rank()],
      "; the host proxy carries inter-node chunks and supports plain PUSH copies only"));
}

// Whether every same-rank dependency of `t` on another channel is issued already; an error for
// a dependency that does not exist or lands on another node (no signal the copy engine sees).
absl::StatusOr<bool> DependenciesIssued(const ProgramBuild& b, const plan::Transfer& t,
                                        int channel) {
  bool ready = true;
  for (int d : t.deps) {
    if (d < 0 || d >= static_cast<int>(b.by_id.size()) || b.by_id[d] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("transfer ", t.id, " depends on unknown transfer ", d));
    }
    // Before the readiness test: a dependency the proxy runs never becomes a step here.
    const int lands_on = b.by_id[d]->dst_rank();
    if (b.nodes[lands_on] != b.nodes[b.rank]) {
      return absl::UnimplementedError(absl::StrCat(
          "transfer ", t.id, " (rank ", b.rank, " on node ", b.nodes[b.rank],
          ") depends on transfer ", d, ", which lands on rank ", lands_on, " on node ",
          b.nodes[lands_on], "; the copy engine cannot observe a signal set on another node"));
    }
    if (b.by_id[d]->rank == b.rank && b.by_id[d]->channel != channel &&
        !b.step_of_transfer.count(d)) {
      ready = false;
    }
  }
  return ready;
}

// What the copy engine cannot do with `t`: reduce, convert, or reach outside a buffer.
absl::Status CheckCopyable(const plan::Plan& plan, const plan::Transfer& t) {
  if (t.reduce != plan::ReduceOp::kNone) {
    return absl::UnimplementedError(
        absl::StrCat("transfer ", t.id, " (rank ", t.rank, " ", plan::TransferKindName(t.kind),
                     " chunk ", t.chunk, ") reduces (", plan::ReduceOpName(t.reduce),
                     "); the copy-engine backend only copies: use the SM or direct backend"));
  }
  const plan::BufferSpec* sb = plan.FindBuffer(t.src_buffer);
  const plan::BufferSpec* db = plan.FindBuffer(t.dst_buffer);
  if (sb == nullptr || db == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("transfer ", t.id, " names unknown buffer '",
                                                   sb ? t.dst_buffer : t.src_buffer, "'"));
  }
  if (sb->dtype != db->dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("transfer ", t.id, " copies ", plan::DTypeName(sb->dtype), " into ",
                     plan::DTypeName(db->dtype), " (the copy engine does not convert)"));
  }
  if (!t.src_region.InsideShape(sb->shape) || !t.dst_region.InsideShape(db->shape)) {
    return absl::InvalidArgumentError(
        absl::StrCat("transfer ", t.id, ": region ", t.src_region.ToString(), " or ",
                     t.dst_region.ToString(), " lies outside its buffer"));
  }
  return absl::OkStatus();
}

// The waits before `t`'s copies: the peer entered the launch, dependencies landed, its chunk
// computed.
absl::Status AddWaits(ProgramBuild& b, const plan::Transfer& t, int channel, CopyStep& step) {
  // Write-after-read guard: a peer's buffers are written (PUSH) or read (PULL) only after the
  // peer entered this launch; once per peer per channel.
  if (t.peer != b.rank && b.guarded[channel].insert(t.peer).second) {
    step.waits.push_back({WaitKind::kEntered, b.rank, t.peer});
  }
  for (int d : t.deps) {
    const plan::Transfer& dep = *b.by_id[d];
    if (dep.rank == b.rank) {
      if (dep.channel != channel) step.after_steps.push_back(b.step_of_transfer[d]);
    } else if (dep.dst_rank() == b.rank) {
      step.waits.push_back({WaitKind::kSignal, b.rank, dep.signal});
    } else {
      step.waits.push_back({WaitKind::kPeerSignal, dep.dst_rank(), dep.signal});
    }
  }
  if (t.after_compute) {
    int index = t.id;
    if (b.ready_index) {
      ASSIGN_OR_RETURN(index, b.ready_index(t.id));
    }
    step.waits.push_back({WaitKind::kChunkReady, b.rank, index});
  }
  return absl::OkStatus();
}

// `t` as one step: its waits, its copies between the two ranks' buffers, the signal it sets.
absl::StatusOr<CopyStep> MakeStep(ProgramBuild& b, const plan::Transfer& t, int channel) {
  CopyStep step;
  step.transfer = t.id;
  step.channel = channel;
  RETURN_IF_ERROR(AddWaits(b, t, channel, step));
  ASSIGN_OR_RETURN(uint64_t src_base, b.address(t.src_buffer, t.src_rank()));
  ASSIGN_OR_RETURN(uint64_t dst_base, b.address(t.dst_buffer, t.dst_rank()));
  absl::StatusOr<std::vector<jit::CopySegment>> segments = jit::BuildCopyDescriptors(b.plan, t);
  if (!segments.ok()) {
    return absl::Status(segments.status().code(),
                        absl::StrCat("transfer ", t.id, ": ", segments.status().message()));
  }
  for (const jit::CopySegment& g : *segments) {
    step.copies.push_back({src_base + static_cast<uint64_t>(g.src_offset_bytes),
                           dst_base + static_cast<uint64_t>(g.dst_offset_bytes),
                           static_cast<uint64_t>(g.row_bytes), static_cast<uint64_t>(g.rows),
                           static_cast<uint64_t>(g.src_pitch_bytes),
                           static_cast<uint64_t>(g.dst_pitch_bytes)});
  }
  step.signal_rank = t.dst_rank();
  step.signal = t.signal;
  if (t.kind == plan::TransferKind::kPull && t.peer != b.rank) step.drained_rank = t.peer;
  return step;
}

}  // namespace

absl::StatusOr<CopyProgram> BuildCopyProgram(const plan::Plan& plan, int rank,
                                             const BufferAddressFn& address,
                                             const ChunkReadyIndexFn& ready_index,
                                             const std::vector<int>& node_map) {
  if (rank < 0 || rank >= plan.world_size || rank >= static_cast<int>(plan.ranks.size())) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " not in plan '", plan.name,
                                                   "' of world size ", plan.world_size));
  }
  ASSIGN_OR_RETURN(std::vector<int> nodes, plan::ResolveNodeMap(plan.world_size, node_map));
  const plan::RankPlan& mine = plan.ranks[rank];
  ProgramBuild b{plan,
                 rank,
                 std::move(nodes),
                 plan.TransfersById(),
                 address,
                 ready_index,
                 {},
                 std::vector<std::set<int>>(mine.channels.size())};
  CopyProgram program;
  program.rank = rank;
  program.num_channels = static_cast<int>(mine.channels.size());
  CountSignalsAndPullers(b, program);

  // Issue order: round-robin over channels, taking a channel's next transfer once every
  // same-rank dependency on another channel has been issued (plans are DAGs, so this finishes).
  std::vector<size_t> next(mine.channels.size(), 0);
  size_t remaining = 0;
  for (const auto& ch : mine.channels) remaining += ch.size();
  while (remaining > 0) {
    bool progressed = false;
    for (size_t c = 0; c < mine.channels.size(); ++c) {
      const int channel = static_cast<int>(c);
      while (next[c] < mine.channels[c].size()) {
        const plan::Transfer& t = mine.channels[c][next[c]];
        if (b.InterNode(t)) {
          RETURN_IF_ERROR(CheckProxyCarries(b, t));  // the proxy's, not a step here
        } else {
          ASSIGN_OR_RETURN(const bool ready, DependenciesIssued(b, t, channel));
          if (!ready) break;
          RETURN_IF_ERROR(CheckCopyable(plan, t));
          ASSIGN_OR_RETURN(CopyStep step, MakeStep(b, t, channel));
          b.step_of_transfer[t.id] = static_cast<int>(program.steps.size());
          program.steps.push_back(std::move(step));
        }
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

absl::StatusOr<std::vector<int>> EpochSourceGates(const CopyProgram& program,
                                                  const std::vector<int>& step_gates) {
  if (step_gates.size() != program.steps.size()) {
    return absl::InvalidArgumentError(absl::StrCat("copy program has ", program.steps.size(),
                                                   " steps but ", step_gates.size(), " gates"));
  }
  std::vector<int> source(program.steps.size(), -1);
  std::vector<int> last_on_channel(std::max(program.num_channels, 1), -1);
  for (size_t i = 0; i < program.steps.size(); ++i) {
    const CopyStep& step = program.steps[i];
    int& last = last_on_channel.at(step.channel);
    source[i] = step_gates[i] >= 0 ? step_gates[i] : last;
    for (int after : step.after_steps) {
      if (source[i] < 0) source[i] = source.at(after);
    }
    if (source[i] >= 0) last = source[i];
    if (source[i] < 0 && (step.signal >= 0 || step.drained_rank >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", program.rank, "'s copy step for transfer ", step.transfer, " writes a ",
          step.signal >= 0 ? "signal" : "drained word",
          " but neither it nor a step before it waits for the kernel, so no gate word holds the "
          "launch's epoch to copy (a copy-engine launch the device counts, as in a captured "
          "graph, needs one)"));
    }
  }
  return source;
}

}  // namespace syncopate::cuda
