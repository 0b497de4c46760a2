// What every service of one daemon shares: configuration, the group registry, channels to peer
// daemons, counters, and the per-call checks (auth, deadlines) done at the RPC boundary.
//
// Thread-safety: immutable after construction except the atomics and the thread-safe members
// (GroupRegistry, PeerChannels).
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/config.h"
#include "server/group_registry.h"
#include "server/plan_store.h"
#include "server/peer_channels.h"
#include "server/request_checks.h"

namespace syncopate::server {

inline constexpr char kTokenMetadataKey[] = "x-syncopate-token";

struct Counters {
  std::atomic<uint64_t> compiles{0};
  std::atomic<uint64_t> compile_cache_hits{0};
  std::atomic<uint64_t> compile_errors{0};
  std::atomic<uint64_t> forwarded_calls{0};
  std::atomic<uint64_t> rejected_calls{0};
  std::atomic<uint64_t> compile_calls_held{0};  // CompilerService::Call objects alive
};

class ServiceEnv {
 public:
  explicit ServiceEnv(DaemonConfig config);

  const DaemonConfig& config() const { return config_; }
  // "node@host:port" once the TCP port is bound ("node@local" without TCP); used in messages
  // and as via_daemon.
  std::string daemon_name() const;
  void set_daemon_name(std::string name);
  const RequestLimits& limits() const { return limits_; }
  GroupRegistry& registry() { return registry_; }
  PeerChannels& peers() { return peers_; }
  Counters& counters() { return counters_; }
  // Plans seen here by hash (Agree answers, Compile requests), for Compile by plan_hash.
  PlanStore& plans() { return plans_; }
  absl::Time started() const { return started_; }

  // The TCP port this daemon listens on (0 before Start or without TCP); set once at start.
  void set_tcp_port(int port) { tcp_port_ = port; }
  int tcp_port() const { return tcp_port_; }
  bool draining() const { return draining_.load(); }
  void set_draining() { draining_ = true; }

  // OK for local callers (Unix socket, in-process); for TCP callers the token must match.
  absl::Status Authorize(const grpc::ServerContextBase& ctx) const;
  // When this daemon must answer a wait: the request's timeout (or default_wait_ms), capped by
  // max_wait_ms and shortly before the call's own deadline so the caller gets our message.
  absl::Time WaitDeadline(const grpc::ServerContextBase& ctx, uint32_t timeout_ms) const;
  // Deadline for a call forwarded on behalf of `ctx`: a little before ctx's own.
  std::chrono::system_clock::time_point ForwardDeadline(const grpc::CallbackServerContext& ctx,
                                                        uint32_t timeout_ms) const;
  // True when `address` (host:port) names this daemon's own TCP listener.
  bool IsSelf(const std::string& address) const;

 private:
  const DaemonConfig config_;
  mutable absl::Mutex name_mu_;
  std::string daemon_name_ ABSL_GUARDED_BY(name_mu_);
  const RequestLimits limits_;
  const absl::Time started_;
  std::atomic<int> tcp_port_{0};
  std::atomic<bool> draining_{false};
  Counters counters_;
  PlanStore plans_;
  PeerChannels peers_;
  GroupRegistry registry_;
};

}  // namespace syncopate::server
