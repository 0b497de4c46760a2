// PeerLiveness: see peer_liveness.h.
#include "runtime/ucx/peer_liveness.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"
#include "spdlog/spdlog.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // x86-64 and arm64 (old libc headers)
#endif

namespace syncopate::ucx {
namespace {

// Reads a small /proc file; returns 0 or the errno of the failure (ENOENT, ESRCH: the process is
// gone).
int ReadProcFile(const std::string& path, std::string* out) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno;
  out->clear();
  char buf[1024];
  while (true) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return 0;
    out->append(buf, static_cast<size_t>(n));
  }
}

// Start time (field 22 of /proc/<pid>/stat) of `pid` ("self" for this process). nullopt with
// `errno_out` = ENOENT when the process no longer exists, another errno when it is unreadable.
std::optional<uint64_t> StartTime(const std::string& pid, int* errno_out) {
  std::string line;
  if (int err = ReadProcFile("/proc/" + pid + "/stat", &line); err != 0) {
    *errno_out = err == ESRCH ? ENOENT : err;
    return std::nullopt;
  }
  // Field 2 is "(comm)" and comm may hold spaces and parentheses: count from the last ')'.
  size_t paren = line.rfind(')');
  if (paren == std::string::npos) {
    *errno_out = EINVAL;
    return std::nullopt;
  }
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(line).substr(paren + 1), ' ', absl::SkipEmpty());
  uint64_t start = 0;
  constexpr size_t kStartTime = 22 - 3;  // fields after ')' begin with field 3 (state)
  if (fields.size() <= kStartTime || !absl::SimpleAtoi(fields[kStartTime], &start)) {
    *errno_out = EINVAL;
    return std::nullopt;
  }
  return start;
}

}  // namespace

ProcessIdentity ProcessIdentity::Self() {
  ProcessIdentity id;
  id.pid = getpid();
  std::string boot;
  const bool have_boot = ReadProcFile("/proc/sys/kernel/random/boot_id", &boot) == 0;
  boot = std::string(absl::StripAsciiWhitespace(boot));
  char ns[128] = {};
  ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  if (have_boot && !boot.empty() && n > 0) {
    id.host = absl::StrCat(boot, " ", absl::string_view(ns, static_cast<size_t>(n)));
  }
  int err = 0;
  id.start_time = StartTime("self", &err).value_or(0);
  return id;
}

void ProcessIdentity::Encode(WireWriter& w) const {
  w.Bytes(host);
  w.U64(static_cast<uint64_t>(pid));
  w.U64(start_time);
}

absl::StatusOr<ProcessIdentity> ProcessIdentity::Decode(WireReader& r) {
  ProcessIdentity id;
  ASSIGN_OR_RETURN(absl::string_view host, r.Bytes());
  ASSIGN_OR_RETURN(uint64_t pid, r.U64());
  ASSIGN_OR_RETURN(id.start_time, r.U64());
  id.host = std::string(host);
  id.pid = static_cast<int64_t>(pid);
  return id;
}

PeerLiveness PeerLiveness::Watch(const ProcessIdentity& self,
                                 const std::vector<ProcessIdentity>& peers) {
  PeerLiveness l;
  if (self.host.empty()) return l;
  for (int rank = 0; rank < static_cast<int>(peers.size()); ++rank) {
    const ProcessIdentity& p = peers[rank];
    // Ranks in this process (threads in tests) cannot exit without us.
    if (p.host != self.host || p.pid == self.pid || p.pid <= 0) continue;
    int fd = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(p.pid), 0));
    if (fd < 0) {
      const int err = errno;
      if (err == ESRCH) {
        l.gone_.push_back(rank);
        continue;
      }
      if (err == ENOSYS || err == EPERM) {
        spdlog::info(
            "pidfd_open unavailable ({}): same-host peer exits are noticed by UCX "
            "errors and deadlines only",
            std::strerror(err));
        return l;  // the same for every peer
      }
      spdlog::warn("pidfd_open({}) for rank {}: {}; not watching it", p.pid, rank,
                   std::strerror(err));
      continue;
    }
    ScopedFd pidfd(fd);
    if (p.start_time != 0) {
      // The pidfd is for whatever process holds the pid now: make sure that is still the peer.
      int err = 0;
      std::optional<uint64_t> start = StartTime(std::to_string(p.pid), &err);
      if (!start.has_value() && err != ENOENT) continue;  // unverifiable: better not to watch
      if (!start.has_value() || *start != p.start_time) {
        l.gone_.push_back(rank);
        continue;
      }
    }
    l.ranks_.push_back(rank);
    l.pollfds_.push_back(pollfd{pidfd.get(), POLLIN, 0});
    l.watched_.push_back(std::move(pidfd));
  }
  return l;
}

std::vector<int> PeerLiveness::Exited() {
  std::vector<int> exited = std::move(gone_);
  gone_.clear();
  if (!pollfds_.empty() && poll(pollfds_.data(), pollfds_.size(), 0) > 0) {
    for (size_t i = 0; i < pollfds_.size();) {
      // POLLIN: exited; POLLHUP (newer kernels): exited and reaped.
      if ((pollfds_[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        exited.push_back(ranks_[i]);
        ranks_.erase(ranks_.begin() + i);
        pollfds_.erase(pollfds_.begin() + i);
        watched_.erase(watched_.begin() + i);
      } else {
        ++i;
      }
    }
  }
  reported_.insert(reported_.end(), exited.begin(), exited.end());
  return exited;
}

bool PeerLiveness::HasExited(int rank, absl::Duration wait) const {
  if (std::find(gone_.begin(), gone_.end(), rank) != gone_.end() ||
      std::find(reported_.begin(), reported_.end(), rank) != reported_.end()) {
    return true;
  }
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (ranks_[i] != rank) continue;
    pollfd p{pollfds_[i].fd, POLLIN, 0};
    return poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(wait))) > 0 &&
           (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
  }
  return false;
}

}  // namespace syncopate::ucx
