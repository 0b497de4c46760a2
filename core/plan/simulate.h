// Host simulation: executes a plan on host buffers with one thread per rank, random delays and
// random interleaving of a rank's channels, then checks the postcondition numerically.
//
// Values are doubles whatever the dtype, deterministic per (rank, buffer, element) and exact
// under sums of up to thousands of terms; comparisons use a small relative tolerance. A transfer
// with `after_compute` reads what the computation produces: the simulator treats the computation
// as having produced that source region at the start, with the values an initial region would
// hold. Deadlocks are detected when every unfinished rank waits and nothing runs (reported at
// once); `deadline` is a backstop. Thread-safety: SimulatePlan may run concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "core/plan/plan.h"

namespace syncopate::plan {

struct SimulationOptions {
  uint64_t seed = 1;
  std::chrono::microseconds max_delay{50};    // random delay before each transfer
  std::chrono::milliseconds deadline{10000};  // a rank stuck this long is reported as a deadlock
  int64_t max_elements = int64_t{1} << 26;    // refuse plans whose buffers are larger (per rank)
};

struct SimulationReport {
  int transfers_executed = 0;
  int64_t elements_checked = 0;
  std::string Summary() const;
};

// Runs the plan. Errors: a transfer reading data that is not valid yet, a deadlock (naming the
// rank, the transfer and the dependency it waits for), or a postcondition mismatch naming the
// rank, buffer and element with expected and actual values.
absl::StatusOr<SimulationReport> SimulatePlan(const Plan& plan, const SimulationOptions& options);

}  // namespace syncopate::plan
