// CallbackRendezvous: a Rendezvous over the caller's own allgather (e.g. torch.distributed's,
// through the ops' GroupConfig::bootstrap), for processes that cannot meet on Unix sockets.
// Bytes travel through the callback; a file descriptor travels as (pid, fd number), and each
// receiver duplicates it from the sender with pidfd_getfd(2). That needs ptrace permission over
// the sender: same user, and where Yama's ptrace_scope is 1 the sender's consent, which Create
// gives (prctl PR_SET_PTRACER_ANY); ptrace_scope 2 or 3 needs CAP_SYS_PTRACE. Each AllGather
// ends with a second callback round, so no sender closes an fd before every receiver has its
// copy; a rank that could not take its copies says so in that round, and every rank fails
// naming it (none waits for it). A callback that fails or returns the wrong number of messages,
// and a peer whose message is from another call (a rank calling the collectives in another
// order), are errors
// naming the call and the rank. The callback bounds its own waits.
//
// Thread-safety: as Rendezvous.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cuda/rendezvous.h"

namespace syncopate::cuda {

// Every rank's `mine`, indexed by rank, or an error; called by every rank in the same order.
using BootstrapAllGather =
    std::function<absl::StatusOr<std::vector<std::string>>(std::string_view mine)>;

class CallbackRendezvous : public Rendezvous {
 public:
  static absl::StatusOr<std::unique_ptr<CallbackRendezvous>> Create(std::string group_id, int rank,
                                                                    int world_size,
                                                                    BootstrapAllGather allgather);

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  const std::string& group_id() const override { return group_id_; }
  absl::StatusOr<std::vector<PeerMessage>> AllGather(std::string_view bytes,
                                                     std::span<const int> fds) override;
  absl::Status Barrier() override;

 private:
  CallbackRendezvous(std::string group_id, int rank, int world_size, BootstrapAllGather allgather)
      : group_id_(std::move(group_id)),
        rank_(rank),
        world_size_(world_size),
        allgather_(std::move(allgather)) {}
  // One callback round of `body` under this call's header; every rank's body.
  absl::StatusOr<std::vector<std::string>> Round(std::string_view kind, std::string_view body);
  absl::Status Receive(int q, const std::string& body, PeerMessage& out);

  std::string group_id_;
  int rank_ = 0;
  int world_size_ = 1;
  BootstrapAllGather allgather_;
  uint64_t sequence_ = 0;  // collective call number, checked in every peer's message
};

}  // namespace syncopate::cuda
