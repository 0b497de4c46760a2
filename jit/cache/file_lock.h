// Owners for a POSIX file descriptor and for an exclusive flock() on a lock file, used by the
// disk store and by cross-process single flight (one compile per key across processes).
//
// A lock file may be deleted (by garbage collection) while someone waits for it; Acquire()
// re-checks after locking that the path still names the file it locked, and retries otherwise,
// so two processes never both "hold" a key through different inodes.
//
// Thread-safety: ScopedFd and FileLock are move-only values, not shared between threads. flock
// locks belong to an open file description, so two FileLocks on one path in one process also
// exclude each other.
#pragma once

#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace syncopate::cache {

class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept {
    if (this != &other) Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

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
