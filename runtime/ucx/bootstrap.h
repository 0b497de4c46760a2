// Bootstrap: the out-of-band exchange a group of ranks uses before UCX can talk — worker
// addresses, remote keys, barriers. An interface: tests use TcpBootstrap (tcp_bootstrap.h);
// the daemon's control plane implements it later over its own peer connections.
//
// Thread-safety: implementations need not be thread-safe; one thread drives a bootstrap at a
// time, and every rank calls the collective operations in the same order.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace syncopate::ucx {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Every rank contributes `mine`; returns every rank's contribution indexed by rank. Fails by
  // `deadline` when a rank does not contribute, naming it where the implementation knows it.
  virtual absl::StatusOr<std::vector<std::string>> AllGather(absl::string_view mine,
                                                             absl::Time deadline) = 0;

  virtual absl::Status Barrier(absl::Time deadline) {
    return AllGather({}, deadline).status();
  }
};

}  // namespace syncopate::ucx
