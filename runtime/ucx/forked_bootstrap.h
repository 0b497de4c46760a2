// Bootstrap for ranks forked (without exec) from one process: rank 0 starts the TCP hub and hands
// its address to the other ranks through a pipe made before the fork.
//
// Why the hub does not run in the forking process, as in the exec-based UCX tests: forking while
// another thread of the parent (the hub's, just started) is inside an mmap that UCX's libucm
// intercepts leaves libucm's event lock (a pthread rwlock) read-held in the child, and the
// child's ucp_init then waits for it forever (UcxTransport::Create hung in about 1 in 3 fresh
// processes in a standalone repro). So the forking process stays single-threaded when it forks.
//
// Thread-safety: Create before the fork; each rank calls Join once, from one thread.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/base/scoped_fd.h"
#include "runtime/ucx/tcp_bootstrap.h"

namespace syncopate::ucx {

class ForkedBootstrap {
 public:
  static absl::StatusOr<ForkedBootstrap> Create();

  // Rank 0 starts the hub (kept in `hub` for the rank's life) and publishes its address to the
  // other world_size - 1 ranks; they wait for it until `deadline`. Then every rank connects.
  absl::StatusOr<std::unique_ptr<TcpBootstrap>> Join(int rank, int world_size, absl::Time deadline,
                                                     std::unique_ptr<TcpBootstrapHub>& hub) const;

 private:
  ScopedFd read_end_, write_end_;
};

}  // namespace syncopate::ucx
