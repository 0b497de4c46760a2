// ScopedFd and FileLock; see file_lock.h.
#include "jit/cache/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace syncopate::cache {

absl::StatusOr<FileLock> FileLock::Acquire(const std::string& path) { return Lock(path, true); }

absl::StatusOr<FileLock> FileLock::TryAcquire(const std::string& path) { return Lock(path, false); }

absl::StatusOr<FileLock> FileLock::Lock(const std::string& path, bool wait) {
  for (;;) {
    ScopedFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!fd.valid()) {
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot open lock file '", path, "'"));
    }
    int rc;
    do {
      rc = ::flock(fd.get(), wait ? LOCK_EX : (LOCK_EX | LOCK_NB));
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      if (!wait && errno == EWOULDBLOCK) return FileLock();
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot lock '", path, "'"));
    }
    // The file may have been unlinked (and maybe recreated) between open and flock; then this
    // lock protects nothing and we start over on whatever the path names now.
    struct stat held, now;
    if (::fstat(fd.get(), &held) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat lock file '", path, "'"));
    }
    if (::stat(path.c_str(), &now) == 0 && now.st_ino == held.st_ino && now.st_dev == held.st_dev) {
      FileLock lock;
      lock.fd_ = std::move(fd);
      lock.path_ = path;
      return lock;
    }
  }
}

FileLock::~FileLock() = default;

}  // namespace syncopate::cache
