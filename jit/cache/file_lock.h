// The owner of an exclusive flock() on a lock file (fds: core/base/scoped_fd.h), used by the
// disk store and by cross-process single flight (one compile per key across processes).
//
// A lock file may be deleted (by garbage collection) while someone waits for it; Acquire()
// re-checks after locking that the path still names the file it locked, and retries otherwise,
// so two processes never both "hold" a key through different inodes.
//
// Waits end at a deadline: a holder that is stopped or hung (SIGSTOP, a wedged NFS client) must
// not hold its waiters forever. flock() has no timed form, so a wait with a deadline polls
// LOCK_NB with a short, growing sleep (1 ms to 20 ms): a lock freed is noticed within 20 ms.
// The holder writes its pid into the file, so a waiter that gives up can say who holds it
// (flock itself does not tell). Lock files are created 0660 (fchmod, whatever the umask): the
// daemon's group shares the cache, others can neither read nor lock them (the directory they
// live in is 0770, see disk_store.h).
//
// Thread-safety: FileLock is a move-only value, not shared between threads. flock
// locks belong to an open file description, so two FileLocks on one path in one process also
// exclude each other.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "core/base/scoped_fd.h"

namespace syncopate::cache {

class FileLock {
 public:
  using Deadline = std::optional<std::chrono::steady_clock::time_point>;

  // Waits until `path` (created if missing) is exclusively locked, or until `deadline`:
  // DeadlineExceeded naming the path and the holder's pid when it left one. nullopt: no deadline.
  static absl::StatusOr<FileLock> Acquire(const std::string& path, Deadline deadline = std::nullopt);
  // Like Acquire but does not wait: nullopt-like empty lock (held() == false) if someone else
  // holds it.
  static absl::StatusOr<FileLock> TryAcquire(const std::string& path);

  // The pid the current holder of `path` wrote, or 0 when none is recorded. Advisory: the
  // holder may have let go meanwhile.
  static pid_t HolderPid(const std::string& path);

  FileLock(FileLock&&) = default;
  FileLock& operator=(FileLock&&) = default;
  ~FileLock();  // unlocks (closing the descriptor releases the flock)

  bool held() const { return fd_.valid(); }
  const std::string& path() const { return path_; }

 private:
  FileLock() = default;
  // One attempt: locked, or empty (someone else holds it), or an error.
  static absl::StatusOr<FileLock> Lock(const std::string& path, bool wait);
  ScopedFd fd_;
  std::string path_;
};

}  // namespace syncopate::cache
