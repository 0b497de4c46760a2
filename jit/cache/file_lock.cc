// FileLock; see file_lock.h.
#include "jit/cache/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace syncopate::cache {
namespace {

constexpr mode_t kLockMode = 0660;

// Opens `path`, creating it with kLockMode when it is missing (the mode set with fchmod, so the
// umask cannot widen or narrow it; an existing file keeps the mode its creator gave it).
int OpenLockFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, kLockMode);
  if (fd >= 0) {
    ::fchmod(fd, kLockMode);
    return fd;
  }
  if (errno != EEXIST) return -1;
  return ::open(path.c_str(), O_RDWR | O_CLOEXEC);
}

// Records the holder for waiters that give up (HolderPid); failing to only loses that detail.
void WritePid(int fd) {
  const std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) == 0) {
    [[maybe_unused]] ssize_t n = ::pwrite(fd, pid.data(), pid.size(), 0);
  }
}

}  // namespace

absl::StatusOr<FileLock> FileLock::Acquire(const std::string& path, Deadline deadline) {
  if (!deadline.has_value()) return Lock(path, true);
  auto sleep = std::chrono::milliseconds(1);
  for (;;) {
    absl::StatusOr<FileLock> lock = Lock(path, false);
    if (!lock.ok() || lock->held()) return lock;
    const auto now = std::chrono::steady_clock::now();
    if (now >= *deadline) {
      const pid_t holder = HolderPid(path);
      return absl::DeadlineExceededError(absl::StrCat(
          "deadline passed waiting for the compile lock '", path, "', held by ",
          holder > 0 ? absl::StrCat("pid ", holder) : std::string("a process that left no pid")));
    }
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(sleep, *deadline - now));
    sleep = std::min(sleep * 2, std::chrono::milliseconds(20));
  }
}

absl::StatusOr<FileLock> FileLock::TryAcquire(const std::string& path) { return Lock(path, false); }

pid_t FileLock::HolderPid(const std::string& path) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return 0;
  char buffer[32] = {};
  const ssize_t n = ::pread(fd.get(), buffer, sizeof(buffer) - 1, 0);
  if (n <= 0) return 0;
  int pid = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::string_view(buffer, n)), &pid)) return 0;
  return pid;
}

absl::StatusOr<FileLock> FileLock::Lock(const std::string& path, bool wait) {
  for (;;) {
    ScopedFd fd(OpenLockFile(path));
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
      WritePid(fd.get());
      FileLock lock;
      lock.fd_ = std::move(fd);
      lock.path_ = path;
      return lock;
    }
  }
}

FileLock::~FileLock() = default;

}  // namespace syncopate::cache
