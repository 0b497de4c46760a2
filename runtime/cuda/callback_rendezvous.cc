// The caller's allgather plus pidfd_getfd; see callback_rendezvous.h.
#include "runtime/cuda/callback_rendezvous.h"

#include <errno.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/base/status_macros.h"

namespace syncopate::cuda {
namespace {

// "<magic> <group> <sequence> <kind>\n<body>": what every rank checks of every peer's message.
constexpr absl::string_view kMagic = "syncopate.rendezvous.1";

// This abseil's string_view is its own type, not std's.
absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// A copy of `fd` of process `pid`, or an error saying why (permission is the usual one).
absl::StatusOr<ScopedFd> FetchFd(int pid, int fd) {
  ScopedFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd.valid()) {
    return absl::ErrnoToStatus(errno, absl::StrCat("pidfd_open(", pid, ")"));
  }
  ScopedFd copy(static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd.get(), fd, 0)));
  if (!copy.valid()) {
    const int err = errno;
    return absl::ErrnoToStatus(
        err, absl::StrCat("pidfd_getfd(pid ", pid, ", fd ", fd, ")",
                          err == EPERM ? " (needs ptrace permission over the peer: same user, "
                                         "and CAP_SYS_PTRACE where Yama's ptrace_scope is 2 or 3)"
                                       : ""));
  }
  return copy;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CallbackRendezvous>> CallbackRendezvous::Create(
    std::string group_id, int rank, int world_size, BootstrapAllGather allgather) {
  if (!allgather) return absl::InvalidArgumentError("bootstrap: no allgather callback");
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("bootstrap: rank ", rank, " of world size ", world_size));
  }
  // Let peers (not only our descendants) duplicate our fds where Yama restricts ptrace; EINVAL
  // without Yama, which is fine.
  (void)::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  return std::unique_ptr<CallbackRendezvous>(
      new CallbackRendezvous(std::move(group_id), rank, world_size, std::move(allgather)));
}

absl::StatusOr<std::vector<std::string>> CallbackRendezvous::Round(std::string_view kind,
                                                                   std::string_view body) {
  const std::string header = absl::StrCat(kMagic, " ", group_id_, " ", sequence_, " ", Absl(kind));
  const std::string what = absl::StrCat("bootstrap call ", sequence_, " (", Absl(kind), ")");
  absl::StatusOr<std::vector<std::string>> all = allgather_(absl::StrCat(header, "\n", Absl(body)));
  if (!all.ok()) {
    return absl::Status(
        all.status().code(),
        absl::StrCat(what, ": the allgather callback failed: ", all.status().message()));
  }
  if (static_cast<int>(all->size()) != world_size_) {
    return absl::InternalError(absl::StrCat(what, ": the allgather callback returned ", all->size(),
                                            " messages for ", world_size_, " ranks"));
  }
  std::vector<std::string> bodies;
  bodies.reserve(all->size());
  for (int q = 0; q < world_size_; ++q) {
    const std::string& m = (*all)[q];
    const size_t newline = m.find('\n');
    if (newline == std::string::npos || std::string_view(m).substr(0, newline) != header) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": rank ", q, " sent '",
          absl::string_view(m).substr(0, std::min(newline, m.size())),
          "' (another group or another call: every rank must make the same calls in the same "
          "order)"));
    }
    bodies.push_back(m.substr(newline + 1));
  }
  ++sequence_;
  return bodies;
}

absl::StatusOr<std::vector<PeerMessage>> CallbackRendezvous::AllGather(std::string_view bytes,
                                                                       std::span<const int> fds) {
  // "<pid> <fd>,<fd>,...\n<bytes>"
  const std::string body =
      absl::StrCat(static_cast<int>(::getpid()), " ", absl::StrJoin(fds.begin(), fds.end(), ","),
                   "\n", Absl(bytes));
  ASSIGN_OR_RETURN(std::vector<std::string> bodies, Round("allgather", body));
  std::vector<PeerMessage> out(world_size_);
  absl::Status fetched = absl::OkStatus();
  for (int q = 0; q < world_size_ && fetched.ok(); ++q) {
    fetched = Receive(q, bodies[q], out[q]);
  }
  // Nobody returns (and may close its fds) before every rank has its copies: a round every rank
  // makes, failed or not, carrying its failure so that no peer waits on it.
  const std::string failure(fetched.ok() ? "" : fetched.message());
  ASSIGN_OR_RETURN(std::vector<std::string> outcomes, Round("fetched", failure));
  if (!fetched.ok()) return fetched;
  for (int q = 0; q < world_size_; ++q) {
    if (!outcomes[q].empty()) {
      return absl::AbortedError(absl::StrCat("bootstrap: rank ", q, " failed: ", outcomes[q]));
    }
  }
  return out;
}

// Rank q's "<pid> <fd>,<fd>,...\n<bytes>": the bytes, and copies of its fds (none of our own).
absl::Status CallbackRendezvous::Receive(int q, const std::string& body, PeerMessage& out) {
  const size_t newline = body.find('\n');
  std::vector<absl::string_view> head =
      absl::StrSplit(absl::string_view(body).substr(0, newline), absl::MaxSplits(' ', 1));
  int pid = 0;
  if (newline == std::string::npos || head.size() != 2 || !absl::SimpleAtoi(head[0], &pid)) {
    return absl::DataLossError(absl::StrCat("bootstrap: rank ", q, "'s message is malformed"));
  }
  out.bytes = body.substr(newline + 1);
  if (q == rank_ || head[1].empty()) return absl::OkStatus();
  for (absl::string_view number : absl::StrSplit(head[1], ',')) {
    int fd = -1;
    if (!absl::SimpleAtoi(number, &fd)) {
      return absl::DataLossError(absl::StrCat("bootstrap: rank ", q, " sent fd '", number, "'"));
    }
    absl::StatusOr<ScopedFd> copy = FetchFd(pid, fd);
    if (!copy.ok()) {
      return absl::Status(copy.status().code(),
                          absl::StrCat("bootstrap: rank ", q, "'s fd: ", copy.status().message()));
    }
    out.fds.push_back(*std::move(copy));
  }
  return absl::OkStatus();
}

absl::Status CallbackRendezvous::Barrier() { return Round("barrier", "").status(); }

}  // namespace syncopate::cuda
