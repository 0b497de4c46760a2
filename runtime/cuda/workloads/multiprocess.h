// Runs one function per rank in forked processes, for tests of node-local groups on one GPU (or
// none). The parent never touches CUDA: each child initialises its own driver state after the
// fork, which is what the CUDA driver requires. Each child's absl::Status comes back over a pipe.
// Also: a GPU probe that runs in a child, so a test can skip without initialising CUDA itself,
// and a child forked early for programs that use NVRTC before they fork ranks.
// Thread-safety: call from the test's main thread only.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace syncopate::workloads {

// Forks `world` children; child r runs fn(r) and exits. Returns each rank's status; a child that
// crashed, or did not finish within `timeout` (it is then killed), gets an Internal /
// DeadlineExceeded status saying so.
std::vector<absl::Status> RunRanks(int world, absl::Duration timeout,
                                   const std::function<absl::Status(int rank)>& fn);

// True when a forked child can load the driver and see a GPU; otherwise `why` says what failed.
bool ProbeGpu(std::string* why);

// Whether `world` forked ranks can each hold a context on GPU 0 at once: OK, or the first rank's
// error. Under MPS the server's clients share one pool of hardware connections, each taking
// CUDA_DEVICE_MAX_CONNECTIONS of them, so on one GPU fewer ranks fit as that grows (an H100 with
// 32 connections hosts 3, not 4): the context creation then fails with ResourceExhausted. A
// limit of the one-GPU stand-in for several GPUs, which tests skip with this message.
absl::Status RanksFitOnGpu(int world);

// A child forked now, before this process touches the CUDA driver, that runs `fn` later, on
// request. A process cannot fork rank processes that use CUDA once it has initialised the driver
// itself (their cuInit fails with CUDA_ERROR_NOT_INITIALIZED), and NVRTC 13 initialises it (it
// loads libcuda and calls cuInit). A program that compiles first and runs ranks afterwards forks
// this child first; the child, still pristine, forks the ranks when asked.
class DeferredChild {
 public:
  // Flushes stdio, then forks. The child blocks until Run() and then exits with fn()'s value;
  // when the parent drops the object without Run(), the child exits without running fn.
  static absl::StatusOr<DeferredChild> Fork(std::function<int()> fn);
  DeferredChild(DeferredChild&& other) noexcept;
  DeferredChild& operator=(DeferredChild&&) = delete;
  ~DeferredChild();

  // Flushes stdio, lets the child run fn and waits for it: fn's value, or an error naming how
  // the child ended (signal).
  absl::StatusOr<int> Run();

 private:
  DeferredChild(pid_t pid, int go_fd) : pid_(pid), go_fd_(go_fd) {}
  pid_t pid_ = -1;
  int go_fd_ = -1;  // write end of the child's "go" pipe
};

// A group id unique to this process and call ("t<pid>_<n>").
std::string UniqueGroupId(const std::string& prefix);

}  // namespace syncopate::workloads
