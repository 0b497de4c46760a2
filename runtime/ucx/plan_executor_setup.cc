// PlanExecutor::Create: checks the arguments, then a pass per concern over the plan (see the
// private declarations in plan_executor.h), then the transport regions.
#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "runtime/ucx/plan_executor.h"

namespace syncopate::ucx {
namespace {

constexpr uint64_t kSlotAlign = 64;

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

absl::Status CheckCreateArguments(const plan::Plan& plan, int rank, const NodeMap& nodes,
                                  const ExecutorOptions& options) {
  if (rank < 0 || rank >= plan.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("executor: rank ", rank, " outside plan '",
                                                   plan.name, "' of world size ", plan.world_size));
  }
  if (static_cast<int>(nodes.size()) != plan.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("executor: node map has ", nodes.size(),
                                                   " ranks, plan '", plan.name, "' ",
                                                   plan.world_size));
  }
  if (options.staging != nullptr && !options.run_intra_node) {
    // Staged buffers are consistent only if every chunk touching them goes through this
    // executor: no device-side backend moves intra-node chunks into the staged memory yet.
    return absl::InvalidArgumentError(
        "executor: staged buffers need run_intra_node (every chunk through the executor)");
  }
  if (options.device != nullptr && (options.run_intra_node || options.staging != nullptr)) {
    // Device mode leaves intra-node chunks to the device backends and moves sources and
    // arrivals per chunk; running intra-node chunks here or staging whole buffers would write
    // the same device memory from two places.
    return absl::InvalidArgumentError(
        "executor: device mode excludes run_intra_node and staging (device backends own "
        "intra-node chunks)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PlanExecutor>> PlanExecutor::Create(
    const plan::Plan& plan, int rank, NodeMap nodes, UcxTransport* transport,
    ExecutorOptions options, const std::map<std::string, void*>& external) {
  RETURN_IF_ERROR(CheckCreateArguments(plan, rank, nodes, options));
  std::unique_ptr<PlanExecutor> ex(
      new PlanExecutor(plan, rank, std::move(nodes), transport, options));
  PlanExecutor& e = *ex;
  e.by_id_ = e.plan_.TransfersById();
  const int n = static_cast<int>(e.by_id_.size());
  e.info_.resize(n);
  e.done_epoch_ = std::make_unique<std::atomic<uint64_t>[]>(std::max(n, 1));
  for (const plan::BufferSpec& b : e.plan_.buffers) e.specs_[b.name] = &b;

  StageLayout stage{std::vector<uint64_t>(plan.world_size, 0),
                    std::vector<int>(plan.world_size, 0)};
  for (int id = 0; id < n; ++id) RETURN_IF_ERROR(e.ClassifyTransfer(id, stage));
  e.RestoreChannelOrder();
  if (options.device != nullptr) {
    RETURN_IF_ERROR(e.CheckDeviceModeDependencies());
  } else {
    e.PlanIdentityFills();  // device mode carries no reductions (ClassifyTransfer checks)
  }
  if (options.staging != nullptr) RETURN_IF_ERROR(e.CollectInitialRanges());
  RETURN_IF_ERROR(e.AllocateRegions(external, stage));
  return ex;
}

absl::Status PlanExecutor::ClassifyTransfer(int id, StageLayout& stage) {
  const plan::Plan& plan = plan_;
  const int rank = rank_;
  const plan::Transfer* t = by_id_[id];
  if (t == nullptr || t->id != id) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan '", plan.name, "': transfer ids are not dense at ", id));
  }
  Info& info = info_[id];
  const bool cross_node = nodes_[t->rank] != nodes_[t->peer];
  info.carried = t->kind == plan::TransferKind::kLocalCopy ? options_.run_intra_node
                                                           : cross_node || options_.run_intra_node;
  num_signals_ = std::max(num_signals_, t->signal + 1);
  const plan::BufferSpec* src = plan.FindBuffer(t->src_buffer);
  const plan::BufferSpec* dst = plan.FindBuffer(t->dst_buffer);
  if (src == nullptr || dst == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan '", plan.name, "' transfer ", id, ": unknown buffer '",
                     src == nullptr ? t->src_buffer : t->dst_buffer, "'"));
  }
  const bool touches_me = t->rank == rank || t->dst_rank() == rank || t->src_rank() == rank;
  if (options_.device != nullptr && info.carried && touches_me &&
      (t->kind != plan::TransferKind::kPush || t->reduce != plan::ReduceOp::kNone)) {
    // A pull would read a peer's host copy, which only that peer's FetchSource fills; a
    // reduction would have to be applied on the device. Neither exists yet.
    return absl::UnimplementedError(
        absl::StrCat("executor: plan '", plan.name, "': ", Describe(*t),
                     " crosses nodes, but device mode carries plain inter-node pushes only"));
  }
  if (info.carried && touches_me) {
    ASSIGN_OR_RETURN(info.src_ranges, RegionBytes(*src, t->src_region));
    ASSIGN_OR_RETURN(info.dst_ranges, RegionBytes(*dst, t->dst_region));
    if (TotalBytes(info.src_ranges) != TotalBytes(info.dst_ranges)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan '", plan.name, "' transfer ", id, ": source region ", t->src_region.ToString(),
          " and destination region ", t->dst_region.ToString(), " differ in size"));
    }
  }
  if (info.carried && t->reduce != plan::ReduceOp::kNone &&
      t->kind != plan::TransferKind::kLocalCopy) {
    // The slot lives on the rank that reduces: the receiver of a push, the puller of a pull.
    const int owner = t->dst_rank();
    const uint64_t bytes =
        static_cast<uint64_t>(t->src_region.NumElements()) * plan::DTypeSize(src->dtype);
    info.slot = stage.slots[owner]++;
    info.slot_offset = stage.bytes[owner];
    stage.bytes[owner] = AlignUp(stage.bytes[owner] + bytes, kSlotAlign);
  }
  if (t->rank == rank && info.carried) {
    if (t->channel < 0) {
      return absl::InvalidArgumentError(absl::StrCat("transfer ", id, ": channel < 0"));
    }
    if (t->signal < 0 && t->kind != plan::TransferKind::kLocalCopy && t->dst_rank() != rank) {
      // Without a signal the receiver could not tell the chunk arrived; validation rejects
      // such plans, and so do we.
      return absl::InvalidArgumentError(
          absl::StrCat("plan '", plan.name, "' transfer ", id, " sets no signal"));
    }
    if (static_cast<int>(mine_by_channel_.size()) <= t->channel) {
      mine_by_channel_.resize(t->channel + 1);
    }
    mine_by_channel_[t->channel].push_back(id);
    mine_.push_back(id);
  } else if (t->rank != rank && t->dst_rank() == rank && info.carried) {
    if (t->signal < 0) {
      return absl::InvalidArgumentError(absl::StrCat("plan '", plan.name, "' transfer ", id,
                                                     " into rank ", rank, " sets no signal"));
    }
    incoming_.push_back(id);
  }
  return absl::OkStatus();
}

void PlanExecutor::RestoreChannelOrder() {
  const auto& channels = plan_.ranks[rank_].channels;
  for (int c = 0; c < static_cast<int>(channels.size()); ++c) {
    if (c >= static_cast<int>(mine_by_channel_.size())) break;
    std::vector<int> ordered;
    for (const plan::Transfer& t : channels[c]) {
      if (info_[t.id].carried) ordered.push_back(t.id);
    }
    mine_by_channel_[c] = std::move(ordered);
  }
}

absl::Status PlanExecutor::CheckDeviceModeDependencies() const {
  // Observable: landing on this node (the device waits on its signal word), or carried over UCX
  // (its completion here, or its host signal word on its destination). An intra-node transfer
  // of another node signals only on that node's devices, so waiting for it would only ever time
  // out.
  const int n = static_cast<int>(by_id_.size());
  for (int id : mine_) {
    const plan::Transfer& t = *by_id_[id];
    for (int dep : t.deps) {
      if (dep < 0 || dep >= n) continue;  // WaitDependency reports it
      const plan::Transfer& d = *by_id_[dep];
      const int where = d.dst_rank();
      if (where < 0 || where >= plan_.world_size) continue;
      if (nodes_[where] != nodes_[rank_] && !info_[dep].carried) {
        return absl::UnimplementedError(absl::StrCat(
            "executor: plan '", plan_.name, "': ", Describe(t), " depends on transfer ", dep,
            " (rank ", d.rank, " to rank ", where,
            "), which stays inside another node: device mode cannot observe its signal"));
      }
    }
  }
  return absl::OkStatus();
}

void PlanExecutor::PlanIdentityFills() {
  // Per buffer, element masks: an element only reduced into (kReduced without kWritten) is a
  // fresh reduction output.
  constexpr uint8_t kReduced = 1, kWritten = 2;
  std::map<std::string, std::vector<uint8_t>> masks;
  std::map<std::string, plan::ReduceOp> ops;
  auto mask_of = [&](const std::string& name) -> std::vector<uint8_t>& {
    auto it = masks.find(name);
    if (it == masks.end()) {
      it = masks.emplace(name, std::vector<uint8_t>(specs_.at(name)->NumElements(), 0)).first;
    }
    return it->second;
  };
  for (const auto& [name, region] : plan_.ranks[rank_].initial) {
    if (!specs_.count(name)) continue;
    std::vector<uint8_t>& m = mask_of(name);
    for (int64_t off : region.Offsets(specs_.at(name)->strides)) m[off] |= kWritten;
  }
  for (int id = 0; id < static_cast<int>(by_id_.size()); ++id) {
    const plan::Transfer& t = *by_id_[id];
    if (t.dst_rank() != rank_) continue;
    const bool fresh_reduce = t.reduce != plan::ReduceOp::kNone && info_[id].carried;
    std::vector<uint8_t>& m = mask_of(t.dst_buffer);
    for (int64_t off : t.dst_region.Offsets(specs_.at(t.dst_buffer)->strides)) {
      m[off] |= fresh_reduce ? kReduced : kWritten;
    }
    if (fresh_reduce) ops[t.dst_buffer] = t.reduce;
  }
  for (auto& [name, m] : masks) {
    const uint64_t esize = plan::DTypeSize(specs_.at(name)->dtype);
    IdentityFill fill{name, ops.count(name) ? ops[name] : plan::ReduceOp::kSum, {}};
    for (size_t i = 0; i < m.size(); ++i) {
      if (m[i] != kReduced) continue;
      if (!fill.ranges.empty() &&
          fill.ranges.back().offset + fill.ranges.back().length == i * esize) {
        fill.ranges.back().length += esize;
      } else {
        fill.ranges.push_back({i * esize, esize});
      }
    }
    if (!fill.ranges.empty()) identity_fills_.push_back(std::move(fill));
  }
}

absl::Status PlanExecutor::CollectInitialRanges() {
  for (const auto& [name, region] : plan_.ranks[rank_].initial) {
    if (!specs_.count(name)) continue;
    ASSIGN_OR_RETURN(std::vector<ByteRange> ranges, RegionBytes(*specs_.at(name), region));
    std::vector<ByteRange>& all = initial_ranges_[name];
    all.insert(all.end(), ranges.begin(), ranges.end());
  }
  return absl::OkStatus();
}

absl::Status PlanExecutor::AllocateRegions(const std::map<std::string, void*>& external,
                                           const StageLayout& stage) {
  for (const plan::BufferSpec& b : plan_.buffers) {
    const std::string name = absl::StrCat("buffer:", b.name);
    const uint64_t bytes = std::max<uint64_t>(BufferBytes(b), 8);
    absl::StatusOr<int> id;
    if (auto it = external.find(b.name); it != external.end()) {
      id = transport_->RegisterMemory(name, it->second, bytes, MemoryKind::kHost);
    } else {
      id = transport_->AllocateMemory(name, bytes);
    }
    if (!id.ok()) return id.status();
    buffer_region_[b.name] = *id;
  }
  ASSIGN_OR_RETURN(signals_region_,
                   transport_->AllocateMemory("signals", std::max(num_signals_, 1) * 8));
  ASSIGN_OR_RETURN(stage_region_, transport_->AllocateMemory(
                                      "staging", std::max<uint64_t>(stage.bytes[rank_], 8)));
  ASSIGN_OR_RETURN(
      stage_signals_region_,
      transport_->AllocateMemory("staging_signals", std::max(stage.slots[rank_], 1) * 8));
  if (options_.device != nullptr) {
    ASSIGN_OR_RETURN(epoch_ready_region_, transport_->AllocateMemory("epoch_ready", 8));
    peer_ready_ = std::make_unique<std::atomic<uint64_t>[]>(plan_.world_size);
    for (int r = 0; r < plan_.world_size; ++r) peer_ready_[r].store(0);
  }
  return absl::OkStatus();
}

}  // namespace syncopate::ucx
