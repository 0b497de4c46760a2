// UcxTransport, peer failures (see transport.h, "Faults"): how errors name a peer, the per-peer
// failure state every operation checks (MarkPeerFailed, PeerStatus, FirstFailure) and the
// endpoint error handler that tells a peer's exit or shutdown from a broken connection.
#include <atomic>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/ucx/handles.h"
#include "runtime/ucx/transport.h"
#include "runtime/ucx/transport_internal.h"
#include "spdlog/spdlog.h"

namespace syncopate::ucx {

namespace {

// How long an endpoint error of a watched same-host peer waits for the peer's pidfd. A killed
// process's sockets close before the kernel reports its exit (UCX saw the error up to ~0.4 ms
// earlier in tests), so without a grace the error would name only the symptom. Stalls the
// progress thread only when the peer is alive (a dropped connection), once per peer.
constexpr absl::Duration kExitGrace = absl::Milliseconds(20);

}  // namespace

// When the peer's process has exited, say so: that is the cause, UCX's status ("Endpoint
// timeout", "Connection reset by remote peer") only its symptom.
void OnEndpointError(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  auto* pc = static_cast<PeerConn*>(arg);
  absl::Status why = UcsError(status, "endpoint error");
  const bool said_goodbye =
      pc->goodbye != nullptr &&
      std::atomic_ref<uint64_t>(*pc->goodbye).load(std::memory_order_acquire) != 0;
  // While we close our own endpoints every error is the end of the connection, even a peer that
  // crashed in that window: nothing of ours depends on it any more, so nothing is reported.
  if (said_goodbye || (pc->closing != nullptr && *pc->closing)) {
    pc->transport->MarkPeerFailed(
        pc->rank,
        absl::UnavailableError(said_goodbye ? "shut down its transport" : "connection closed"),
        /*expected=*/true);
    return;
  }
  // An already failed peer (dropped by us, say) keeps its first reason: no grace to wait out.
  if (pc->liveness != nullptr && pc->transport->PeerStatus(pc->rank).ok() &&
      pc->liveness->HasExited(pc->rank, kExitGrace)) {
    why = absl::UnavailableError(absl::StrCat("process exited (", why.message(), ")"));
  }
  pc->transport->MarkPeerFailed(pc->rank, why);
}

std::string UcxTransport::PeerName(int peer) const {
  if (peer >= 0 && peer < static_cast<int>(labels_.size())) {
    return absl::StrCat("rank ", peer, " (", labels_[peer], ")");
  }
  return absl::StrCat("rank ", peer);
}

void UcxTransport::MarkPeerFailed(int peer, const absl::Status& why, bool expected) {
  absl::MutexLock lock(&fail_mu_);
  if (peer < 0 || peer >= static_cast<int>(peer_status_.size()) || !peer_status_[peer].ok()) {
    return;
  }
  absl::Status s(why.code() == absl::StatusCode::kOk ? absl::StatusCode::kUnknown : why.code(),
                 absl::StrCat(PeerName(peer), expected ? ": " : " failed: ", why.message()));
  if (expected) {
    spdlog::debug("rank {}: {}", rank_, std::string(s.message()));
  } else {
    spdlog::warn("rank {}: {}", rank_, std::string(s.message()));
    num_broken_.fetch_add(1, std::memory_order_release);
  }
  peer_status_[peer] = s;
  if (!first_failure_.has_value()) first_failure_.emplace(peer, s);
  num_failed_.fetch_add(1, std::memory_order_release);
}

absl::Status UcxTransport::PeerStatus(int peer) const {
  if (num_failed_.load(std::memory_order_acquire) == 0) return absl::OkStatus();
  absl::MutexLock lock(&fail_mu_);
  if (peer < 0 || peer >= static_cast<int>(peer_status_.size())) return absl::OkStatus();
  return peer_status_[peer];
}

std::optional<std::pair<int, absl::Status>> UcxTransport::FirstFailure() const {
  if (num_failed_.load(std::memory_order_acquire) == 0) return std::nullopt;
  absl::MutexLock lock(&fail_mu_);
  return first_failure_;
}

}  // namespace syncopate::ucx
