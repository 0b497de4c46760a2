// The daemon's services inside the calling process, with no socket: what Client::Embedded runs.
// The one server header the client library includes (the layering check enforces it), so the
// client depends on this narrow surface, not on the daemon's internals (config, services,
// registries).
//
// Thread-safety: Channel() may be called from any thread; the daemon shuts down (zero grace)
// when the last reference goes.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace syncopate::server {

class Daemon;

struct EmbeddedDaemonOptions {
  std::string node_name = "embedded";
  std::string cache_dir;  // "" = memory only
  int compile_threads = 4;
  int64_t max_wait_ms = 600000;
  std::string log_level;  // "" leaves spdlog's (process-wide) level alone
};

class EmbeddedDaemon {
 public:
  static absl::StatusOr<std::shared_ptr<EmbeddedDaemon>> Start(
      const EmbeddedDaemonOptions& options);
  ~EmbeddedDaemon();
  EmbeddedDaemon(const EmbeddedDaemon&) = delete;
  EmbeddedDaemon& operator=(const EmbeddedDaemon&) = delete;

  // An in-process channel to the daemon's services.
  std::shared_ptr<grpc::Channel> Channel(const grpc::ChannelArguments& args);

 private:
  explicit EmbeddedDaemon(std::unique_ptr<Daemon> daemon);
  std::unique_ptr<Daemon> daemon_;
};

}  // namespace syncopate::server
