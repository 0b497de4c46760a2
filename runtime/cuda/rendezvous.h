// Rendezvous: how the ranks of one node exchange bytes and file descriptors (the symmetric
// memory's cuMemCreate handles) while forming a group and later. Two implementations:
// NodeRendezvous (Unix sockets, SCM_RIGHTS) and CallbackRendezvous (the caller's own allgather
// for bytes, pidfd_getfd for the fds). No CUDA.
//
// Thread-safety: one thread at a time per Rendezvous; every rank must call the collective
// methods (AllGather, Barrier) in the same order.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/scoped_fd.h"

namespace syncopate::cuda {

struct PeerMessage {
  std::string bytes;
  std::vector<ScopedFd> fds;
};

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual const std::string& group_id() const = 0;
  // Sends (bytes, fds) to every peer and returns every rank's message, indexed by rank (this
  // rank's slot holds a copy of its own bytes and no fds). The receivers get their own copies of
  // the fds; the caller keeps (and may close) its own once this returns.
  virtual absl::StatusOr<std::vector<PeerMessage>> AllGather(std::string_view bytes,
                                                             std::span<const int> fds = {}) = 0;
  virtual absl::Status Barrier() = 0;
};

}  // namespace syncopate::cuda
