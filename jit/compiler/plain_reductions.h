// Which reductions may run as a plain read-modify-write instead of atomics.
//
// The plan model makes reductions atomic (plan.h): reductions into one element that nothing
// orders may land at once, and the SM backend uses system-scope vector reductions. But many
// plans order every write into a region: a ring hop reduces into bytes only it writes, after the
// destination's computation (a landing guard) and before whatever reads them (a dep). Such a
// reduction cannot race, so the kernel may load the destination, combine and store. The tables
// mark them (TransferOp::reduce | kDevReducePlain); the device takes the plain path only with
// -DSYNCOPATE_PLAIN_REDUCE=1, since on the one-GPU stand-in it measured slower than the atomics
// (bench/RESULTS.md, thirteenth session).
//
// A reduction is plain when every other transfer whose destination bytes overlap its own is
// ordered with it by the transitive closure of deps. Channel order is not counted (conservative:
// a plan that orders two reductions only by their channel keeps atomics). Writes by the
// destination's own computation are ordered by landing guards (lowering.h) in either case.
#ifndef SYNCOPATE_JIT_COMPILER_PLAIN_REDUCTIONS_H_
#define SYNCOPATE_JIT_COMPILER_PLAIN_REDUCTIONS_H_

#include <vector>

#include "core/plan/plan.h"
#include "jit/compiler/lowering.h"

namespace syncopate::jit {

// By transfer id: true for a reduction no other write can race. `by_id` is the plan's transfers
// by id and `lw` their lowered records and copy segments (LoweredSchedule::transfers, segments).
std::vector<bool> PlainReductions(const std::vector<const plan::Transfer*>& by_id,
                                  const LoweredSchedule& lw);

}  // namespace syncopate::jit

#endif  // SYNCOPATE_JIT_COMPILER_PLAIN_REDUCTIONS_H_
