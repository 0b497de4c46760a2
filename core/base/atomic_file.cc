// See atomic_file.h.
#include "core/base/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "core/base/scoped_fd.h"
#include "core/base/status_macros.h"

namespace syncopate {
namespace {

absl::Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot write '", path, "'"));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteNewFileDurably(const std::string& path, std::string_view contents, mode_t mode,
                                 bool exact_mode) {
  ScopedFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd.valid()) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create '", path, "'"));
  if (exact_mode) ::fchmod(fd.get(), mode);
  absl::Status written = WriteAll(fd.get(), contents, path);
  if (written.ok() && ::fsync(fd.get()) != 0) {
    written = absl::ErrnoToStatus(errno, absl::StrCat("cannot fsync '", path, "'"));
  }
  if (!written.ok()) ::unlink(path.c_str());
  return written;
}

absl::Status ReplaceFileAtomically(const std::string& path, std::string_view contents) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  // A name no other writer (thread or process) uses: the rename is the only shared step.
  static std::atomic<uint64_t> counter{0};
  const std::string temp =
      absl::StrCat(dir, "/.tmp.", ::getpid(), ".", counter.fetch_add(1), ".", name);
  RETURN_IF_ERROR(WriteNewFileDurably(temp, contents));
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    return absl::ErrnoToStatus(err, absl::StrCat("cannot rename '", temp, "' to '", path, "'"));
  }
  // The rename is durable only once the folder is synced; a failure here loses nothing now.
  if (ScopedFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); d.valid()) {
    ::fsync(d.get());
  }
  return absl::OkStatus();
}

}  // namespace syncopate
