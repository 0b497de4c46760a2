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
#include "runtime/base/status_macros.h"

namespace syncopate::ucx {

absl::StatusOr<ForkedBootstrap> ForkedBootstrap::Create() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  ForkedBootstrap b;
  b.read_end_.Reset(fds[0]);
  b.write_end_.Reset(fds[1]);
  return b;
}

absl::StatusOr<std::unique_ptr<TcpBootstrap>> ForkedBootstrap::Join(
    int rank, int world_size, absl::Time deadline, std::unique_ptr<TcpBootstrapHub>& hub) const {
  std::string address;
  if (rank == 0) {
    ASSIGN_OR_RETURN(hub, TcpBootstrapHub::Start(world_size));
    address = hub->address();
    // One line per waiting rank: each reads exactly one (byte by byte, up to its newline).
    const std::string line = address + "\n";
    for (int r = 1; r < world_size; ++r) {
      if (::write(write_end_.get(), line.data(), line.size()) !=
          static_cast<ssize_t>(line.size())) {
        return absl::InternalError(
            absl::StrCat("publishing the hub address: ", std::strerror(errno)));
      }
    }
  } else {
    while (address.empty() || address.back() != '\n') {
      pollfd p{read_end_.get(), POLLIN, 0};
      const int ms = static_cast<int>(
          std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
      char c;
      if (::poll(&p, 1, ms) != 1 || ::read(read_end_.get(), &c, 1) != 1) {
        return absl::DeadlineExceededError("rank 0 did not publish the bootstrap hub address");
      }
      address.push_back(c);
    }
    address.pop_back();
  }
  return TcpBootstrap::Connect(address, rank, world_size, deadline);
}

}  // namespace syncopate::ucx
