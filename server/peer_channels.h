// Channels from this daemon to peer daemons (the leader of a group), one per address, reused.
// Calls on them carry the shared token; TLS when the daemon has TLS configured; keepalive so a
// peer that dies silently is noticed within peer_timeout_ms.
//
// Thread-safety: thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/config.h"
#include "syncopate/v1/service.grpc.pb.h"

namespace syncopate::server {

class PeerChannels {
 public:
  explicit PeerChannels(const DaemonConfig& config);

  v1::Rendezvous::Stub* Rendezvous(const std::string& address);
  // Adds the token to a call's metadata.
  void Prepare(grpc::ClientContext& ctx) const;

 private:
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  grpc::ChannelArguments args_;
  std::string token_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<v1::Rendezvous::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace syncopate::server
