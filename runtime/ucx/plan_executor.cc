// PlanExecutor: see plan_executor.h. Running an epoch; Create and its passes are in
// plan_executor_setup.cc.
#include "runtime/ucx/plan_executor.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "runtime/ucx/backoff.h"
#include "runtime/ucx/host_reduce.h"

namespace syncopate::ucx {
NodeMap NodesFromRanksPerNode(int world_size, int ranks_per_node) {
  NodeMap nodes(world_size);
  for (int r = 0; r < world_size; ++r) nodes[r] = ranks_per_node > 0 ? r / ranks_per_node : 0;
  return nodes;
}

PlanExecutor::PlanExecutor(const plan::Plan& plan, int rank, NodeMap nodes,
                           UcxTransport* transport, ExecutorOptions options)
    : plan_(plan),
      rank_(rank),
      nodes_(std::move(nodes)),
      transport_(transport),
      options_(options) {}

void* PlanExecutor::buffer(absl::string_view name) const {
  auto it = buffer_region_.find(std::string(name));
  return it == buffer_region_.end() ? nullptr : transport_->region_address(it->second);
}

std::string PlanExecutor::Describe(const plan::Transfer& t) const {
  const char* dir = t.kind == plan::TransferKind::kPull ? " from " : " to ";
  // The executing rank (this rank for every transfer it runs; Create also names others').
  return absl::StrCat("rank ", t.rank, " transfer ", t.id, " (", plan::TransferKindName(t.kind),
                      t.reduce != plan::ReduceOp::kNone
                          ? absl::StrCat("+", plan::ReduceOpName(t.reduce))
                          : "",
                      " chunk ", t.chunk, dir, "rank ", t.peer, ")");
}

uint64_t PlanExecutor::LoadSignal(int region, int index) const {
  auto* words = static_cast<uint64_t*>(transport_->region_address(region));
  return std::atomic_ref<uint64_t>(words[index]).load(std::memory_order_acquire);
}

void PlanExecutor::StoreSignal(int signal, uint64_t epoch) {
  if (signal < 0) return;
  auto* words = static_cast<uint64_t*>(transport_->region_address(signals_region_));
  std::atomic_ref<uint64_t>(words[signal]).store(epoch, std::memory_order_release);
}

absl::Status PlanExecutor::CheckAbort(const plan::Transfer* t) const {
  if (auto failure = transport_->FirstFailure(); failure.has_value()) {
    return absl::Status(failure->second.code(),
                        absl::StrCat(t != nullptr ? Describe(*t) : absl::StrCat("rank ", rank_),
                                     " aborted: ", failure->second.message()));
  }
  if (abort_.load(std::memory_order_relaxed)) {
    return absl::AbortedError(absl::StrCat("rank ", rank_, ": aborted by another failure"));
  }
  return absl::OkStatus();
}

absl::Status PlanExecutor::StageIn() {
  if (options_.staging == nullptr) return absl::OkStatus();
  for (const auto& [name, ranges] : initial_ranges_) {
    RETURN_IF_ERROR(options_.staging->ToHost(name, ranges));
  }
  return absl::OkStatus();
}

absl::Status PlanExecutor::Execute(uint64_t epoch) {
  if (epoch <= last_epoch_) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ": epoch ", epoch,
                                                   " not after the previous epoch ",
                                                   last_epoch_));
  }
  last_epoch_ = epoch;
  abort_ = false;
  RETURN_IF_ERROR(CheckAbort(nullptr));
  if (options_.device != nullptr) {
    // Announce the epoch only once the previous one's Deliver copies stopped reading the host
    // buffers: senders overwrite them as soon as they see it.
    if (!drained_) {
      absl::Status drain = options_.device->Drain(absl::Now() + options_.transfer_timeout);
      if (!drain.ok()) {
        return absl::Status(drain.code(),
                            absl::StrCat("rank ", rank_, ": epoch ", epoch,
                                         ": draining the previous epoch's deliveries to the "
                                         "device: ", drain.message()));
      }
      drained_ = true;
    }
    auto* word = static_cast<uint64_t*>(transport_->region_address(epoch_ready_region_));
    std::atomic_ref<uint64_t>(*word).store(epoch, std::memory_order_release);
  }
  for (const IdentityFill& fill : identity_fills_) {
    auto* base = static_cast<char*>(buffer(fill.buffer));
    for (const ByteRange& r : fill.ranges) {
      RETURN_IF_ERROR(
          FillIdentity(specs_.at(fill.buffer)->dtype, fill.op, base + r.offset, r.length));
    }
    if (options_.staging != nullptr) {
      RETURN_IF_ERROR(options_.staging->ToDevice(fill.buffer, fill.ranges));
    }
  }
  std::vector<absl::Status> results(mine_by_channel_.size());
  std::vector<std::thread> threads;
  for (size_t c = 0; c < mine_by_channel_.size(); ++c) {
    if (mine_by_channel_[c].empty()) continue;
    threads.emplace_back([this, c, epoch, &results] {
      results[c] = RunChannel(mine_by_channel_[c], epoch);
      if (!results[c].ok()) abort_ = true;
    });
  }
  absl::Status incoming = ReceiveIncoming(epoch);
  if (!incoming.ok()) abort_ = true;
  for (std::thread& th : threads) th.join();
  // Device mode: the epoch ends when the device has every chunk that arrived (also on failure:
  // the next Execute must not announce host buffers that copies still read).
  absl::Status drain;
  if (options_.device != nullptr) {
    drain = options_.device->Drain(absl::Now() + options_.transfer_timeout);
    drained_ = drain.ok();
    if (!drain.ok()) {
      drain = absl::Status(drain.code(),
                           absl::StrCat("rank ", rank_, ": epoch ", epoch,
                                        ": draining deliveries to the device: ", drain.message()));
    }
  }
  // Report the root cause: a failure that names a peer beats "aborted by another failure".
  absl::Status first;
  for (const absl::Status& s : results) {
    if (!s.ok() && (first.ok() || first.code() == absl::StatusCode::kAborted)) first = s;
  }
  if (!incoming.ok() && (first.ok() || first.code() == absl::StatusCode::kAborted)) {
    first = incoming;
  }
  if (!first.ok()) return first;
  RETURN_IF_ERROR(drain);
  // Remote completion of everything this rank put (the fence ordering completes signals only
  // locally).
  std::vector<int> peers;
  for (int id : mine_) {
    const plan::Transfer& t = *by_id_[id];
    if (t.kind == plan::TransferKind::kPush && t.peer != rank_) peers.push_back(t.peer);
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  for (int p : peers) {
    RETURN_IF_ERROR(transport_->Wait(transport_->Flush(p),
                                     absl::Now() + options_.transfer_timeout,
                                     absl::StrCat("rank ", rank_, " final flush to rank ", p)));
  }
  return absl::OkStatus();
}

absl::Status PlanExecutor::RunChannel(const std::vector<int>& ids, uint64_t epoch) {
  for (int id : ids) {
    const plan::Transfer& t = *by_id_[id];
    absl::Time deadline = absl::Now() + options_.transfer_timeout;
    std::vector<int> device_deps;
    for (int dep : t.deps) {
      if (options_.device != nullptr && dep >= 0 && dep < static_cast<int>(by_id_.size()) &&
          nodes_[by_id_[dep]->dst_rank()] == nodes_[rank_]) {
        // Lands on this node: signalled on the device (its host word is never set).
        device_deps.push_back(dep);
        continue;
      }
      RETURN_IF_ERROR(WaitDependency(t, dep, epoch, deadline));
    }
    RETURN_IF_ERROR(CheckAbort(&t));
    if (options_.device != nullptr) {
      const Info& info = info_[id];
      absl::Status fetched =
          options_.device->FetchSource(t, device_deps, epoch, info.src_ranges,
                                       buffer(t.src_buffer),
                                       absl::Now() + options_.transfer_timeout);
      if (!fetched.ok()) {
        return absl::Status(fetched.code(),
                            absl::StrCat(Describe(t), ": source not fetched from the device: ",
                                         fetched.message()));
      }
      RETURN_IF_ERROR(CheckAbort(&t));
      RETURN_IF_ERROR(WaitPeerReady(t, t.peer, epoch));
      deadline = absl::Now() + options_.transfer_timeout;
    }
    RETURN_IF_ERROR(RunTransfer(t, epoch, deadline));
    done_epoch_[id].store(epoch, std::memory_order_release);
  }
  return absl::OkStatus();
}

absl::Status PlanExecutor::WaitPeerReady(const plan::Transfer& t, int peer, uint64_t epoch) {
  std::atomic<uint64_t>& known = peer_ready_[peer];
  if (known.load(std::memory_order_acquire) >= epoch) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + options_.transfer_timeout;
  absl::Duration poll_interval = absl::Microseconds(20);
  while (true) {
    Completion c = transport_->GetWord(peer, {epoch_ready_region_, 0});
    RETURN_IF_ERROR(transport_->Wait(
        c, deadline, absl::StrCat(Describe(t), " reading the epoch rank ", peer, " started")));
    const uint64_t seen = UcxTransport::WordResult(c);
    if (seen >= epoch) {
      // Channels may race here; keep the highest value seen.
      uint64_t old = known.load(std::memory_order_relaxed);
      while (old < seen && !known.compare_exchange_weak(old, seen, std::memory_order_acq_rel)) {
      }
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(CheckAbort(&t));
    if (absl::Now() > deadline) {
      transport_->MarkPeerFailed(peer, absl::DeadlineExceededError(absl::StrCat(
                                           "stalled: did not start epoch ", epoch,
                                           " by the deadline (rank ", rank_, " waited to send)")));
      return absl::DeadlineExceededError(absl::StrCat(
          Describe(t), ": ", transport_->PeerName(peer), " did not start epoch ", epoch,
          " by the deadline (still at epoch ", seen, "; its host buffers may be in use)"));
    }
    absl::SleepFor(poll_interval);
    poll_interval = std::min(poll_interval * 2, absl::Milliseconds(1));
  }
}

absl::Status PlanExecutor::WaitDependency(const plan::Transfer& t, int dep, uint64_t epoch,
                                          absl::Time deadline) {
  if (dep < 0 || dep >= static_cast<int>(by_id_.size())) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(t), ": unknown dependency ", dep));
  }
  const plan::Transfer& d = *by_id_[dep];
  const bool ran_here = d.rank == rank_ && info_[dep].carried;
  if (!ran_here && d.signal < 0) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(t), ": dependency transfer ", dep,
                                                   " sets no signal to wait on"));
  }
  const int where = d.dst_rank();
  Backoff backoff;
  absl::Duration poll_interval = absl::Microseconds(20);
  uint64_t seen = 0;
  while (true) {
    if (ran_here) {
      seen = done_epoch_[dep].load(std::memory_order_acquire);
    } else if (where == rank_) {
      seen = LoadSignal(signals_region_, d.signal);
    } else {
      // Observable only on another rank: read its signal word.
      Completion c = transport_->GetWord(where, {signals_region_, uint64_t(d.signal) * 8});
      RETURN_IF_ERROR(transport_->Wait(
          c, deadline, absl::StrCat(Describe(t), " reading dependency signal on rank ", where)));
      seen = UcxTransport::WordResult(c);
    }
    if (seen >= epoch) return absl::OkStatus();
    RETURN_IF_ERROR(CheckAbort(&t));
    if (absl::Now() > deadline) {
      // Name the rank that should have delivered: the one running the dependency. It is
      // stalled as far as this group is concerned (teardown then force-closes it).
      if (d.rank != rank_) {
        transport_->MarkPeerFailed(d.rank, absl::DeadlineExceededError(absl::StrCat(
                                               "stalled: transfer ", dep,
                                               " not delivered to rank ", rank_,
                                               " by the deadline")));
      }
      return absl::DeadlineExceededError(absl::StrCat(
          Describe(t), ": dependency transfer ", dep, " (chunk ", d.chunk, ", run by ",
          transport_->PeerName(d.rank), ") not complete by the deadline: signal ", d.signal,
          " on rank ", where, " is ", seen, ", expected ", epoch));
    }
    if (!ran_here && where != rank_) {
      absl::SleepFor(poll_interval);
      poll_interval = std::min(poll_interval * 2, absl::Milliseconds(1));
    } else {
      backoff.Pause();
    }
  }
}

absl::Status PlanExecutor::ReduceLocal(const plan::Transfer& t, char* packed) {
  const plan::BufferSpec& dst = *specs_.at(t.dst_buffer);
  auto* base = static_cast<char*>(buffer(t.dst_buffer));
  absl::MutexLock lock(&reduce_mu_);
  for (const ByteRange& r : info_[t.id].dst_ranges) {
    RETURN_IF_ERROR(HostReduce(dst.dtype, t.reduce, base + r.offset, packed, r.length));
    packed += r.length;
  }
  if (options_.staging == nullptr) return absl::OkStatus();
  return options_.staging->ToDevice(t.dst_buffer, info_[t.id].dst_ranges);
}

absl::Status PlanExecutor::Landed(const plan::Transfer& t) {
  if (options_.staging == nullptr) return absl::OkStatus();
  absl::MutexLock lock(&reduce_mu_);
  return options_.staging->ToDevice(t.dst_buffer, info_[t.id].dst_ranges);
}

absl::Status PlanExecutor::RunTransfer(const plan::Transfer& t, uint64_t epoch,
                                       absl::Time deadline) {
  const Info& info = info_[t.id];
  const std::string what = Describe(t);
  switch (t.kind) {
    case plan::TransferKind::kPush: {
      Completion c;
      if (t.reduce == plan::ReduceOp::kNone) {
        ASSIGN_OR_RETURN(std::vector<Segment> segs, PairRanges(info.src_ranges, info.dst_ranges));
        c = transport_->PutWithSignal(t.peer, buffer_region_.at(t.src_buffer),
                                      buffer_region_.at(t.dst_buffer), std::move(segs),
                                      {signals_region_, uint64_t(t.signal) * 8}, epoch);
      } else {
        c = transport_->PutWithSignal(t.peer, buffer_region_.at(t.src_buffer), stage_region_,
                                      PackRanges(info.src_ranges, info.slot_offset, false),
                                      {stage_signals_region_, uint64_t(info.slot) * 8}, epoch);
      }
      return transport_->Wait(c, deadline, what);
    }
    case plan::TransferKind::kPull: {
      if (t.reduce == plan::ReduceOp::kNone) {
        ASSIGN_OR_RETURN(std::vector<Segment> segs, PairRanges(info.dst_ranges, info.src_ranges));
        RETURN_IF_ERROR(transport_->Wait(
            transport_->Get(t.peer, buffer_region_.at(t.dst_buffer),
                            buffer_region_.at(t.src_buffer), std::move(segs)),
            deadline, what));
        RETURN_IF_ERROR(Landed(t));
      } else {
        RETURN_IF_ERROR(transport_->Wait(
            transport_->Get(t.peer, stage_region_, buffer_region_.at(t.src_buffer),
                            PackRanges(info.src_ranges, info.slot_offset, true)),
            deadline, what));
        auto* stage = static_cast<char*>(transport_->region_address(stage_region_));
        RETURN_IF_ERROR(ReduceLocal(t, stage + info.slot_offset));
      }
      StoreSignal(t.signal, epoch);
      return absl::OkStatus();
    }
    case plan::TransferKind::kLocalCopy: {
      ASSIGN_OR_RETURN(std::vector<Segment> segs, PairRanges(info.src_ranges, info.dst_ranges));
      auto* src = static_cast<char*>(buffer(t.src_buffer));
      auto* dst = static_cast<char*>(buffer(t.dst_buffer));
      const plan::BufferSpec& spec = *specs_.at(t.dst_buffer);
      {
        absl::MutexLock lock(&reduce_mu_);
        for (const Segment& s : segs) {
          RETURN_IF_ERROR(HostReduce(spec.dtype, t.reduce, dst + s.remote_offset,
                                     src + s.local_offset, s.length));
        }
        if (options_.staging != nullptr) {
          RETURN_IF_ERROR(options_.staging->ToDevice(t.dst_buffer, info.dst_ranges));
        }
      }
      StoreSignal(t.signal, epoch);
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unknown transfer kind");
}

absl::Status PlanExecutor::ReceiveIncoming(uint64_t epoch) {
  std::vector<int> pending = incoming_;
  absl::Time deadline = absl::Now() + options_.transfer_timeout;
  Backoff backoff;
  auto* stage = static_cast<char*>(transport_->region_address(stage_region_));
  while (!pending.empty()) {
    bool progressed = false;
    for (size_t i = 0; i < pending.size();) {
      const plan::Transfer& t = *by_id_[pending[i]];
      const Info& info = info_[t.id];
      bool arrived;
      if (t.reduce != plan::ReduceOp::kNone) {
        arrived = LoadSignal(stage_signals_region_, info.slot) >= epoch;
        if (arrived) {
          RETURN_IF_ERROR(ReduceLocal(t, stage + info.slot_offset));
          StoreSignal(t.signal, epoch);
        }
      } else {
        arrived = LoadSignal(signals_region_, t.signal) >= epoch;
        if (arrived && options_.device != nullptr) {
          absl::Status delivered =
              options_.device->Deliver(t, epoch, info.dst_ranges, buffer(t.dst_buffer));
          if (!delivered.ok()) {
            return absl::Status(delivered.code(),
                                absl::StrCat("rank ", rank_, ": transfer ", t.id, " (chunk ",
                                             t.chunk, " from rank ", t.rank,
                                             ") not delivered to the device: ",
                                             delivered.message()));
          }
        } else if (arrived) {
          RETURN_IF_ERROR(Landed(t));
        }
      }
      if (arrived) {
        pending[i] = pending.back();
        pending.pop_back();
        progressed = true;
      } else {
        ++i;
      }
    }
    if (progressed) {
      deadline = absl::Now() + options_.transfer_timeout;
      backoff.Reset();
      continue;
    }
    if (pending.empty()) break;
    RETURN_IF_ERROR(CheckAbort(nullptr));
    if (absl::Now() > deadline) {
      const plan::Transfer& t = *by_id_[*std::min_element(pending.begin(), pending.end())];
      transport_->MarkPeerFailed(t.rank, absl::DeadlineExceededError(absl::StrCat(
                                             "stalled: transfer ", t.id, " not delivered to rank ",
                                             rank_, " by the deadline")));
      return absl::DeadlineExceededError(absl::StrCat(
          "rank ", rank_, ": ", pending.size(), " incoming chunk(s) missing at the deadline; "
          "first: transfer ", t.id, " (chunk ", t.chunk, ") from ", transport_->PeerName(t.rank),
          ", signal ", t.signal, " below epoch ", epoch));
    }
    backoff.Pause();
  }
  return absl::OkStatus();
}

}  // namespace syncopate::ucx
