// A readable per-step, per-rank table of a plan, for `syncopate plan show` and for test failure
// messages. Deterministic: the same plan always renders the same text.
// Thread-safety: a pure function of its argument.
#pragma once

#include <string>

#include "core/plan/plan.h"

namespace syncopate::plan {

// Layout:
//   plan allgather.ring  collective allgather  world 2  hash 3f2a9c01d4e7
//   buffer data bf16 [8,4]
//   initial r0 data[0:4,0:4)
//   initial r1 data[4:8,0:4)
//   step 0
//     t0 r0 ch0 push chunk 0 data[0:4,0:4) -> r1 data[0:4,0:4) sig 0
//     t1 r1 ch0 push chunk 1 data[4:8,0:4) -> r0 data[4:8,0:4) after t0 sig 1
//   postcondition 4 expectations
// Within a step, transfers are ordered by rank, channel, then channel order. Pulls read the peer
// ("r1 ch0 pull chunk 0 r0 data[..] -> data[..]"); reductions add "sum"/"max"; a source produced
// by the computation adds "after compute". Regions of more than 3 boxes are abbreviated.
std::string RenderTimeline(const Plan& plan);

}  // namespace syncopate::plan
