// Forked-rank test harness; see multiprocess.h.
#include "runtime/cuda/workloads/multiprocess.h"

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/handles.h"

namespace syncopate::workloads {
namespace {

void WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

}  // namespace

std::vector<absl::Status> RunRanks(int world, absl::Duration timeout,
                                   const std::function<absl::Status(int rank)>& fn) {
  std::vector<pid_t> pids(world, -1);
  std::vector<int> fds(world, -1);
  std::vector<std::string> out(world);
  std::vector<absl::Status> result(world, absl::InternalError("not started"));
  for (int r = 0; r < world; ++r) {
    int p[2];
    if (::pipe(p) != 0) {
      result[r] = absl::InternalError("pipe failed");
      continue;
    }
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      absl::Status s = fn(r);
      WriteAll(p[1], absl::StrCat(static_cast<int>(s.code()), "\n", s.message()));
      ::close(p[1]);
      ::_exit(0);
    }
    ::close(p[1]);
    pids[r] = pid;
    fds[r] = p[0];
  }
  const absl::Time deadline = absl::Now() + timeout;
  int open = 0;
  for (int fd : fds) open += fd >= 0;
  while (open > 0) {
    std::vector<pollfd> polls;
    std::vector<int> ranks;
    for (int r = 0; r < world; ++r) {
      if (fds[r] >= 0) {
        polls.push_back({fds[r], POLLIN, 0});
        ranks.push_back(r);
      }
    }
    int ms = static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
    int n = ::poll(polls.data(), polls.size(), ms);
    if (n == 0) break;  // deadline
    for (size_t i = 0; i < polls.size(); ++i) {
      if (polls[i].revents == 0) continue;
      char buf[4096];
      ssize_t got = ::read(polls[i].fd, buf, sizeof(buf));
      if (got > 0) {
        out[ranks[i]].append(buf, static_cast<size_t>(got));
      } else {
        ::close(fds[ranks[i]]);
        fds[ranks[i]] = -1;
        --open;
      }
    }
  }
  for (int r = 0; r < world; ++r) {
    if (pids[r] < 0) continue;
    if (fds[r] >= 0) {
      ::kill(pids[r], SIGKILL);  // only the children this call forked
      ::close(fds[r]);
      result[r] = absl::DeadlineExceededError(absl::StrCat(
          "rank ", r, " did not finish within ", absl::FormatDuration(timeout), " (killed)"));
    }
    int status = 0;
    ::waitpid(pids[r], &status, 0);
    if (!result[r].ok() && result[r].code() == absl::StatusCode::kDeadlineExceeded &&
        out[r].empty()) {
      continue;
    }
    size_t nl = out[r].find('\n');
    int code = 0;
    if (nl == std::string::npos || !absl::SimpleAtoi(out[r].substr(0, nl), &code)) {
      result[r] = absl::InternalError(absl::StrCat(
          "rank ", r, " exited without a result (",
          WIFSIGNALED(status) ? absl::StrCat("signal ", WTERMSIG(status))
                              : absl::StrCat("exit ", WEXITSTATUS(status)),
          ")"));
      continue;
    }
    result[r] = absl::Status(static_cast<absl::StatusCode>(code), out[r].substr(nl + 1));
  }
  return result;
}

bool ProbeGpu(std::string* why) {
  std::vector<absl::Status> s = RunRanks(1, absl::Seconds(60), [](int) -> absl::Status {
    std::string reason;
    if (!cuda::GpuAvailable(&reason)) return absl::UnavailableError(reason);
    return absl::OkStatus();
  });
  if (!s[0].ok() && why) *why = std::string(s[0].message());
  return s[0].ok();
}

absl::Status RanksFitOnGpu(int world) {
  // Counters the forked ranks share (the mapping survives fork): contexts held, ranks failed.
  struct Shared {
    std::atomic<int> held{0};
    std::atomic<int> failed{0};
  };
  void* mem =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    return absl::InternalError(absl::StrCat("mmap: ", std::strerror(errno)));
  }
  auto* shared = new (mem) Shared();
  std::vector<absl::Status> results = RunRanks(world, absl::Seconds(60), [&](int) -> absl::Status {
    absl::StatusOr<cuda::Context> context = cuda::Context::Retain(0);
    if (!context.ok()) {
      shared->failed.fetch_add(1);
      return context.status();
    }
    shared->held.fetch_add(1);
    // Hold it until every rank holds one (or one failed): the contexts must coexist.
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (shared->held.load() + shared->failed.load() < world) {
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError("the other ranks never created their contexts");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return absl::OkStatus();
  });
  shared->~Shared();
  ::munmap(mem, sizeof(Shared));
  for (int r = 0; r < world; ++r) {
    if (!results[r].ok()) {
      return absl::Status(results[r].code(),
                          absl::StrCat("rank ", r, " of ", world, ": ", results[r].message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DeferredChild> DeferredChild::Fork(std::function<int()> fn) {
  // A socket pair, not a pipe: Run's send takes MSG_NOSIGNAL, so a child that died (killed, out
  // of memory) is an error there, not a SIGPIPE that ends the parent silently. CLOEXEC: an
  // exec'ed descendant holding the "go" end would keep the child from ever seeing EOF.
  int p[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) != 0) {
    return absl::InternalError(absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  std::fflush(nullptr);  // or the child would print the parent's buffered output again
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(p[0]);
    ::close(p[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    ::close(p[1]);
    char go = 0;
    ssize_t n;
    do {
      n = ::read(p[0], &go, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) ::_exit(0);  // the parent finished (or failed) without asking
    const int rc = fn();
    std::fflush(nullptr);
    ::_exit(rc);
  }
  ::close(p[0]);
  return DeferredChild(pid, p[1]);
}

DeferredChild::DeferredChild(DeferredChild&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), go_fd_(std::exchange(other.go_fd_, -1)) {}

DeferredChild::~DeferredChild() {
  if (go_fd_ >= 0) ::close(go_fd_);  // EOF: the child exits without running
  if (pid_ > 0) {
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

absl::StatusOr<int> DeferredChild::Run() {
  if (pid_ <= 0 || go_fd_ < 0) return absl::FailedPreconditionError("the child already ran");
  std::fflush(nullptr);  // the parent's output comes before the child's
  const char go = 'g';
  const bool sent = ::send(go_fd_, &go, 1, MSG_NOSIGNAL) == 1;
  ::close(go_fd_);
  go_fd_ = -1;
  int status = 0;
  pid_t waited;
  do {
    waited = ::waitpid(pid_, &status, 0);
  } while (waited < 0 && errno == EINTR);
  pid_ = -1;
  if (!sent || waited < 0) return absl::InternalError("the deferred child could not be run");
  if (WIFSIGNALED(status)) {
    return absl::InternalError(absl::StrCat("the deferred child ended by signal ", WTERMSIG(status)));
  }
  return WEXITSTATUS(status);
}

std::string UniqueGroupId(const std::string& prefix) {
  static std::atomic<int> n{0};
  return absl::StrCat(prefix, ::getpid(), "_", n++);
}

}  // namespace syncopate::workloads
