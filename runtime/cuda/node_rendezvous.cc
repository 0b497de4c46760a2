// Unix-socket rendezvous with fd passing; see node_rendezvous.h.
#include "runtime/cuda/node_rendezvous.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"

namespace syncopate::cuda {
namespace {

constexpr uint32_t kMagic = 0x53594e43;  // "SYNC"
constexpr int kMaxFds = 250;             // SCM_RIGHTS allows 253 per message

struct Header {
  uint32_t magic;
  uint32_t rank;
  uint32_t world_size;
  uint32_t num_fds;
  uint64_t sequence;  // 0 for the hello, then the collective call number
  uint64_t length;
};

std::string Errno(int err) { return std::string(strerror(err)); }

absl::StatusOr<sockaddr_un> Address(const RendezvousOptions& o, int rank, socklen_t* len) {
  sockaddr_un addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sun_family = AF_UNIX;
  std::string name = o.directory.empty()
                         ? absl::StrCat("syncopate.", o.group_id, ".", rank)
                         : absl::StrCat(o.directory, "/", o.group_id, ".", rank, ".sock");
  size_t offset = o.directory.empty() ? 1 : 0;  // abstract names start with a NUL byte
  if (name.size() + offset + 1 > sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous socket name too long: '", name, "'"));
  }
  std::memcpy(addr.sun_path + offset, name.data(), name.size());
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + offset + name.size() +
                                (offset ? 0 : 1));
  return addr;
}

int RemainingMs(absl::Time deadline) {
  absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
}

// Waits until `fd` is ready for `events`; DeadlineExceeded (with `what`) at the deadline.
absl::Status WaitReady(int fd, short events, absl::Time deadline, const std::string& what) {
  while (true) {
    pollfd p{fd, events, 0};
    int ms = RemainingMs(deadline);
    int r = ::poll(&p, 1, ms);
    if (r > 0) return absl::OkStatus();
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return absl::InternalError(absl::StrCat("poll failed ", what, ": ", Errno(errno)));
    return absl::DeadlineExceededError(absl::StrCat("timed out ", what));
  }
}

absl::Status SendAll(int fd, const void* data, size_t len, std::span<const int> fds,
                     absl::Time deadline, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  bool fds_sent = fds.empty();
  while (len > 0) {
    RETURN_IF_ERROR(WaitReady(fd, POLLOUT, deadline, what));
    msghdr msg;
    std::memset(&msg, 0, sizeof(msg));
    iovec iov{const_cast<char*>(p), len};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
    if (!fds_sent) {
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError(absl::StrCat("send failed ", what, ": ", Errno(errno)));
    }
    fds_sent = true;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Reads exactly `len` bytes; fds that arrive are appended to `fds`.
absl::Status RecvAll(int fd, void* data, size_t len, std::vector<ScopedFd>* fds,
                     absl::Time deadline, const std::string& what) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    RETURN_IF_ERROR(WaitReady(fd, POLLIN, deadline, what));
    msghdr msg;
    std::memset(&msg, 0, sizeof(msg));
    iovec iov{p, len};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = ::recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError(absl::StrCat("receive failed ", what, ": ", Errno(errno)));
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        const int* in = reinterpret_cast<const int*>(CMSG_DATA(c));
        for (size_t i = 0; i < count; ++i) {
          ScopedFd owned(in[i]);  // closed here unless the caller wants it
          if (fds) fds->push_back(std::move(owned));
        }
      }
    }
    if (n == 0) {
      return absl::UnavailableError(
          absl::StrCat("connection closed ", what, " (the peer process exited?)"));
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<NodeRendezvous>> NodeRendezvous::Connect(
    const RendezvousOptions& options) {
  const RendezvousOptions& o = options;
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", o.rank, " out of range for world size ", o.world_size));
  }
  if (o.group_id.empty() || o.group_id.size() > 64 ||
      o.group_id.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
          std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "group id '", o.group_id, "' must be 1-64 letters, digits, '.', '_' or '-'"));
  }
  auto self = std::unique_ptr<NodeRendezvous>(new NodeRendezvous(options));
  self->peers_.resize(o.world_size);
  if (o.world_size == 1) return self;
  const absl::Time deadline = absl::Now() + o.timeout;
  const std::string group = absl::StrCat("group '", o.group_id, "'");

  // Listen first, so lower ranks' connections queue even before we accept them.
  ScopedFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listener.valid()) return absl::InternalError(absl::StrCat("socket: ", Errno(errno)));
  socklen_t len = 0;
  ASSIGN_OR_RETURN(sockaddr_un own, Address(o, o.rank, &len));
  if (!o.directory.empty()) ::unlink(own.sun_path);  // a stale file from a crashed run
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&own), len) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("rank ", o.rank, " of ", group,
                                                 " cannot bind its rendezvous socket: ",
                                                 Errno(errno), " (rank joined twice?)"));
  }
  if (::listen(listener.get(), o.world_size) != 0) {
    return absl::InternalError(absl::StrCat("listen: ", Errno(errno)));
  }
  Header hello{kMagic, static_cast<uint32_t>(o.rank), static_cast<uint32_t>(o.world_size), 0, 0,
               0};

  // Connect to every lower rank (retrying until it listens).
  for (int peer = 0; peer < o.rank; ++peer) {
    ASSIGN_OR_RETURN(sockaddr_un addr, Address(o, peer, &len));
    int last_errno = 0;
    while (true) {
      ScopedFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
      if (::connect(s.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0) {
        self->peers_[peer] = std::move(s);
        break;
      }
      last_errno = errno;
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "rank ", peer, " of ", group, " (world size ", o.world_size,
            ") did not show up within ", absl::FormatDuration(o.timeout), ": rank ", o.rank,
            " could not connect to it (", Errno(last_errno), ")"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    RETURN_IF_ERROR(SendAll(self->peers_[peer].get(), &hello, sizeof(hello), {}, deadline,
                            absl::StrCat("sending hello to rank ", peer)));
  }
  // Accept every higher rank.
  int expected = o.world_size - 1 - o.rank;
  while (expected > 0) {
    absl::Status ready = WaitReady(listener.get(), POLLIN, deadline, "");
    if (!ready.ok()) {
      std::vector<int> missing;
      for (int p = o.rank + 1; p < o.world_size; ++p) {
        if (!self->peers_[p].valid()) missing.push_back(p);
      }
      return absl::DeadlineExceededError(absl::StrCat(
          "rank", missing.size() > 1 ? "s " : " ", absl::StrJoin(missing, ", "), " of ", group,
          " (world size ", o.world_size, ") did not connect to rank ", o.rank, " within ",
          absl::FormatDuration(o.timeout)));
    }
    ScopedFd s(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!s.valid()) continue;
    Header h;
    RETURN_IF_ERROR(RecvAll(s.get(), &h, sizeof(h), nullptr, deadline, "reading a hello"));
    if (h.magic != kMagic || h.world_size != static_cast<uint32_t>(o.world_size) ||
        h.rank <= static_cast<uint32_t>(o.rank) || h.rank >= static_cast<uint32_t>(o.world_size)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "a process joined ", group, " as rank ", h.rank, " with world size ", h.world_size,
          "; rank ", o.rank, " has world size ", o.world_size));
    }
    if (self->peers_[h.rank].valid()) {
      return absl::AlreadyExistsError(
          absl::StrCat("rank ", h.rank, " joined ", group, " twice"));
    }
    self->peers_[h.rank] = std::move(s);
    --expected;
  }
  if (!o.directory.empty()) ::unlink(own.sun_path);
  return self;
}

NodeRendezvous::~NodeRendezvous() = default;

absl::StatusOr<std::vector<PeerMessage>> NodeRendezvous::AllGather(std::string_view bytes,
                                                                   std::span<const int> fds) {
  if (fds.size() > kMaxFds) {
    return absl::InvalidArgumentError(absl::StrCat("at most ", kMaxFds, " fds per exchange"));
  }
  const int world = options_.world_size;
  const int me = options_.rank;
  const uint64_t seq = ++sequence_;
  const absl::Time deadline = absl::Now() + options_.timeout;
  Header h{kMagic, static_cast<uint32_t>(me), static_cast<uint32_t>(world),
           static_cast<uint32_t>(fds.size()), seq, bytes.size()};
  std::string frame(reinterpret_cast<const char*>(&h), sizeof(h));
  frame.append(bytes);
  for (int p = 0; p < world; ++p) {
    if (p == me) continue;
    RETURN_IF_ERROR(SendAll(peers_[p].get(), frame.data(), frame.size(), fds, deadline,
                            absl::StrCat("sending to rank ", p, " of group '",
                                         options_.group_id, "'")));
  }
  std::vector<PeerMessage> out(world);
  out[me].bytes = std::string(bytes);
  for (int p = 0; p < world; ++p) {
    if (p == me) continue;
    std::string what = absl::StrCat("waiting for rank ", p, " of group '", options_.group_id,
                                    "' (exchange ", seq, ", ", absl::FormatDuration(options_.timeout),
                                    ")");
    Header in;
    RETURN_IF_ERROR(RecvAll(peers_[p].get(), &in, sizeof(in), &out[p].fds, deadline, what));
    if (in.magic != kMagic || in.rank != static_cast<uint32_t>(p) || in.sequence != seq) {
      return absl::DataLossError(absl::StrCat("rank ", p, " of group '", options_.group_id,
                                              "' is out of step: got exchange ", in.sequence,
                                              ", expected ", seq));
    }
    out[p].bytes.resize(in.length);
    RETURN_IF_ERROR(RecvAll(peers_[p].get(), out[p].bytes.data(), in.length, &out[p].fds,
                            deadline, what));
    if (out[p].fds.size() != in.num_fds) {
      return absl::DataLossError(absl::StrCat("rank ", p, " sent ", in.num_fds,
                                              " fds but ", out[p].fds.size(), " arrived"));
    }
  }
  return out;
}

absl::Status NodeRendezvous::Barrier() { return AllGather("").status(); }

}  // namespace syncopate::cuda
