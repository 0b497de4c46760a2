// UcxTransport, teardown (see transport.h): Shutdown says goodbye to every healthy peer (a word
// in its memory, so it reads our endpoint closing as a shutdown), closes every endpoint (flushing
// or forced) under one time bound, cancels operations UCX will never complete and releases the
// worker and context; DropConnections force-closes every endpoint at once.
#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/ucx/transport.h"
#include "runtime/ucx/transport_internal.h"
#include "spdlog/spdlog.h"

namespace syncopate::ucx {

namespace {

// How long Shutdown waits for peers to acknowledge its goodbye word: a healthy peer's worker
// does within microseconds to milliseconds; one that does not is treated as gone.
constexpr absl::Duration kGoodbyeWait = absl::Seconds(1);

// Sets this rank's word in the goodbye region of every `healthy` peer and waits (at most
// `timeout`) until each put is flushed, so a peer that sees our endpoint close next knows it was
// a shutdown. Returns, by rank, whose flush completed. Worker thread.
std::vector<bool> SayGoodbye(ucp_worker_h worker,
                             const std::vector<std::unique_ptr<PeerConn>>& peers,
                             const std::vector<bool>& healthy, int region, int rank,
                             absl::Duration timeout) {
  // Static: the put's request is freed before the put completes, so its buffer must outlive us.
  static constexpr uint64_t kGoodbye = 1;
  std::vector<bool> acknowledged(peers.size(), false);
  std::vector<std::pair<int, void*>> pending;
  for (const auto& pc : peers) {
    if (pc == nullptr || pc->closed || !healthy[pc->rank] || region < 0 ||
        region >= static_cast<int>(pc->regions.size())) {
      continue;
    }
    const RemoteRegion& rr = pc->regions[region];
    ucp_request_param_t none = {};
    ucs_status_ptr_t put = ucp_put_nbx(pc->ep.get(), &kGoodbye, sizeof kGoodbye,
                                       rr.address + sizeof(uint64_t) * rank, rr.rkey.get(), &none);
    if (UCS_PTR_IS_ERR(put)) continue;
    if (put != nullptr) ucp_request_free(put);  // the flush below completes after it
    ucs_status_ptr_t flush = ucp_ep_flush_nbx(pc->ep.get(), &none);
    if (flush == nullptr) {
      acknowledged[pc->rank] = true;
    } else if (!UCS_PTR_IS_ERR(flush)) {
      pending.emplace_back(pc->rank, flush);
    }
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (!pending.empty() && absl::Now() <= deadline) {
    if (ucp_worker_progress(worker) == 0) std::this_thread::yield();
    for (auto& [peer, r] : pending) {
      if (r == nullptr) continue;
      ucs_status_t st = ucp_request_check_status(r);
      if (st == UCS_INPROGRESS) continue;
      acknowledged[peer] = st == UCS_OK;
      ucp_request_free(r);
      r = nullptr;
    }
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [](const auto& p) { return p.second == nullptr; }),
                  pending.end());
  }
  for (auto& [peer, r] : pending) ucp_request_free(r);  // completes when the worker goes
  return acknowledged;
}

// Closes the given peers' endpoints under one time bound; worker thread. Returns the peers
// whose close did not finish in time.
std::vector<int> CloseEndpoints(ucp_worker_h worker,
                                const std::vector<std::pair<PeerConn*, bool>>& eps,
                                absl::Duration timeout) {
  std::vector<std::pair<int, void*>> pending;
  for (const auto& [pc, force] : eps) {
    pc->regions.clear();  // remote keys go before their endpoint
    pc->closed = true;
    ucs_status_ptr_t r = pc->ep.StartClose(force);
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) pending.emplace_back(pc->rank, r);
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    bool all_done = true;
    for (auto& [rank, r] : pending) {
      if (r != nullptr && ucp_request_check_status(r) != UCS_INPROGRESS) {
        ucp_request_free(r);
        r = nullptr;
      }
      all_done &= r == nullptr;
    }
    if (all_done || absl::Now() > deadline) break;
    if (ucp_worker_progress(worker) == 0) std::this_thread::yield();
  }
  std::vector<int> late;
  for (auto& [rank, r] : pending) {
    if (r != nullptr) {
      ucp_request_free(r);  // UCX completes the close when the worker is destroyed
      late.push_back(rank);
    }
  }
  return late;
}

}  // namespace

void UcxTransport::DropConnections() {
  for (int r = 0; r < world_size_; ++r) {
    if (r != rank_) {
      MarkPeerFailed(
          r, absl::UnavailableError(absl::StrCat("rank ", rank_, " dropped its connections")));
    }
  }
  absl::Status s = impl_->RunSync(
      [this]() -> absl::Status {
        std::vector<std::pair<PeerConn*, bool>> eps;
        for (auto& pc : impl_->peers) {
          if (pc != nullptr && !pc->closed) eps.emplace_back(pc.get(), true);
        }
        CloseEndpoints(impl_->worker.get(), eps, options_.teardown_timeout);
        return absl::OkStatus();
      },
      absl::Now() + options_.teardown_timeout + absl::Seconds(5));
  if (!s.ok()) spdlog::warn("rank {}: dropping connections: {}", rank_, s.ToString());
}

absl::Status UcxTransport::Shutdown() {
  absl::MutexLock lock(&impl_->shutdown_mu);
  if (impl_->shutdown_status.has_value()) return *impl_->shutdown_status;
  if (!impl_->thread.joinable()) {
    impl_->shutdown_status = absl::OkStatus();
    return absl::OkStatus();
  }
  absl::Status result =
      impl_->RunSync([this] { return TeardownOnWorker(); },
                     absl::Now() + kGoodbyeWait + options_.teardown_timeout + absl::Seconds(10));
  impl_->stop.store(true, std::memory_order_release);
  impl_->thread.join();
  // Commands posted while shutting down never ran; finish them so no waiter waits forever.
  absl::MutexLock qlock(&impl_->mu);
  for (auto& fn : impl_->queue) fn();  // each sees `closing` and fails its operation
  impl_->queue.clear();
  impl_->shutdown_status = result;
  return result;
}

absl::Status UcxTransport::TeardownOnWorker() {
  Impl& im = *impl_;
  im.closing = true;
  // Peers exit as they finish, so from here on an exit is expected and affects nothing of ours:
  // stop watching (on this thread, so no check runs after this point) and let neither a failure
  // nor a log come of it. A peer that exited before we got here (it finished first) is already
  // marked failed, which only makes the closes below forced: the right thing for an endpoint
  // whose other end is gone (a flush close could wait on it until teardown_timeout), and a
  // forced close completes locally, so Shutdown still returns ok. Only closes that do not finish
  // in time make it fail, never failed peers.
  im.liveness = PeerLiveness();
  // Goodbye to every healthy peer (only PEER mode reports closed endpoints at all); one that does
  // not acknowledge within kGoodbyeWait is stopped or gone, and gets a forced close below instead
  // of a flush that could wait the whole teardown_timeout on it.
  std::vector<bool> healthy(im.peers.size(), false);
  for (size_t r = 0; r < im.peers.size(); ++r) {
    healthy[r] = im.peers[r] != nullptr && PeerStatus(static_cast<int>(r)).ok();
  }
  std::vector<bool> acknowledged(im.peers.size(), false);
  if (options_.error_handling == ErrorHandling::kPeer) {
    acknowledged =
        SayGoodbye(im.worker.get(), im.peers, healthy, goodbye_region_, rank_, kGoodbyeWait);
  }
  std::vector<std::pair<PeerConn*, bool>> eps;
  for (auto& pc : im.peers) {
    if (pc == nullptr || pc->closed) continue;
    // Force when flushing is pointless or could wait on a dead or stopped peer: this peer is
    // gone (failed, shut down, or silent to our goodbye), the group is broken (a failure other
    // than a peer's shutdown), or UCX cannot detect failures.
    eps.emplace_back(pc.get(), !healthy[pc->rank] || !acknowledged[pc->rank] ||
                                   num_broken_.load() > 0 ||
                                   options_.error_handling == ErrorHandling::kNone);
  }
  std::vector<int> late = CloseEndpoints(im.worker.get(), eps, options_.teardown_timeout);
  // Requests UCX did not complete (a failed peer's) will never call back now.
  for (Completion::State* s : std::vector<Completion::State*>(im.live.begin(), im.live.end())) {
    Finish(s, absl::CancelledError(absl::StrCat("rank ", rank_, " -> ", PeerName(s->peer),
                                                ": transport shut down")));
  }
  im.peers.clear();
  im.regions.clear();
  im.worker = Worker();
  im.context = Context();
  im.stop.store(true, std::memory_order_release);
  if (!late.empty()) {
    return absl::DeadlineExceededError(
        absl::StrCat("rank ", rank_, ": closing endpoints to ", late.size(),
                     " peer(s) (first: ", PeerName(late.front()), ") did not finish within ",
                     absl::FormatDuration(options_.teardown_timeout), "; released anyway"));
  }
  return absl::OkStatus();
}

}  // namespace syncopate::ucx
