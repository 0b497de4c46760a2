// One daemon instance: the services of syncopated on two gRPC servers, one on a Unix socket
// (local clients) and in-process, one on TCP (peer daemons; token checked before a message is
// read, its own message limit, TLS when configured), each with grpc.health.v1 and server
// reflection; or in-process only, for the client library's embedded mode.
//
// Shutdown drains: health goes NOT_SERVING, new calls get Unavailable, waiting rendezvous and
// agreement calls fail at once with Unavailable naming this daemon, and calls in flight (compiles)
// get `grace` to finish before gRPC cancels them.
//
// Thread-safety: Shutdown and Wait may be called from any thread; Shutdown is idempotent.
#pragma once

#include <grpcpp/grpcpp.h>

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/config.h"
#include "server/memory_trimmer.h"
#include "server/service_env.h"

namespace syncopate::server {

class CompilerService;
class DaemonService;
class RendezvousService;

class Daemon {
 public:
  // Binds the configured Unix socket and TCP address (both optional) and starts serving.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(DaemonConfig config);
  ~Daemon();  // Shutdown(zero grace) if not done

  // A channel to this daemon's services without any socket (embedded mode, tests).
  std::shared_ptr<grpc::Channel> InProcessChannel(const grpc::ChannelArguments& args);

  int tcp_port() const { return env_->tcp_port(); }
  std::string name() const { return env_->daemon_name(); }
  ServiceEnv& env() { return *env_; }

  void Shutdown(absl::Duration grace);
  void Wait();

 private:
  Daemon() = default;
  // Start's steps: the services over env_ (and the compile backend behind Compile), then the
  // local server (Unix socket, in-process channel), then the TCP server; its bound port.
  void CreateServices(const DaemonConfig& config);
  absl::Status ServeLocally(const DaemonConfig& config, grpc::ResourceQuota& quota);
  absl::StatusOr<int> ServeTcp(const DaemonConfig& config, grpc::ResourceQuota& quota);

  std::unique_ptr<ServiceEnv> env_;
  std::unique_ptr<RendezvousService> rendezvous_;
  std::unique_ptr<CompilerService> compiler_;
  std::unique_ptr<DaemonService> stats_;
  // Both servers (the TCP one only when listening).
  std::vector<grpc::Server*> servers();

  std::string socket_path_;
  ino_t socket_inode_ = 0;  // of the socket we bound: shutdown unlinks only that
  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<MemoryTrimmer> trimmer_;
  // Last: stopped before the services they use go. server_: Unix socket and in-process;
  // tcp_server_: TCP (see Start for why two).
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> tcp_server_;
};

}  // namespace syncopate::server
