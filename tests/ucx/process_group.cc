// ProcessGroup: see process_group.h.
#include "tests/ucx/process_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace syncopate::ucx::testing {

std::string HelperPath() { return SYNCOPATE_UCX_RANK_HELPER; }

bool RankResult::Said(absl::string_view prefix) const { return !Line(prefix).empty(); }

std::string RankResult::Line(absl::string_view prefix) const {
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::StartsWith(line, prefix)) return std::string(line);
  }
  return "";
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroup::Start(int world_size,
                                                                  std::vector<std::string> args) {
  std::unique_ptr<ProcessGroup> g(new ProcessGroup());
  auto hub = TcpBootstrapHub::Start(world_size);
  if (!hub.ok()) return hub.status();
  g->hub_ = *std::move(hub);
  {
    absl::MutexLock lock(&g->mu_);
    g->outputs_.assign(world_size, "");
    g->closed_.assign(world_size, false);
  }
  g->results_.resize(world_size);
  for (int r = 0; r < world_size; ++r) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
    std::vector<std::string> argv_s = {HelperPath(), "--hub=" + g->hub_->address(),
                                       absl::StrCat("--rank=", r),
                                       absl::StrCat("--world=", world_size)};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) return absl::InternalError("fork failed");
    if (pid == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::dup2(fds[1], STDERR_FILENO);
      ::execv(argv[0], argv.data());
      _exit(127);
    }
    ::close(fds[1]);
    g->pids_.push_back(pid);
    g->readers_.emplace_back([gp = g.get(), r, fd = fds[0]] {
      char buf[4096];
      while (true) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        absl::MutexLock lock(&gp->mu_);
        gp->outputs_[r].append(buf, n);
      }
      ::close(fd);
      absl::MutexLock lock(&gp->mu_);
      gp->closed_[r] = true;
    });
  }
  return g;
}

ProcessGroup::~ProcessGroup() {
  if (!reaped_) {
    for (pid_t pid : pids_) ::kill(pid, SIGKILL);
    WaitAll(absl::Seconds(10));
  }
  for (std::thread& t : readers_) {
    if (t.joinable()) t.join();
  }
}

bool ProcessGroup::WaitForLine(int rank, absl::string_view prefix, absl::Duration timeout) {
  std::string needle = absl::StrCat("\n", prefix);
  auto found = [&] {
    mu_.AssertHeld();
    return absl::StrContains(absl::StrCat("\n", outputs_[rank]), needle) || closed_[rank];
  };
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&found), timeout);
  return absl::StrContains(absl::StrCat("\n", outputs_[rank]), needle);
}

void ProcessGroup::Signal(int rank, int sig) { ::kill(pids_[rank], sig); }

std::string ProcessGroup::Output(int rank) {
  absl::MutexLock lock(&mu_);
  return outputs_[rank];
}

std::vector<RankResult> ProcessGroup::WaitAll(absl::Duration guard) {
  if (reaped_) return results_;
  const absl::Time deadline = absl::Now() + guard;
  std::vector<bool> done(pids_.size(), false);
  size_t remaining = pids_.size();
  bool killed = false;
  while (remaining > 0) {
    for (size_t r = 0; r < pids_.size(); ++r) {
      if (done[r]) continue;
      int status = 0;
      pid_t got = ::waitpid(pids_[r], &status, WNOHANG);
      if (got == pids_[r]) {
        done[r] = true;
        --remaining;
        if (WIFEXITED(status)) results_[r].exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) results_[r].term_signal = WTERMSIG(status);
      }
    }
    if (remaining == 0) break;
    if (!killed && absl::Now() > deadline) {
      for (size_t r = 0; r < pids_.size(); ++r) {
        if (!done[r]) {
          ::kill(pids_[r], SIGCONT);
          ::kill(pids_[r], SIGKILL);
          absl::MutexLock lock(&mu_);
          outputs_[r] += "\nHUNG: killed by the test's guard timeout\n";
        }
      }
      killed = true;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  for (std::thread& t : readers_) t.join();
  readers_.clear();
  absl::MutexLock lock(&mu_);
  for (size_t r = 0; r < pids_.size(); ++r) results_[r].output = outputs_[r];
  reaped_ = true;
  return results_;
}

}  // namespace syncopate::ucx::testing
