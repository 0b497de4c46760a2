// Layout of the per-rank symmetric control block and the launch protocol's words.
//
// Every rank of a group owns one symmetric "control" allocation (mapped by every peer):
//   signals[kSignalCapacity]  incoming chunk signals; signals[s] >= epoch: chunk s of this launch
//                             arrived (set by the peer's copy engine, comm CTA or epilogue)
//   entered[kMaxRanks]        entered[q] = e: rank q has started launch e. Written by q into every
//                             peer's block when its launch e starts on its stream, i.e. after all
//                             of q's earlier work (its reads of launch e-1's data included) is
//                             done. Rank r waits entered[q] >= e before it writes into (PUSH) or
//                             reads from (PULL) q's buffers in launch e: the write-after-read
//                             guard across launches, without a barrier at the end of a launch.
//   drained[kMaxRanks]        drained[q] = e: rank q finished pulling from this rank in launch e;
//                             a rank that is pulled from ends its launch only after that, so its
//                             caller may overwrite the source afterwards.
// Plus, local to a rank (plain device memory): chunk_counters[] and chunk_ready[] (launch_abi.h),
// and in host-mapped memory the WaitTimeoutRecord and the abort flag.
//
// Epochs: launch e = 1, 2, ... of a group (any kernel of the group; all ranks launch the same
// sequence). Nothing is reset between launches: words only grow. Thread-safety: constants only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "syncopate/launch_abi.h"

namespace syncopate::cuda {

constexpr int kSignalCapacity = 1 << 16;
constexpr int kChunkCapacity = 1 << 14;  // outgoing chunks per kernel (counters / ready words)

constexpr size_t kSignalsOffset = 0;
constexpr size_t kEnteredOffset = kSignalsOffset + sizeof(uint32_t) * kSignalCapacity;
constexpr size_t kDrainedOffset = kEnteredOffset + sizeof(uint32_t) * kMaxRanks;
constexpr size_t kControlBytes = kDrainedOffset + sizeof(uint32_t) * kMaxRanks;

// Host-mapped words: the timeout record, then the abort flag.
struct HostWords {
  WaitTimeoutRecord record;
  uint32_t abort_flag;
};

}  // namespace syncopate::cuda
