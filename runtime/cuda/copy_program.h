// The copy-engine transfer program of one rank: the plan's transfers executed by this rank,
// turned into stream operations (waits on 32-bit words, 2D copies between mapped buffers, writes
// of a signal word). Built on the host from a Plan and the ranks' buffer addresses; has no CUDA
// dependency, so it is unit-tested without a GPU. copy_engine.h issues it on streams.
//
// Words a step may wait on (all compared "word >= epoch", the launch's epoch):
//   kSignal      a signal word on this rank (a chunk a peer delivered: forwarding in a ring);
//   kPeerSignal  a signal word on another rank (a dependency between two other ranks);
//   kChunkReady  this rank's chunk_ready[index] (the fused kernel produced the source region);
//   kEntered     entered[peer] on this rank: `peer` has started this launch, so its buffers
//                may be overwritten (write-after-read guard across launches; see launch_protocol.h).
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/plan.h"

namespace syncopate::cuda {

// A 2D byte copy: `rows` rows of `row_bytes`; byte addresses (device virtual addresses here).
struct Copy2D {
  uint64_t src = 0;
  uint64_t dst = 0;
  uint64_t row_bytes = 0;
  uint64_t rows = 0;
  uint64_t src_pitch = 0;
  uint64_t dst_pitch = 0;
  friend bool operator==(const Copy2D&, const Copy2D&) = default;
};

enum class WaitKind : uint8_t { kSignal, kPeerSignal, kChunkReady, kEntered };

struct WordWait {
  WaitKind kind = WaitKind::kSignal;
  int rank = 0;   // whose word (kPeerSignal: the signal's rank; else this rank)
  int index = 0;  // signal index, chunk_ready index, or the peer for kEntered
  friend bool operator==(const WordWait&, const WordWait&) = default;
};

struct CopyStep {
  int transfer = -1;  // plan transfer id
  int channel = 0;
  std::vector<WordWait> waits;
  std::vector<int> after_steps;  // indices (in CopyProgram::steps) of this rank's steps on other
                                 // channels that must complete first
  std::vector<Copy2D> copies;
  int signal_rank = 0;  // set signals[signal] = epoch on this rank when the copies are done
  int signal = -1;
  int drained_rank = -1;  // PULL: after the copy, tell the source rank we are done reading it
};

struct CopyProgram {
  int rank = 0;
  int num_channels = 0;
  // In an order where every after_steps entry comes earlier (issue order).
  std::vector<CopyStep> steps;
  // Ranks that PULL from this rank: at the end of a launch, wait until each has drained it.
  std::vector<int> pulled_by;
  // Largest signal index any rank's plan uses, plus one.
  int num_signals = 0;
};

// Device address of `buffer` on `rank` as mapped in this process (symmetric buffers give every
// rank's; a local-only buffer only this rank's).
using BufferAddressFn =
    std::function<absl::StatusOr<uint64_t>(const std::string& buffer, int rank)>;
// chunk_ready index the fused kernel publishes for an after_compute transfer: its local
// outgoing-chunk index in the compiler's LaunchMetadata::outgoing_transfers; when empty, the
// transfer id.
using ChunkReadyIndexFn = std::function<absl::StatusOr<int>(int transfer_id)>;

// Builds `rank`'s program. Copies come from the compiler's copy descriptors
// (jit/compiler/copy_descriptors.h), placed at the buffers' addresses. Unimplemented for
// reductions (the copy engine only copies; use the SM or direct backend), InvalidArgument for
// regions that do not fit their buffers.
//
// `nodes` maps rank -> node id (world_size entries, each >= 0; empty: one node, malformed:
// InvalidArgument). Streams reach only the node's own memory, so transfers between nodes are left
// to the host proxy: they get no step (and a PULL from another node puts no rank in pulled_by),
// and, as in the overlap compiler (jit/compiler/lowering.h), one this rank executes must be a
// plain PUSH, and a step depending on a transfer that lands on another node is Unimplemented.
absl::StatusOr<CopyProgram> BuildCopyProgram(const plan::Plan& plan, int rank,
                                             const BufferAddressFn& address,
                                             const ChunkReadyIndexFn& ready_index = {},
                                             const std::vector<int>& nodes = {});

// For a launch whose epoch only the device knows (one captured in a graph the caller replays:
// the stream cannot carry a value that changes per replay), the gate word each step's signal and
// drained writes copy their value from: the step's own gate, else the source of the step before
// it on its channel or of a step in its after_steps. Those steps have run by then, so their gate
// holds this launch's epoch (the kernel wrote it; gates are zeroed before each such launch). -1
// for a step with no source. `step_gates[i]`: step i's gate or -1. InvalidArgument naming the
// transfer when a step that writes a word has no source.
absl::StatusOr<std::vector<int>> EpochSourceGates(const CopyProgram& program,
                                                  const std::vector<int>& step_gates);

}  // namespace syncopate::cuda
