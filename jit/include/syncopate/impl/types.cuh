// Device-side types shared by the schedules, the transfer routines and generated tables.
//
// Generated code fills `__device__ const` arrays of these structs; the field order is part of the
// contract with jit/compiler/codegen.cc (aggregate initialisers), so append, never reorder.
// Header-only, compiled by NVRTC (no std headers) and by nvcc.
#ifndef SYNCOPATE_IMPL_TYPES_CUH_
#define SYNCOPATE_IMPL_TYPES_CUH_

#include <syncopate/launch_abi.h>

#define SYNCOPATE_DEVICE __device__ __forceinline__

namespace syncopate {

// One output tile of the kernel's grid: tile coordinates along M and N, and its canonical index
// (m * tiles_n + n), which is what the schedule tables are indexed by.
struct Tile {
  int m;
  int n;
  int index;
};

// Mirrors syncopate::plan::DType and plan::ReduceOp (core/plan/plan.h).
enum DeviceDType : int {
  kDevF32 = 0,
  kDevF16 = 1,
  kDevBF16 = 2,
  kDevF64 = 3,
  kDevI32 = 4,
  kDevI64 = 5,
  kDevI8 = 6,
  kDevU8 = 7,
};
enum DeviceReduceOp : int { kDevReduceNone = 0, kDevReduceSum = 1, kDevReduceMax = 2 };
// Or'ed over a reduce op: no other write can race this reduction (the host proved every other
// write into its bytes ordered with it; jit/compiler/plain_reductions.h), so it may load, combine
// and store instead of using atomics (with -DSYNCOPATE_PLAIN_REDUCE=1; impl/copy.cuh says why
// not by default).
enum : int { kDevReducePlain = 8 };

// A signal word to wait for: signals[signal] on rank `signal_rank` must reach the epoch.
// `transfer` (plan transfer id) and `peer` (the rank expected to deliver) only feed the
// timeout record.
struct WaitEntry {
  int signal;
  int signal_rank;
  int transfer;
  int peer;
};

// A 2D byte copy: `rows` rows of `row_bytes`, offsets relative to the buffers' base pointers.
// Same meaning as syncopate::jit::CopySegment (jit/compiler/copy_descriptors.h).
struct CopySegment {
  long long src_offset;
  long long dst_offset;
  long long row_bytes;
  long long rows;
  long long src_pitch;
  long long dst_pitch;
};

// One chunk move as the kernel executes it (an outgoing chunk, or a transfer-program step).
struct TransferOp {
  int transfer;     // plan transfer id
  int src_slot;     // operand slot of the source buffer (args.operands / peer_operands)
  int dst_slot;     // operand slot of the destination buffer
  int src_rank;
  int dst_rank;
  int signal;       // signal index set on dst_rank when complete
  int reduce;       // DeviceReduceOp, | kDevReducePlain
  int dtype;        // DeviceDType of the elements
  int seg_begin;    // copy segments [seg_begin, seg_end) of Tables::segments()
  int seg_end;
  int dep_begin;    // waits [dep_begin, dep_end) of Tables::deps() before the copy
  int dep_end;
  int ready_chunk;  // transfer program: local outgoing chunk whose chunk_ready to await, or -1
  int producers;    // outgoing chunks: number of tiles writing the source region
  int direct;       // outgoing chunks: kPublishOnly, kDirectMove or kLandingGuard;
                    // transfer program: kAnyOrder or kAfterPrevious (ProgramStepOrder)
};

// TransferOp::direct for the per-rank chunk table (counters / chunk_ready words):
enum ChunkKind : int {
  kPublishOnly = 0,   // last producer sets chunk_ready; comm CTAs or the host move it
  kDirectMove = 1,    // SM mode: the last producer moves it to the peer and sets its signal
  kLandingGuard = 2,  // last producer sets this rank's signal word `signal` (peers may reduce in)
  kTileParts = 3,     // SM mode: every producer moves its own part (the tables' tile_out_segs)
                      // and the last one sets the peer's signal; else as kPublishOnly
};

// TransferOp::direct for transfer-program steps. Channel order is part of the plan's semantics
// (plan.h; an imported plan may rely on it for data), but only a step that reads or writes bytes
// an earlier step of its channel writes (or writes bytes one reads) depends on it; the host
// marks those (codegen.cc). Where CTAs share a channel's steps in static parts, a marked step
// starts only once the channel's previous step completed (and with it, every earlier one: each
// part CTA runs the channel's steps in order); an unmarked one never waits for a sibling part,
// whose CTA may not be resident yet.
enum ProgramStepOrder : int {
  kAnyOrder = 0,
  kAfterPrevious = 1,
};

SYNCOPATE_DEVICE int FlatThreadIdx() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
SYNCOPATE_DEVICE int FlatBlockDim() { return blockDim.x * blockDim.y * blockDim.z; }

}  // namespace syncopate

#endif  // SYNCOPATE_IMPL_TYPES_CUH_
