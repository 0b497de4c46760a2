// The plan template of each op's bucket; see op_plans.h.
#include "ops/core/op_plans.h"

#include <cstdlib>
#include <string>

namespace syncopate::ops {

std::string AllReducePlanKnob() {
  const char* knob = std::getenv("SYNCOPATE_OPS_ALLREDUCE_PLAN");
  return knob != nullptr ? knob : "";
}

// allreduce.direct_out copies each final chunk into a buffer no peer addresses, which a run at
// the bucket's M points at the caller's C: the transfers' kernel writes the result there, and no
// copy of the whole output follows it. Measured against allreduce.direct (bench/RESULTS.md,
// twenty-second session; H100, 2 ranks as MPS clients, same call): at M=128 (8B, 1 MiB of C) the
// same GPU time per run (0.131 ms) and 2.8-3.0 us less host time per run call (7.9-8.6 against
// 10.7-11.6: one launch fewer); but 4-7% slower fused at M=8192 and 9-16% slower unfused at 2048,
// where the copies inside the kernel cost more than one full-GPU copy after it. So direct_out
// only where C is small enough for the copy's launch, not its bytes, to be its cost. (Measured
// with every copy on one channel; each source's copies have their own since, not yet measured.)
// Set SYNCOPATE_OPS_ALLREDUCE_PLAN for `ops_bench --fill-cache` too, or the kernels compile on
// the GPU.
std::string AllReducePlanFor(const OpConfig& config, int64_t bucket_m) {
  if (std::string knob = AllReducePlanKnob(); !knob.empty()) return knob;
  return bucket_m * config.n * kElementBytes <= kDirectOutMaxOutputBytes ? "allreduce.direct_out"
                                                                         : "allreduce.direct";
}

// allreduce.direct rather than rs_ag for the larger buckets: at 4 ranks (H100, MPS 25% each, 8B
// M=2048, same call) its transfers alone took 0.241 ms against the rings' 0.291, and the unfused
// op 0.664 against 0.722 (bench/RESULTS.md, twelfth session); at 2 ranks the two plans are the
// same transfers.
std::string PlanTemplateFor(const OpConfig& config, int64_t bucket_m) {
  switch (config.kind) {
    case OpKind::kAllGatherMatmul:
      return "allgather.push";
    case OpKind::kMatmulReduceScatter:
      return "reducescatter.direct";
    case OpKind::kMatmulAllReduce:
      return AllReducePlanFor(config, bucket_m);
  }
  return "";
}

}  // namespace syncopate::ops
