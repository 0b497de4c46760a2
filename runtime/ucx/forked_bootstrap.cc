// See forked_bootstrap.h.
#include "runtime/ucx/forked_bootstrap.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace syncopate::ucx {

absl::StatusOr<ForkedBootstrap> ForkedBootstrap::Create() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  ForkedBootstrap b;
  b.read_end_.Reset(fds[0]);
  b.write_end_.Reset(fds[1]);
  return b;
}

absl::StatusOr<std::unique_ptr<TcpBootstrap>> ForkedBootstrap::Join(
    int rank, int world_size, absl::Time deadline, std::unique_ptr<TcpBootstrapHub>& hub) const {
  // The address travels as one fixed-size record per waiting rank. Writes of at most PIPE_BUF
  // bytes are atomic and so is each read of a whole record, so ranks reading the one pipe at
  // once each get a whole record (reading byte by byte, three readers got each other's bytes).
  constexpr size_t kRecord = 64;
  std::string address;
  if (rank == 0) {
    ASSIGN_OR_RETURN(hub, TcpBootstrapHub::Start(world_size));
    address = hub->address();
    if (address.size() >= kRecord) {
      return absl::InternalError(absl::StrCat("hub address '", address, "' is too long"));
    }
    std::string record = address;
    record.resize(kRecord, '\0');
    for (int r = 1; r < world_size; ++r) {
      if (::write(write_end_.get(), record.data(), kRecord) != static_cast<ssize_t>(kRecord)) {
        return absl::InternalError(
            absl::StrCat("publishing the hub address: ", std::strerror(errno)));
      }
    }
  } else {
    // Several ranks wake for one record; the read end is non-blocking, so the losers go back
    // to poll (never into a read that could outlast the deadline).
    char record[kRecord];
    for (;;) {
      const ssize_t got = ::read(read_end_.get(), record, kRecord);
      if (got == static_cast<ssize_t>(kRecord)) break;
      if (got >= 0) {
        return absl::InternalError(absl::StrCat("reading the hub address: got ", got, " of ",
                                                kRecord, " bytes"));
      }
      if (errno != EAGAIN && errno != EINTR) {
        return absl::InternalError(
            absl::StrCat("reading the hub address: ", std::strerror(errno)));
      }
      const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (ms <= 0) {
        return absl::DeadlineExceededError("rank 0 did not publish the bootstrap hub address");
      }
      pollfd p{read_end_.get(), POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1000)));
    }
    address.assign(record, strnlen(record, kRecord));
  }
  return TcpBootstrap::Connect(address, rank, world_size, deadline);
}

}  // namespace syncopate::ucx
