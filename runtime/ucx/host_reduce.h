// Host-side element-wise reduction (dst = dst op src) for every plan dtype, used where a UCX
// chunk carrying a reduction lands in a staging slot and the receiver folds it into the
// destination. f16/bf16 are widened to float, reduced, rounded back (round to nearest even).
//
// Thread-safety: pure functions; callers serialize reductions into the same elements.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "core/plan/plan.h"

namespace syncopate::ucx {

// `bytes` must be a multiple of the dtype's size. op kNone copies.
absl::Status HostReduce(plan::DType dtype, plan::ReduceOp op, void* dst, const void* src,
                        size_t bytes);

// Fills `bytes` with op's identity (0 for SUM, the lowest value for MAX): how reduction outputs
// that hold no valid data are prepared before a launch (plan.h).
absl::Status FillIdentity(plan::DType dtype, plan::ReduceOp op, void* dst, size_t bytes);

}  // namespace syncopate::ucx
