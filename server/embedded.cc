// The in-process daemon of Client::Embedded; see embedded.h.
#include "server/embedded.h"

#include "server/daemon.h"
#include "server/logging.h"

namespace syncopate::server {

absl::StatusOr<std::shared_ptr<EmbeddedDaemon>> EmbeddedDaemon::Start(
    const EmbeddedDaemonOptions& options) {
  DaemonConfig config;
  config.node_name = options.node_name;
  config.unix_socket = "";
  config.listen = "";
  config.cache_dir = options.cache_dir;
  config.compile_threads = options.compile_threads;
  config.max_wait_ms = options.max_wait_ms;
  if (!options.log_level.empty()) {
    if (absl::Status s = SetLogLevel(options.log_level); !s.ok()) {
      return absl::InvalidArgumentError(s.message());
    }
  }
  absl::StatusOr<std::unique_ptr<Daemon>> daemon = Daemon::Start(config);
  if (!daemon.ok()) return daemon.status();
  return std::shared_ptr<EmbeddedDaemon>(new EmbeddedDaemon(*std::move(daemon)));
}

EmbeddedDaemon::EmbeddedDaemon(std::unique_ptr<Daemon> daemon) : daemon_(std::move(daemon)) {}
EmbeddedDaemon::~EmbeddedDaemon() = default;

std::shared_ptr<grpc::Channel> EmbeddedDaemon::Channel(const grpc::ChannelArguments& args) {
  return daemon_->InProcessChannel(args);
}

}  // namespace syncopate::server
