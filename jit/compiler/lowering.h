// Lowering: plan x kernel spec -> per-rank schedule tables (the data a fused kernel's schedule
// reads). For every rank of the plan, so one compile serves every rank of a node (the kernel
// indexes the tables by args.rank).
//
// Per rank r:
// - wait set of tile t: every transfer whose destination is r, whose destination buffer is bound
//   to a consumed operand, and whose destination region overlaps t's read footprint of that
//   operand. Chunks need not align with tiles: a tile waits on every chunk it overlaps; initial
//   (local) data needs no wait.
// - outgoing chunks: transfers with after_compute whose source lives on r; producers = tiles
//   whose write footprint of a produced operand bound to the source buffer overlaps the source
//   region. "direct" chunks (producers > 0, no deps, executed by r, at most kMaxDirectMoveBytes)
//   are moved by their last producer tile in SM mode; the others by the transfer program (split
//   over the comm CTAs) or the host.
// - tile parts (spec.push_tiles): an outgoing chunk that could be direct (whatever its size),
//   whose source and destination regions are single boxes of the same extents, written by one
//   produced operand whose tiles cut it into disjoint boxes that cover it, on a rank whose tiles
//   wait for nothing, with no transfer depending on it and none of its channel touching its
//   bytes (its parts leave out of channel order), is moved a tile at a time: each
//   producer tile, once written, moves its own box (SM mode; it waits for the destination's entry
//   guard first, as a direct move does) and the last one sets the destination's signal. Such a
//   chunk leaves the transfer program; with any such chunk no reduction of the schedule is plain
//   (plain_reductions.h orders whole chunks). The copy engine still moves it whole.
// - tile order: waves by estimated arrival (longest chain of deps and channel predecessors over
//   the wait set; local tiles first), the kernel's own swizzle kept inside a wave.
// - transfer program (SM backend): r's transfers per channel in list order, minus direct and
//   tile-part chunks, each with its deps (signal words) and the outgoing chunk it must await.
// - landing guards: a reduction that lands in a buffer the destination's own computation writes
//   (ring ReduceScatter hops into "input") must not land before that computation wrote the
//   overlapping tiles (templates.h's "ordering obligation outside the plan model"). For each such
//   incoming transfer the destination's producer tiles count into a guard, whose last producer
//   release-stores an extra signal word (index >= every plan signal) on the destination; whoever
//   executes the transfer waits for that word first. The transfer is then never "direct".
// - node map (optional, rank -> node id): transfers between ranks of different nodes are carried
//   by the host proxy (UCX), not by the kernel or the node's streams, because neither can reach
//   another node's memory or signal words. They are left out of every program and never direct;
//   an after_compute one stays an outgoing chunk, so the kernel still publishes chunk_ready for
//   the proxy to wait on, and tiles still wait on its signal (the proxy sets it). The proxy
//   moves plain PUSH copies only, and nothing on a node can observe a signal set on another
//   node, so reductions, PULLs, guarded landings and dependencies across nodes that no one could
//   observe are Unimplemented (see Lower).
// Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/plan/plan.h"
#include "jit/compiler/copy_descriptors.h"
#include "jit/compiler/kernel_spec.h"

namespace syncopate::jit {

// Largest outgoing chunk its last producer tile moves alone ("direct"). One CTA moves about
// 18 GB/s (measured on an H100 under MPS: a 32 MiB GEMM+ReduceScatter chunk took 1.78 ms), while
// the transfer program splits a step over every comm CTA of its channel (16 by default: ~300
// GB/s). Below this size the direct move's head start (no comm CTA has to notice chunk_ready)
// is worth more than the bandwidth: 128 KiB take one CTA about 7 us.
inline constexpr int64_t kMaxDirectMoveBytes = int64_t{128} << 10;

// The kernel's own tile order: tile i -> canonical id (m * tiles_n + n). Row-major when
// group_m <= 1, else grouped-M. Mirrors syncopate::SwizzleTile (impl/schedule.cuh).
int64_t SwizzledTile(int64_t i, int64_t tiles_m, int64_t tiles_n, int64_t group_m);

// An operand slot of the launch ABI (FusedLaunchArgs::operands). The spec's operands come first,
// in call order; plan buffers that transfers touch but no operand binds follow (they are not
// passed to the kernel, but the kernel's copies address them).
struct OperandSlot {
  int slot = 0;
  std::string name;    // the spec operand's name, or the plan buffer's name for extra slots
  std::string buffer;  // plan buffer, empty for an unbound local operand
  plan::DType dtype = plan::DType::kF32;
  OperandRole role = OperandRole::kLocal;
  bool kernel_param = true;  // false for plan-only slots
  // Some reduce transfer lands here and no operand of the kernel produces it: the runtime must
  // fill it with the reduction's identity (0 for sum) before the launch (plan.h's reduce rule).
  bool needs_identity_fill = false;
  // A plan-only slot that only its own rank's LOCAL_COPY transfers touch: no peer addresses it,
  // so the runtime may bind any device memory there, and an SM-backend launch may point it at a
  // caller's memory for that launch alone (allreduce.direct_out's "out": the caller's output
  // written by the kernel, not copied after it).
  bool rank_private = false;
  plan::Shape shape;
  int64_t bytes = 0;
};

struct TileWait {
  int signal = 0;    // signal index on this rank
  int transfer = 0;  // plan transfer id
  int peer = 0;      // the rank whose data it is (the transfer's source rank)
  friend bool operator==(const TileWait&, const TileWait&) = default;
};

struct OutgoingChunk {
  int transfer = 0;                 // plan transfer id
  int producers = 0;                // tiles writing into its source region
  std::vector<int> producer_tiles;  // canonical tile ids, ascending
  bool direct = false;
  // Moved in tile parts (never also direct); part_segments[i]: producer_tiles[i]'s box of the
  // transfer, as copy segments (offsets from the same buffers' bases as the transfer's).
  bool tile_parts = false;
  std::vector<std::vector<CopySegment>> part_segments;
};

// A landing guard: signal word `signal` on rank `rank` reaches the epoch once every tile of that
// rank writing the destination region of `transfer` is done.
struct GuardRef {
  int rank = 0;
  int signal = 0;
  friend bool operator==(const GuardRef&, const GuardRef&) = default;
};

struct LandingGuard {
  int transfer = 0;  // the incoming transfer it holds back
  int signal = 0;    // signal word index on this rank
  int producers = 0;
  std::vector<int> producer_tiles;  // canonical tile ids, ascending
};

struct ProgramStep {
  int transfer = 0;
  std::vector<int> deps;  // plan transfer ids
  std::vector<GuardRef> guards;  // landing guards to await (on the destination rank)
  int ready_chunk = -1;   // local outgoing chunk index to await, or -1
};

struct RankSchedule {
  int rank = 0;
  std::vector<int> tile_order;                 // canonical tile ids, execution order
  std::vector<int> tile_wave;                  // by canonical id: estimated arrival step
  std::vector<std::vector<TileWait>> waits;    // by canonical id, ascending signal
  // By canonical id: local chunk indices the tile counts into: outgoing chunks [0, outgoing.size())
  // then landing guards (outgoing.size() + g).
  std::vector<std::vector<int>> tile_outgoing;
  std::vector<OutgoingChunk> outgoing;         // local outgoing chunk index -> chunk
  std::vector<LandingGuard> guards;            // incoming reductions onto computed data
  std::vector<std::vector<ProgramStep>> program;  // per channel of this rank
  // Inter-node transfers this rank executes (the host proxy's work): plan transfer ids, channel 0's
  // in list order, then channel 1's, ...; a transfer is in exactly one of `program` and this.
  std::vector<int> proxied;
  int num_signals = 0;  // signal words this rank uses (plan signals, then guards)
  int num_chunks() const { return static_cast<int>(outgoing.size() + guards.size()); }
};

// What the generated tables need of a plan transfer.
struct LoweredTransfer {
  int id = 0;
  int rank = 0;  // executing rank
  int src_rank = 0;
  int dst_rank = 0;
  int signal = 0;
  std::string src_buffer;
  std::string dst_buffer;
  plan::ReduceOp reduce = plan::ReduceOp::kNone;
  plan::DType dtype = plan::DType::kF32;  // of the source buffer
  bool inter_node = false;                // source and destination ranks are on different nodes
  // A reduction no other write can race (plain_reductions.h): the kernel combines with plain
  // loads and stores instead of atomics.
  bool plain_reduce = false;
};

struct LoweredSchedule {
  std::string plan_name;
  std::string plan_hash;
  int world_size = 0;
  std::vector<int> nodes;  // rank -> node id, world_size entries (all 0 without a node map)
  int tiles_m = 0;
  int tiles_n = 0;
  int num_tiles = 0;
  std::vector<OperandSlot> slots;
  std::vector<RankSchedule> ranks;
  std::vector<LoweredTransfer> transfers;  // by transfer id
  // Copy descriptors of every plan transfer, by transfer id.
  std::vector<std::vector<CopySegment>> segments;
  int max_signals = 0;       // max over ranks of num_signals
  int plan_signals = 0;      // max over ranks of plan signal indices + 1; guards start here
  int max_outgoing = 0;      // max over ranks of num_chunks() (chunk_counters words)
  int max_program_channels = 0;  // max over ranks of channels with at least one program step
};

// `nodes` maps rank -> node id (world_size entries, each >= 0); empty puts every rank on one node.
// A malformed map is InvalidArgument. With ranks on several nodes, Unimplemented when:
// - an inter-node transfer is not a plain PUSH (PULL, reduce op) or lands on data its
//   destination computes (a landing guard the proxy cannot observe);
// - an inter-node transfer depends on an intra-node transfer that lands on another node than
//   the one executing it (inter-node deps are fine: the proxy sees them over UCX);
// - an intra-node transfer depends on a transfer landing on another node than its own.
absl::StatusOr<LoweredSchedule> Lower(const plan::Plan& plan, const KernelSpec& spec,
                                      const std::vector<int>& nodes = {});

// The spec's operands as slots 0..n-1, in call order (the local kernel's whole slot list).
std::vector<OperandSlot> SpecOperandSlots(const KernelSpec& spec);

// Slot index of the plan buffer `buffer` in `slots`, or -1.
int SlotOfBuffer(const std::vector<OperandSlot>& slots, std::string_view buffer);

// Whether a launch may point `slot` at other memory for that launch alone: a kernel parameter
// of the kernel's own (no plan buffer), so no peer and no copy program addresses it; or a
// rank-private plan buffer, which no peer addresses but a copy-engine launch's copy program does
// (the runtime refuses those there: IsCopyProgramOperand).
bool IsPerLaunchOperand(const OperandSlot& slot);
// Whether a copy-engine launch's host-built copy program holds `slot`'s bound address: a plan
// buffer. A per-launch pointer there would be used by the kernel but not by the copies.
bool IsCopyProgramOperand(const OperandSlot& slot);
// OK when a launch may use `pointers` (entry i, where not null, for slot i) in place
// of the bound ones: each names a slot of `slots` that IsPerLaunchOperand, and with
// `copy_program` (a copy-engine launch) none that IsCopyProgramOperand, where the copies would
// keep the bound address while the kernel used the new one. Else InvalidArgument naming the slot.
absl::Status CheckPerLaunchOperands(const std::vector<OperandSlot>& slots, bool copy_program,
                                    absl::Span<void* const> pointers);
// The slot of operand `name` in `slots` if IsPerLaunchOperand; else InvalidArgument naming why.
absl::StatusOr<int> PerLaunchOperandSlot(const std::vector<OperandSlot>& slots,
                                         std::string_view name);

}  // namespace syncopate::jit
