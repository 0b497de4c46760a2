// ProcessGroup: the integration tests' driver for a group of ucx_rank_helper processes. Runs
// the TCP bootstrap hub in this process, forks and execs one helper per rank, collects each
// one's output lines, injects faults by signal, and reaps them. A guard timeout kills anything
// still running so a broken build fails instead of hanging the test run (it is a hang guard,
// not a timing assertion).
//
// Thread-safety: one test thread drives a group; output readers run on their own threads.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/ucx/tcp_bootstrap.h"

namespace syncopate::ucx::testing {

struct RankResult {
  int exit_code = -1;   // when exited normally
  int term_signal = 0;  // when killed by a signal
  std::string output;
  bool Said(absl::string_view prefix) const;    // some line starts with prefix
  std::string Line(absl::string_view prefix) const;  // first such line, or ""
};

class ProcessGroup {
 public:
  // `args` are passed to every helper besides --hub, --rank and --world.
  static absl::StatusOr<std::unique_ptr<ProcessGroup>> Start(int world_size,
                                                             std::vector<std::string> args);
  ~ProcessGroup();  // kills and reaps what is left

  // Waits until rank's output has a line starting with `prefix`; false at `timeout` or exit.
  bool WaitForLine(int rank, absl::string_view prefix, absl::Duration timeout);
  void Signal(int rank, int sig);
  // Reaps every process; at `guard`, kills the rest (their results say so).
  std::vector<RankResult> WaitAll(absl::Duration guard = absl::Seconds(120));
  std::string Output(int rank);
  int world_size() const { return static_cast<int>(pids_.size()); }

 private:
  ProcessGroup() = default;

  std::unique_ptr<TcpBootstrapHub> hub_;
  std::vector<pid_t> pids_;
  std::vector<std::thread> readers_;
  absl::Mutex mu_;
  std::vector<std::string> outputs_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> closed_ ABSL_GUARDED_BY(mu_);
  std::vector<RankResult> results_;
  bool reaped_ = false;
};

// Path of the helper binary (compiled in by CMake).
std::string HelperPath();

}  // namespace syncopate::ucx::testing
