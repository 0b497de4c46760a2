// Static validation of a plan. Errors name the rank, transfer (id, channel, chunk) and region.
//
// Checks: structure (world size, ranks/peers in range, ids dense and unique, buffers exist,
// regions inside their buffers, src/dst element counts match, channel index matches), dependency
// DAG (no cycles, also through channel order), signals (unique per destination rank; a dependency
// is on a transfer whose completion the waiting rank can observe), reads of data not yet valid,
// racing writes (two writes to one element on one rank not ordered by dependencies, unless both
// are reductions), and the postcondition (every expected element written exactly once, or reduced
// over exactly its contributors).
#pragma once

#include "absl/status/status.h"
#include "runtime/plan/plan.h"

namespace syncopate::plan {

// OK, or InvalidArgument / FailedPrecondition with a message naming the first problem found.
absl::Status ValidatePlan(const Plan& plan);

}  // namespace syncopate::plan
