// Which chunk plan template an op's bucket runs: part of the path (ChoosePath names it, so
// syncopate_choose_path answers without a GPU), built into the bucket's kernels by PlanBucket.
// Standard library only, like the rest of the path heuristic.
#pragma once

#include <cstdint>
#include <string>

#include "syncopate/ops.h"

namespace syncopate::ops {

// Bytes per element of every op's tensors (bf16 and fp16).
inline constexpr int64_t kElementBytes = 2;

// An AllReduce bucket whose C is at most this many bytes takes allreduce.direct_out (the run
// then needs no copy after the kernel), a larger one allreduce.direct (AllReducePlanFor).
inline constexpr int64_t kDirectOutMaxOutputBytes = int64_t{2} << 20;

// SYNCOPATE_OPS_ALLREDUCE_PLAN, a developer knob for A/B runs: one AllReduce plan for every
// bucket; "" when unset.
std::string AllReducePlanKnob();

// The AllReduce's plan for the bucket at `bucket_m`, unless AllReducePlanKnob() overrides it.
std::string AllReducePlanFor(const OpConfig& config, int64_t bucket_m);

// The plan template of `config`'s bucket at `bucket_m`: allgather.push, reducescatter.direct,
// or AllReducePlanFor's.
std::string PlanTemplateFor(const OpConfig& config, int64_t bucket_m);

}  // namespace syncopate::ops
