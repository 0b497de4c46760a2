// Same-host peer liveness: notices at once that a peer process on this host has exited, through
// a pidfd per peer (pidfd_open(2), Linux >= 5.3), which polls readable once its process has
// exited (a zombie counts).
//
// Why: UCX's shared-memory transports in Debian's UCX 1.13 have no peer failure handler, so
// with them UCX never reports a dead peer (puts into its orphaned segment even succeed) and only
// a deadline would. A process exit is the commonest fault and the kernel reports it exactly, so
// the transport asks the kernel instead, for every UCX transport (over tcp it usually also
// names the cause better than UCX's "endpoint error").
//
// Which peers: a pid names the same process here only when the peer shares this kernel boot
// (/proc/sys/kernel/random/boot_id) and this pid namespace (/proc/self/ns/pid); hostnames prove
// neither (containers share them). Peers elsewhere are not watched. A pid may have been reused
// by the time the pidfd is opened, so each identity also carries the process's start time
// (/proc/<pid>/stat field 22): after opening the pidfd the start time read through /proc must
// still match, else the peer is already gone.
//
// Where pidfds are unavailable (old kernel, seccomp: ENOSYS, EPERM) nothing is watched and faults
// fall back to UCX's error handling and deadlines.
//
// Thread-safety: ProcessIdentity is a value type. A PeerLiveness is owned by one thread (the
// transport's progress thread).
#pragma once

#include <poll.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/base/scoped_fd.h"
#include "runtime/ucx/wire.h"

namespace syncopate::ucx {

// What a peer needs to watch this process.
struct ProcessIdentity {
  std::string host;         // "<boot_id> <pid namespace>"; empty when unknown: matches nobody
  int64_t pid = 0;          // in that pid namespace
  uint64_t start_time = 0;  // clock ticks after boot; 0 when unknown (reuse is not checked)

  static ProcessIdentity Self();
  void Encode(WireWriter& w) const;
  static absl::StatusOr<ProcessIdentity> Decode(WireReader& r);
};

class PeerLiveness {
 public:
  PeerLiveness() = default;  // watches nobody
  PeerLiveness(PeerLiveness&&) = default;
  PeerLiveness& operator=(PeerLiveness&&) = default;

  // Watches every rank in `peers` (indexed by rank) that runs on this host in another process
  // than `self`. Peers found already gone are reported by the first Exited().
  static PeerLiveness Watch(const ProcessIdentity& self, const std::vector<ProcessIdentity>& peers);

  // Ranks whose process exited since the last call, each reported once; never blocks.
  std::vector<int> Exited();
  // Whether `rank` is watched and its process has exited (reported or not), waiting up to
  // `wait` for a watched one to exit.
  bool HasExited(int rank, absl::Duration wait = absl::ZeroDuration()) const;
  bool empty() const { return watched_.empty() && gone_.empty(); }

 private:
  std::vector<int> ranks_;  // parallel to watched_ and pollfds_
  std::vector<ScopedFd> watched_;
  std::vector<pollfd> pollfds_;
  std::vector<int> gone_;      // found gone while opening, not reported yet
  std::vector<int> reported_;  // exited and reported
};

}  // namespace syncopate::ucx
