// Runs one function per rank in forked processes, for tests of node-local groups on one GPU (or
// none). The parent never touches CUDA: each child initialises its own driver state after the
// fork, which is what the CUDA driver requires. Each child's absl::Status comes back over a pipe.
// Also: a GPU probe that runs in a child, so a test can skip without initialising CUDA itself.
// Thread-safety: call from the test's main thread only.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace syncopate::workloads {

// Forks `world` children; child r runs fn(r) and exits. Returns each rank's status; a child that
// crashed, or did not finish within `timeout` (it is then killed), gets an Internal /
// DeadlineExceeded status saying so.
std::vector<absl::Status> RunRanks(int world, absl::Duration timeout,
                                   const std::function<absl::Status(int rank)>& fn);

// True when a forked child can load the driver and see a GPU; otherwise `why` says what failed.
bool ProbeGpu(std::string* why);

// A group id unique to this process and call ("t<pid>_<n>").
std::string UniqueGroupId(const std::string& prefix);

}  // namespace syncopate::workloads
