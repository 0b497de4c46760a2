// Taking a Unix socket path for this daemon without stealing it from a live one.
//
// Why: binding needs the path free, and a daemon that crashed leaves its socket file behind, so
// the file alone says nothing. A connect does: one that succeeds means a daemon is listening
// there (its pid comes from SO_PEERCRED, for the message), and the path is refused; a refused
// connect means the file is stale, and it is removed. A second daemon started on the same path
// therefore exits naming the first instead of unlinking its socket.
//
// Thread-safety: stateless functions.
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"

namespace syncopate::server {

// OK when `path` is free for bind (absent, or a stale socket now removed). FailedPrecondition
// naming the live listener ("in use by a live daemon (pid 123, syncopated)") when a connect
// succeeds; FailedPrecondition when the path exists and is not a socket.
absl::Status ClaimUnixSocket(const std::string& path);

// The inode of the socket file at `path`, or 0. Taken after bind, so that shutdown removes the
// path only while it is still this daemon's socket.
ino_t SocketInode(const std::string& path);

}  // namespace syncopate::server
