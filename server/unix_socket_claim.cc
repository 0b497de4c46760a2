// See unix_socket_claim.h.
#include "server/unix_socket_claim.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/base/scoped_fd.h"

namespace syncopate::server {
namespace {

std::string ProcessName(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/comm"));
  std::string name;
  std::getline(in, name);
  return std::string(absl::StripAsciiWhitespace(name));
}

// "pid 123, syncopated" from the listening end of `fd`; "pid unknown" where the kernel won't say.
std::string DescribePeer(int fd) {
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.pid <= 0) {
    return "pid unknown";
  }
  const std::string name = ProcessName(cred.pid);
  return name.empty() ? absl::StrCat("pid ", cred.pid) : absl::StrCat("pid ", cred.pid, ", ", name);
}

}  // namespace

absl::Status ClaimUnixSocket(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return absl::OkStatus();  // nothing there
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("unix_socket ", path, " exists and is not a socket; remove it or choose "
                     "another unix_socket"));
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("unix_socket ", path, ": longer than ",
                                                   sizeof(addr.sun_path) - 1, " bytes"));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ScopedFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return absl::InternalError(absl::StrCat("unix_socket ", path, ": socket: ", strerror(errno)));
  }
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "unix_socket ", path, " is in use by a live daemon (", DescribePeer(fd.get()),
        "); stop it or choose another unix_socket"));
  }
  const int error = errno;
  if (error != ECONNREFUSED) {
    // EACCES and the like: we cannot tell whether it is live, so we must not remove it.
    return absl::FailedPreconditionError(absl::StrCat(
        "unix_socket ", path, ": cannot tell whether a daemon listens there (connect: ",
        strerror(error), "); not replacing it"));
  }
  // No listener: a socket left by a daemon that died. Binding needs the path free.
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::FailedPreconditionError(absl::StrCat(
        "unix_socket ", path, ": stale socket cannot be removed: ", strerror(errno)));
  }
  return absl::OkStatus();
}

ino_t SocketInode(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
  return st.st_ino;
}

}  // namespace syncopate::server
