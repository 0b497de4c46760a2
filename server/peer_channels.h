// Channels from this daemon to peer daemons (the leader of a group), one per address, reused.
// Calls on them carry the shared token; TLS when the daemon has TLS configured; keepalive so a
// peer that dies silently is noticed within peer_timeout_ms.
//
// Bounded: the leader address comes from the request, so a daemon that lives for months meets
// any number of them, and each cached channel keeps a connection and its keepalive pings. A
// channel no call holds is dropped once idle for `idle` and, beyond `max_cached` channels, the
// least recently used one no call holds is dropped first. A call holds its stub (shared_ptr) for
// as long as it runs, so nothing in use is dropped.
//
// Thread-safety: thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/config.h"
#include "syncopate/v1/service.grpc.pb.h"

namespace syncopate::server {

class PeerChannels {
 public:
  struct Bounds {
    absl::Duration idle = absl::Minutes(10);
    size_t max_cached = 64;
  };
  explicit PeerChannels(const DaemonConfig& config) : PeerChannels(config, Bounds()) {}
  PeerChannels(const DaemonConfig& config, Bounds bounds);

  // The stub for `address`, cached; keep it for as long as a call made on it runs.
  std::shared_ptr<v1::Rendezvous::Stub> Rendezvous(const std::string& address);
  // Adds the token to a call's metadata.
  void Prepare(grpc::ClientContext& ctx) const;
  // Channels cached now (for tests and stats).
  size_t cached() const;

 private:
  struct Cached {
    std::shared_ptr<v1::Rendezvous::Stub> stub;
    absl::Time last_used;
  };
  // Drops the channels no call holds that idled past bounds_.idle, then, while more than
  // `keep` remain, the least recently used one no call holds.
  void EvictLocked(absl::Time now, size_t keep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Bounds bounds_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  grpc::ChannelArguments args_;
  std::string token_;
  mutable absl::Mutex mu_;
  std::map<std::string, Cached> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace syncopate::server
