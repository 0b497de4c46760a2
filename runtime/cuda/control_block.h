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
//   tile_progress             the last tile ticket (+1) a compute CTA of this rank drew, any
//                             launch: peers' joined CTAs read it to tell a rank still computing
//                             from one that stopped (launch_abi.h "Tile progress"). Written by
//                             this rank only; never awaited.
// Plus, local to a rank (plain device memory): chunk_counters[], chunk_ready[], step_counters[],
// the device abort word, tile_counter[2] and the epoch-tagged step_claims[] (launch_abi.h,
// impl/pieces.cuh); and in host-mapped memory (HostWords) the
// WaitTimeoutRecord, the host abort flag, the progress words S writes at a launch's start and
// end (read by Sync() without any stream), and the gate words of copy-engine steps.
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
constexpr size_t kTileProgressOffset = kDrainedOffset + sizeof(uint32_t) * kMaxRanks;
constexpr size_t kControlBytes = kTileProgressOffset + sizeof(uint32_t);

constexpr int kGateCapacity = 4096;         // gate words: copy-engine steps with a condition

// Host-mapped words.
struct HostWords {
  WaitTimeoutRecord record;
  uint32_t abort_flag;        // set by the host (Sync's safety net); kernels read it rarely
  uint32_t progress_entered;  // epoch of the last launch that started on S
  uint32_t progress_finished; // epoch of the last launch that ended on S
  uint32_t gates[kGateCapacity];
  // Side streams write it (any value) with a fenced stream write: the copies before it are
  // visible before a signal copied after it (a device-counted launch's signals are copies).
  uint32_t fence_scratch;
};

}  // namespace syncopate::cuda
