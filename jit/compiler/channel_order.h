// Which transfer-program steps depend on their channel's order for data.
//
// Channel order is part of a plan's semantics (plan.h): a step may read what an earlier step of
// its channel wrote without a dep (msccl_import.cc drops same-channel deps). The SM backend's comm
// CTAs may split a channel's steps into static parts run by several CTAs; a part CTA must then not
// start such a step before every part of the earlier ones completed. For the other steps that
// wait would only hold a slot for a sibling part's CTA, which may not be resident yet, so the
// generated tables mark just the steps that need it (TransferOp::direct = kAfterPrevious).
#ifndef SYNCOPATE_JIT_COMPILER_CHANNEL_ORDER_H_
#define SYNCOPATE_JIT_COMPILER_CHANNEL_ORDER_H_

#include <vector>

#include "jit/compiler/lowering.h"

namespace syncopate::jit {

// For each step of `channel` (one rank's program channel, in order): true when its bytes overlap
// bytes an earlier step of the channel writes (it reads or writes them) or reads (it writes them),
// on the same rank and buffer. Writes that are both reductions with the same op commute and do
// not count. Conservative: a segment's extent is its whole span, gaps between rows included.
std::vector<bool> StepsAfterPrevious(const LoweredSchedule& lw,
                                     const std::vector<ProgramStep>& channel);

}  // namespace syncopate::jit

#endif  // SYNCOPATE_JIT_COMPILER_CHANNEL_ORDER_H_
