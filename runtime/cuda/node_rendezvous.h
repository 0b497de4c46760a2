// NodeRendezvous: connects the ranks of one node over Unix-domain sockets and exchanges bytes and
// file descriptors (SCM_RIGHTS) between them. The symmetric-memory layer uses it to share
// cuMemCreate handles; it has no CUDA dependency and is tested without a GPU.
//
// Addressing: rank r of group G listens on the abstract socket "\0syncopate.<G>.<r>" (Linux), or,
// when a rendezvous directory is given, on "<dir>/<G>.<r>.sock". Every rank connects to each lower
// rank and accepts each higher rank, so every pair has one connection, kept open for later
// exchanges. Every step has a deadline: a rank that never shows up, or dies, makes the others fail
// with an error naming it instead of hanging.
//
// Thread-safety: a NodeRendezvous is used by one thread at a time; every rank must call the
// collective methods (AllGather, Barrier) in the same order.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/base/scoped_fd.h"
#include "runtime/cuda/rendezvous.h"

namespace syncopate::cuda {

struct RendezvousOptions {
  std::string group_id;  // same on every rank; letters, digits, '.', '_', '-' (at most 64)
  int rank = 0;
  int world_size = 1;
  std::string directory;  // empty: abstract socket names
  absl::Duration timeout = absl::Seconds(30);  // for forming the group and for each exchange
};

class NodeRendezvous : public Rendezvous {
 public:
  // Forms the group: returns when every rank is connected, or DeadlineExceeded naming the ranks
  // that did not connect within options.timeout.
  static absl::StatusOr<std::unique_ptr<NodeRendezvous>> Connect(const RendezvousOptions& options);
  ~NodeRendezvous() override;

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  const std::string& group_id() const override { return options_.group_id; }

  // Sends (bytes, fds) to every peer and returns every rank's message, indexed by rank (this
  // rank's slot holds a copy of its own bytes and no fds). The fds are duplicated by the kernel;
  // the caller keeps its own. At most 250 fds per call.
  absl::StatusOr<std::vector<PeerMessage>> AllGather(std::string_view bytes,
                                                     std::span<const int> fds = {}) override;
  absl::Status Barrier() override;

 private:
  explicit NodeRendezvous(RendezvousOptions options) : options_(std::move(options)) {}
  RendezvousOptions options_;
  std::vector<ScopedFd> peers_;  // connected socket per rank (own slot invalid)
  uint64_t sequence_ = 0;         // collective call number, checked on every message
};

}  // namespace syncopate::cuda
