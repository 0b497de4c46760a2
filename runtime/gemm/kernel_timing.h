// GPU timing for benchmarks and the autotuner: several candidates timed in alternation, so that
// clock and power drift (an H200 at full tensor-core load moves by several percent within a
// second) hits every candidate alike instead of whichever ran last.
// Thread-safety: one caller per stream.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cuda/driver.h"

namespace syncopate::gemm {

// Enqueues one run of a candidate on the stream it was bound to.
using TimedRun = std::function<absl::Status()>;

// Runs every candidate `warmup` times, then `reps` rounds in which each candidate runs once,
// timed alone with CUDA events on `stream`. Returns each candidate's median milliseconds, in
// the order given. The runs must enqueue on `stream`.
absl::StatusOr<std::vector<double>> MedianMsInterleaved(const cuda::DriverApi& api, CUstream stream,
                                                        int warmup, int reps,
                                                        const std::vector<TimedRun>& runs);

}  // namespace syncopate::gemm
