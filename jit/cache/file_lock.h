// The owner of an exclusive flock() on a lock file (fds: runtime/base/scoped_fd.h), used by the
// disk store and by cross-process single flight (one compile per key across processes).
//
// A lock file may be deleted (by garbage collection) while someone waits for it; Acquire()
// re-checks after locking that the path still names the file it locked, and retries otherwise,
// so two processes never both "hold" a key through different inodes.
//
// Thread-safety: FileLock is a move-only value, not shared between threads. flock
// locks belong to an open file description, so two FileLocks on one path in one process also
// exclude each other.
#pragma once

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "runtime/base/scoped_fd.h"

namespace syncopate::cache {

class FileLock {
 public:
  // Blocks until `path` (created if missing, mode 0644) is exclusively locked.
  static absl::StatusOr<FileLock> Acquire(const std::string& path);
  // Like Acquire but does not wait: nullopt-like empty lock (held() == false) if someone else
  // holds it.
  static absl::StatusOr<FileLock> TryAcquire(const std::string& path);

  FileLock(FileLock&&) = default;
  FileLock& operator=(FileLock&&) = default;
  ~FileLock();  // unlocks (closing the descriptor releases the flock)

  bool held() const { return fd_.valid(); }
  const std::string& path() const { return path_; }

 private:
  FileLock() = default;
  static absl::StatusOr<FileLock> Lock(const std::string& path, bool wait);
  ScopedFd fd_;
  std::string path_;
};

}  // namespace syncopate::cache
