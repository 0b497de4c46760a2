// TCP bootstrap hub and client; see tcp_bootstrap.h.
//
// Frames on the wire: u32 type, u64 length, payload. Types: kHello (payload: rank as u64),
// kData (u64 deadline in Unix ms, then a round's contribution), kResult (every rank's contribution, WireWriter-encoded),
// kError (a message; the group is broken).
#include "runtime/ucx/tcp_bootstrap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"
#include "runtime/ucx/wire.h"
#include "spdlog/spdlog.h"

namespace syncopate::ucx {
namespace {

enum FrameType : uint32_t { kHello = 1, kData = 2, kResult = 3, kError = 4 };
constexpr size_t kHeaderSize = sizeof(uint32_t) + sizeof(uint64_t);
constexpr uint64_t kMaxFrame = uint64_t{1} << 30;

std::string Errno(absl::string_view what) { return absl::StrCat(what, ": ", strerror(errno)); }

std::string EncodeFrame(FrameType type, absl::string_view payload) {
  std::string out(kHeaderSize, '\0');
  uint32_t t = type;
  uint64_t n = payload.size();
  std::memcpy(out.data(), &t, sizeof t);
  std::memcpy(out.data() + sizeof t, &n, sizeof n);
  out.append(payload.data(), payload.size());
  return out;
}

int RemainingMs(absl::Time deadline) {
  absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
}

// Blocking I/O on a socket with a deadline.
absl::Status SendAll(int fd, absl::string_view data, absl::Time deadline) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return absl::UnavailableError(Errno("bootstrap send"));
    }
    pollfd p{fd, POLLOUT, 0};
    int ms = RemainingMs(deadline);
    if (ms == 0) return absl::DeadlineExceededError("bootstrap send: deadline exceeded");
    ::poll(&p, 1, ms);
  }
  return absl::OkStatus();
}

absl::Status RecvAll(int fd, char* data, size_t size, absl::Time deadline) {
  while (size > 0) {
    ssize_t n = ::recv(fd, data, size, MSG_DONTWAIT);
    if (n > 0) {
      data += n;
      size -= n;
      continue;
    }
    if (n == 0) return absl::UnavailableError("bootstrap hub closed the connection");
    if (errno != EAGAIN && errno != EINTR) return absl::UnavailableError(Errno("bootstrap recv"));
    pollfd p{fd, POLLIN, 0};
    int ms = RemainingMs(deadline);
    if (ms == 0) return absl::DeadlineExceededError("bootstrap recv: deadline exceeded");
    ::poll(&p, 1, ms);
  }
  return absl::OkStatus();
}

struct Frame {
  FrameType type;
  std::string payload;
};

absl::StatusOr<Frame> RecvFrame(int fd, absl::Time deadline) {
  char header[kHeaderSize];
  RETURN_IF_ERROR(RecvAll(fd, header, kHeaderSize, deadline));
  uint32_t type;
  uint64_t n;
  std::memcpy(&type, header, sizeof type);
  std::memcpy(&n, header + sizeof type, sizeof n);
  if (n > kMaxFrame) return absl::DataLossError(absl::StrCat("bootstrap frame of ", n, " bytes"));
  Frame frame{static_cast<FrameType>(type), std::string(n, '\0')};
  RETURN_IF_ERROR(RecvAll(fd, frame.payload.data(), n, deadline));
  return frame;
}

absl::StatusOr<sockaddr_in> ParseAddress(absl::string_view address) {
  std::vector<std::string> parts = absl::StrSplit(address, ':');
  int port = 0;
  sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &port) || port <= 0 || port > 65535 ||
      ::inet_pton(AF_INET, parts[0].c_str(), &sa.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("bootstrap address '", address, "' is not IPv4 'host:port'"));
  }
  sa.sin_port = htons(static_cast<uint16_t>(port));
  return sa;
}

}  // namespace

// ---- Hub ----

absl::StatusOr<std::unique_ptr<TcpBootstrapHub>> TcpBootstrapHub::Start(int world_size,
                                                                         std::string host) {
  if (world_size < 1) return absl::InvalidArgumentError("bootstrap hub: world_size < 1");
  ASSIGN_OR_RETURN(sockaddr_in sa, ParseAddress(absl::StrCat(host, ":1")));
  sa.sin_port = 0;
  ScopedFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return absl::InternalError(Errno("bootstrap hub socket"));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t len = sizeof sa;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::listen(fd.get(), 256) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    return absl::UnavailableError(Errno(absl::StrCat("bootstrap hub bind/listen on ", host)));
  }
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(Errno("bootstrap hub pipe"));
  }
  ScopedFd wake_read(wake[0]), wake_write(wake[1]);
  std::string address = absl::StrCat(host, ":", ntohs(sa.sin_port));
  std::unique_ptr<TcpBootstrapHub> hub(new TcpBootstrapHub(
      world_size, std::move(fd), std::move(wake_read), std::move(wake_write), std::move(address)));
  hub->thread_ = std::thread([h = hub.get()] { h->Serve(); });
  return hub;
}

TcpBootstrapHub::TcpBootstrapHub(int world_size, ScopedFd listen_fd, ScopedFd wake_read,
                                 ScopedFd wake_write, std::string address)
    : world_size_(world_size),
      listen_fd_(std::move(listen_fd)),
      wake_read_(std::move(wake_read)),
      wake_write_(std::move(wake_write)),
      address_(std::move(address)) {}

TcpBootstrapHub::~TcpBootstrapHub() {
  char c = 0;
  if (::write(wake_write_.get(), &c, 1) < 0) spdlog::warn("{}", Errno("bootstrap hub wake"));
  if (thread_.joinable()) thread_.join();
  // Serve polls these until the join; close them after it, in this order.
  listen_fd_.Reset();
  wake_read_.Reset();
  wake_write_.Reset();
}

namespace {

// The hub's state between polls: its connections (a rank once it said hello) and the round of
// contributions being gathered. Serve() polls; this reacts to what the poll found.
class HubRounds {
 public:
  HubRounds(int world_size, std::string address)
      : world_size_(world_size), address_(std::move(address)) {}

  // How long the next poll may wait: until the open round's earliest deadline, or for ever.
  int PollTimeoutMs() const {
    if (round_.empty() || round_deadline_ms_ == INT64_MAX) return -1;
    return static_cast<int>(
        std::clamp<int64_t>(round_deadline_ms_ - absl::ToUnixMillis(absl::Now()) + 1, 0, 1 << 30));
  }
  std::vector<pollfd> PollFds(int wake_fd, int listen_fd) const {
    std::vector<pollfd> fds = {{wake_fd, POLLIN, 0}, {listen_fd, POLLIN, 0}};
    for (const Conn& c : conns_) fds.push_back({c.fd.get(), POLLIN, 0});
    return fds;
  }
  static constexpr size_t kFirstConnFd = 2;  // PollFds' index of conns_[0]

  // A round not complete by its earliest contributor's deadline: tell the contributors which
  // ranks are missing (the group stays usable; those ranks may still be slow, not gone).
  void ExpireLateRound() {
    if (round_.empty() || absl::ToUnixMillis(absl::Now()) < round_deadline_ms_) return;
    std::vector<int> missing;
    for (int r = 0; r < world_size_; ++r) {
      if (!round_.contains(r)) missing.push_back(r);
    }
    const std::string why =
        absl::StrCat("bootstrap round ", round_number_, ": rank(s) ", absl::StrJoin(missing, ", "),
                     " did not arrive by the deadline");
    for (Conn& c : conns_) {
      if (c.rank >= 0 && round_.contains(c.rank)) SendTo(c, kError, why);
    }
    EndRound();
  }

  void Accept(int listen_fd) {
    ScopedFd fd(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd.valid()) return;
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conns_.push_back(Conn{std::move(fd)});
  }

  // Reads what connection `i` has and handles every complete frame; false when the connection
  // is to be dropped (closed, failed, or a bad hello).
  bool Read(size_t i) {
    Conn& c = conns_[i];
    char buf[65536];
    const ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return false;
    if (n < 0) return true;
    c.in.append(buf, n);
    while (c.in.size() >= kHeaderSize) {
      uint32_t type;
      uint64_t len;
      std::memcpy(&type, c.in.data(), sizeof type);
      std::memcpy(&len, c.in.data() + sizeof type, sizeof len);
      if (c.in.size() < kHeaderSize + len) break;
      const std::string payload = c.in.substr(kHeaderSize, len);
      c.in.erase(0, kHeaderSize + len);
      if (type == kHello) {
        if (!Hello(c, payload)) return false;
      } else if (type == kData && c.rank >= 0) {
        Contribute(c, payload);
      }
    }
    return true;
  }

  // Removes the connections at `dead` (ascending indices); a rank leaving breaks the group.
  void Drop(const std::vector<size_t>& dead) {
    for (auto it = dead.rbegin(); it != dead.rend(); ++it) {
      Conn c = std::move(conns_[*it]);
      conns_.erase(conns_.begin() + static_cast<std::ptrdiff_t>(*it));
      c.fd.Reset();
      if (c.rank >= 0 && !broken_.has_value()) {
        FailGroup(absl::StrCat("rank ", c.rank, " left the bootstrap group (connection to hub ",
                               address_, " closed)"));
      }
    }
  }

  void CloseAll() {
    for (Conn& c : conns_) c.fd.Reset();
  }

 private:
  struct Conn {
    ScopedFd fd;
    int rank = -1;
    std::string in;
  };

  void SendTo(Conn& c, FrameType type, absl::string_view payload) {
    const absl::Duration kSendTimeout = absl::Seconds(10);
    absl::Status s = SendAll(c.fd.get(), EncodeFrame(type, payload), absl::Now() + kSendTimeout);
    if (!s.ok()) spdlog::warn("bootstrap hub -> rank {}: {}", c.rank, s.ToString());
  }
  void FailGroup(const std::string& why) {
    broken_ = why;
    round_.clear();
    for (Conn& c : conns_) {
      if (c.rank >= 0) SendTo(c, kError, why);
    }
  }
  void EndRound() {
    round_.clear();
    round_deadline_ms_ = INT64_MAX;
  }

  // A connection names its rank; false (after telling it) for a bad or taken rank.
  bool Hello(Conn& c, const std::string& payload) {
    WireReader r(payload, "bootstrap hello");
    absl::StatusOr<uint64_t> rank = r.U64();
    bool taken = false;
    for (const Conn& o : conns_) taken |= rank.ok() && o.rank == static_cast<int>(*rank);
    if (!rank.ok() || *rank >= static_cast<uint64_t>(world_size_) || taken) {
      SendTo(c, kError,
             absl::StrCat("bootstrap hub: bad or duplicate rank in hello (",
                          rank.ok() ? absl::StrCat(*rank) : "?", ")"));
      return false;
    }
    c.rank = static_cast<int>(*rank);
    return true;
  }

  // A rank's blob for the open round; the last one sends every rank the round's result.
  void Contribute(Conn& c, const std::string& payload) {
    if (broken_.has_value()) {
      SendTo(c, kError, *broken_);
      return;
    }
    WireReader r(payload, "bootstrap data");
    absl::StatusOr<uint64_t> deadline_ms = r.U64();
    absl::StatusOr<absl::string_view> blob = r.Bytes();
    if (!deadline_ms.ok() || !blob.ok()) {
      SendTo(c, kError, "bootstrap hub: malformed data frame");
      return;
    }
    round_[c.rank] = std::string(*blob);
    round_deadline_ms_ = std::min(round_deadline_ms_, static_cast<int64_t>(*deadline_ms));
    if (static_cast<int>(round_.size()) < world_size_) return;
    WireWriter w;
    for (auto& [rank, contribution] : round_) w.Bytes(contribution);
    const std::string result = w.Take();
    for (Conn& o : conns_) {
      if (o.rank >= 0) SendTo(o, kResult, result);
    }
    EndRound();
    ++round_number_;
  }

  const int world_size_;
  const std::string address_;
  std::vector<Conn> conns_;
  std::map<int, std::string> round_;       // rank -> contribution of the current round
  int64_t round_deadline_ms_ = INT64_MAX;  // earliest deadline among the round's contributors
  uint64_t round_number_ = 0;
  std::optional<std::string> broken_;  // set once a rank left: every later round fails with it
};

}  // namespace

void TcpBootstrapHub::Serve() {
  HubRounds hub(world_size_, address_);
  while (true) {
    std::vector<pollfd> fds = hub.PollFds(wake_read_.get(), listen_fd_.get());
    if (::poll(fds.data(), fds.size(), hub.PollTimeoutMs()) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("{}", Errno("bootstrap hub poll"));
      break;
    }
    if (fds[0].revents != 0) break;  // Stop() woke us
    hub.ExpireLateRound();
    // Connections accepted now are polled from the next round on: read only those polled.
    const size_t polled = fds.size() - HubRounds::kFirstConnFd;
    if (fds[1].revents & POLLIN) hub.Accept(listen_fd_.get());
    std::vector<size_t> dead;
    for (size_t i = 0; i < polled; ++i) {
      if (fds[i + HubRounds::kFirstConnFd].revents == 0) continue;
      if (!hub.Read(i)) dead.push_back(i);
    }
    hub.Drop(dead);
  }
  hub.CloseAll();
}

// ---- Client ----

absl::StatusOr<std::unique_ptr<TcpBootstrap>> TcpBootstrap::Connect(absl::string_view hub_address,
                                                                    int rank, int world_size,
                                                                    absl::Time deadline) {
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("bootstrap: rank ", rank, " out of range for world size ", world_size));
  }
  ASSIGN_OR_RETURN(sockaddr_in sa, ParseAddress(hub_address));
  while (true) {
    ScopedFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return absl::InternalError(Errno("bootstrap socket"));
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
      int one = 1;
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      std::unique_ptr<TcpBootstrap> out(new TcpBootstrap(std::move(fd), rank, world_size));
      WireWriter w;
      w.U64(rank);
      RETURN_IF_ERROR(SendAll(out->fd_.get(), EncodeFrame(kHello, w.Take()), deadline));
      return out;
    }
    std::string err = Errno(absl::StrCat("bootstrap connect to ", hub_address));
    fd.Reset();  // before the retry's sleep
    if (absl::Now() > deadline) return absl::DeadlineExceededError(err);
    absl::SleepFor(absl::Milliseconds(20));
  }
}

TcpBootstrap::~TcpBootstrap() = default;  // fd_ closes the connection

absl::StatusOr<std::vector<std::string>> TcpBootstrap::AllGather(absl::string_view mine,
                                                                 absl::Time deadline) {
  auto fail = [&](absl::Status s) {
    broken_ = true;
    return absl::Status(s.code(), absl::StrCat("rank ", rank_, " bootstrap allgather: ",
                                               s.message()));
  };
  if (broken_) return absl::FailedPreconditionError("bootstrap: an earlier round failed");
  WireWriter w;
  w.U64(static_cast<uint64_t>(
      std::min<int64_t>(absl::ToUnixMillis(deadline), int64_t{1} << 62)));
  w.Bytes(mine);
  absl::Status s = SendAll(fd_.get(), EncodeFrame(kData, w.Take()), deadline);
  if (!s.ok()) return fail(s);
  // The hub answers at `deadline` naming the missing ranks; allow that answer time to arrive.
  absl::StatusOr<Frame> frame = RecvFrame(fd_.get(), deadline + absl::Seconds(1));
  if (!frame.ok()) return fail(frame.status());
  if (frame->type == kError) return fail(absl::UnavailableError(frame->payload));
  if (frame->type != kResult) {
    return fail(absl::DataLossError(absl::StrCat("unexpected frame type ", frame->type)));
  }
  WireReader r(frame->payload, "bootstrap result");
  std::vector<std::string> out;
  for (int i = 0; i < world_size_; ++i) {
    absl::StatusOr<absl::string_view> blob = r.Bytes();
    if (!blob.ok()) return fail(blob.status());
    out.emplace_back(*blob);
  }
  return out;
}

}  // namespace syncopate::ucx
