// Host simulation: executes a plan on host buffers with one thread per rank, random delays and
// random interleaving of a rank's channels, then checks the postcondition numerically.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "runtime/plan/plan.h"

namespace syncopate::plan {

struct SimulationOptions {
  uint64_t seed = 1;
  std::chrono::microseconds max_delay{50};   // random delay before each transfer
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
