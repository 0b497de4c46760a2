// Static validation of a plan. Errors name the rank, transfer (id, channel, chunk) and region.
//
// Checks: structure (world size, ranks/peers in range, ids dense and unique, buffers exist,
// regions inside their buffers, src/dst element counts match, channel index matches), dependency
// DAG (no cycles, also through channel order), signals (unique per destination rank; a dependency
// is on a transfer whose completion the waiting rank can observe), reads of data not yet valid,
// racing writes (two writes to one element on one rank not ordered by dependencies, unless both
// are reductions with the same op), and the postcondition (every expected element written exactly
// once, or reduced over exactly its contributors).
//
// "Ordered" means happens-before: the transitive closure of `deps` and channel program order.
// Validation works on an atom grid (the cells cut by every region boundary of a buffer), never
// element by element, so it scales to real shapes (8192x28672 buffers, 64 ranks x 8 chunks).
// Transfers whose source and destination regions have different box decompositions are mapped
// element by element when small (< 2^22 elements), otherwise reported as Unimplemented.
//
// Thread-safety: pure functions of their argument.
#pragma once

#include "absl/status/status.h"
#include "core/plan/plan.h"

namespace syncopate::plan {

// OK, or InvalidArgument / FailedPrecondition with a message naming the first problem found.
absl::Status ValidatePlan(const Plan& plan);

// Only the structural checks (the first group above): everything a consumer needs before it can
// index buffers and transfers safely (the simulator, the compiler). InvalidArgument on failure.
absl::Status ValidatePlanStructure(const Plan& plan);

}  // namespace syncopate::plan
