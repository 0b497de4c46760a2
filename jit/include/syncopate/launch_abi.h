// The ABI between the host runtime and a fused overlap kernel: the one struct a launch passes
// by value, and the record a timed-out wait leaves behind. Compiled both by the host compiler
// (runtime/) and by NVRTC (generated kernels), so it uses only fixed-width types and no headers
// beyond <cstdint>-equivalents. Changing it changes kAbiVersion, which is part of every kernel
// cache key.
//
// Protocol (see DESIGN.md "Executing on GPUs" and runtime/cuda/group.h):
// - Launch e (epoch e = 1, 2, ...) considers an incoming chunk arrived when its signal word on
//   this rank is >= e. Signals are never reset, so no memset between launches.
// - Where e comes from. Host epoch (launch_epoch == nullptr; copy-engine launches and groups
//   spanning nodes): `epoch` by value, and the host announces the launch with stream memory ops
//   (entered words, progress words) before the kernel; a graph of such a launch must have its
//   values rewritten per replay (LaunchGraph). Device epoch (launch_epoch != nullptr): the
//   kernel takes e = launch_epoch[0] + 1 itself, so a launch captured in anybody's CUDA graph
//   runs with a new epoch at every replay. Every CTA's thread 0 reads the word first thing,
//   keeps e in shared memory (LaunchEpoch()), then counts itself in launch_epoch[1]; the last
//   CTA to do so (every CTA has read the word by then) resets the count and stores e back for
//   the next launch. CTA 0 announces e: peer_entered[q] for every rank q of the node, and
//   progress[0] (host-mapped); the CTA that runs the tail waits writes progress[1] = e after
//   them. Ranks of a group may mix the two (the host writes launch_epoch[0] = e before a
//   host-epoch launch), as long as the host can count the epochs: no host-epoch launch after a
//   device-epoch launch was captured in a graph the runtime does not replay itself.
// - Producer tiles count into chunk_counters[c]; the last one resets the counter to 0 and
//   publishes chunk c: it release-stores chunk_ready[c] = epoch (the launch waits of a
//   copy-engine launch turn that into a gate for the copy's side stream); for the SM / direct
//   backends it copies the chunk to the peer itself and release-stores the peer's signal = epoch.
//   A chunk in tile parts (SM backend) is moved by every producer, each its own part, counted
//   after its move (and a fence); the last count release-stores the peer's signal.
// - Every dependency on another process is observed by a device thread with a deadline, never by
//   a stream wait (stream waits of one process share hardware queues: a blocked one stalls the
//   unrelated streams behind it, measured under MPS). The kernel runs `launch_waits`:
//     kGuard  before this rank's first write into (or read from) a peer: the peer entered the
//             launch (write-after-read guard across launches);
//     kGate   a copy-engine step's condition (peer entered, a chunk forwarded to this rank, a
//             chunk this kernel produced): when met, gate_words[gate] = epoch (host-mapped;
//             the step's side stream waits for it, a wait only this kernel or the host releases);
//     kTail   before the kernel ends: every chunk destined to this rank arrived, every rank that
//             pulls from this rank drained it.
//   Guards run in the comm CTAs (SM) and before a direct move or a tile part; gates and tails in
//   the control CTA (copy engine: CTA num_comm_ctas) or, with no control CTA, in comm CTA 0.
// - Every wait has a deadline (wait_timeout_ns, measured with %globaltimer). The first wait to
//   expire fills *timeout_record (host-mapped) and raises *device_abort (device memory: every
//   other spinning wait reads it and gives up at once). *abort_flag (host-mapped, set by the
//   host) is read only every kHostAbortPollSpins-th spin: polling host memory from many CTAs
//   takes the GPU's memory system down to a few GB/s for everyone (measured: 790 -> 1.8 GB/s).
//   An aborting control CTA releases every gate, so no side stream stays blocked.
// - Tile progress (tile_progress): the thread of a compute CTA that claims tiles stores each
//   ticket it draws (+1, relaxed) into its rank's tile-progress word, which the rank's peers on
//   the node read through the same table. Only a hint: a joined CTA waiting for a peer's step
//   keeps waiting while that peer's word moves, and leaves once it has stood still for
//   kJoinPeerWaitNs (impl/pieces.cuh). Never awaited, never reset, no ordering.
#ifndef SYNCOPATE_LAUNCH_ABI_H_
#define SYNCOPATE_LAUNCH_ABI_H_

#ifdef __CUDACC_RTC__
typedef unsigned int syncopate_u32;
typedef int syncopate_i32;
typedef unsigned long long syncopate_u64;
typedef long long syncopate_i64;
#else
#include <cstdint>
typedef uint32_t syncopate_u32;
typedef int32_t syncopate_i32;
typedef uint64_t syncopate_u64;
typedef int64_t syncopate_i64;
#endif

namespace syncopate {

constexpr int kAbiVersion = 6;
constexpr int kMaxRanks = 64;
constexpr int kMaxOperands = 8;
constexpr int kMaxScalars = 8;
// A protocol word awaited at epoch e counts as reached when it is e or up to kEpochLead - 1
// past it, as a distance on the 2^32 circle (a peer runs at most a launch or two ahead: each
// launch ends only after its peers took part in it). A word that launches skip falls behind by
// any distance and must read as not reached: a cyclic "seen >= e" (cuStreamWaitValue32's GEQ)
// reads one more than 2^31 launches behind as ahead (12 h of launches at 20 us); this misreads
// a stale word only in the last kEpochLead launches of each 2^32 it falls behind.
constexpr syncopate_u32 kEpochLead = 1u << 16;

// Written once, by the first wait that times out: it claims the record (atomicCAS of `timed_out`
// from 0 to kTimeoutRecordClaimed), fills the fields, fences, then stores kTimeoutRecordFilled.
// The host may read the record while kernels run (an op's error query): fields are valid only
// once `timed_out` is kTimeoutRecordFilled.
constexpr syncopate_u32 kTimeoutRecordClaimed = 1;
constexpr syncopate_u32 kTimeoutRecordFilled = 2;
struct WaitTimeoutRecord {
  syncopate_u32 timed_out;  // 0 until a wait expires, then claimed, then filled
  syncopate_i32 rank;       // the waiting rank
  syncopate_i32 tile;       // tile index, or -1 for a communication CTA
  syncopate_i32 chunk;      // chunk (plan transfer) being waited for
  syncopate_i32 peer;       // the rank expected to deliver it
  syncopate_i32 signal;     // signal index on the waiting rank (or chunk_ready index)
  syncopate_u32 expected;   // the epoch waited for
  syncopate_u32 seen;       // the value last read
  syncopate_u64 waited_ns;
  syncopate_i32 what;       // LaunchWaitKind + 1 for a launch wait (tile == -1), else 0
};

// One launch wait (see the protocol above); built by the host per prepared launch.
enum LaunchWaitKind : syncopate_i32 { kGuardWait = 0, kGateWait = 1, kTailWait = 2 };
struct LaunchWaitOp {
  const syncopate_u32* word;  // device address (this rank's control block, a peer's mapping,
                              // or a host-mapped word this rank's host writes)
  syncopate_i32 kind;         // LaunchWaitKind
  syncopate_i32 gate;         // kGateWait: gate word to release; ops of one gate are adjacent
  syncopate_i32 peer;         // the rank expected to write `word` (diagnosis)
  syncopate_i32 index;        // signal index, chunk_ready index or -1 (diagnosis)
  syncopate_i32 transfer;     // plan transfer the wait serves, or -1 (diagnosis)
  syncopate_i32 word_kind;    // what `word` is, for the message: 0 signal, 1 entered,
                              // 2 drained, 3 chunk_ready, 4 the host's inter-node proxy epoch
};
constexpr int kHostAbortPollSpins = 64;
// Arrival counters of transfer-program steps split over several comm CTAs
// (FusedLaunchArgs::step_counters), one per step.
constexpr int kStepCounterCapacity = 1 << 14;

struct FusedLaunchArgs {
  void* operands[kMaxOperands];   // this rank's operand pointers, in kernel-spec order
  syncopate_i64 scalars[kMaxScalars];
  syncopate_i32 rank;
  syncopate_i32 world_size;
  syncopate_u32 epoch;
  syncopate_u32 num_comm_ctas;    // CTAs [0, num_comm_ctas) run transfers (SM backend)
  syncopate_u32* signals;         // this rank's incoming signal words (symmetric allocation)
  syncopate_u32* const* peer_signals;  // device table [world_size]: every rank's signal words
  void* const* peer_operands;     // device table [kMaxOperands * world_size]: operand o on rank r
                                  // at peer_operands[o * world_size + r] (nullptr if not symmetric)
  syncopate_u32* chunk_counters;  // local producer counters, one per outgoing chunk, start at 0
  syncopate_u32* chunk_ready;     // local published-epoch words, one per outgoing chunk
  syncopate_u64 wait_timeout_ns;  // 0: wait forever (not recommended)
  WaitTimeoutRecord* timeout_record;  // host-mapped
  syncopate_u32* abort_flag;          // host-mapped, set by the host; read rarely
  syncopate_u32* device_abort;        // device memory, set by the first expiring wait
  const LaunchWaitOp* launch_waits;   // device array [num_launch_waits], or nullptr
  syncopate_u32 num_launch_waits;
  syncopate_u32 num_control_ctas;     // 0 or 1: CTA num_comm_ctas runs gates and tails
  syncopate_u32* gate_words;          // host-mapped gate words (copy-engine side streams)
  syncopate_u32* step_counters;       // device: arrivals per transfer-program step (SM backend,
                                      // a step split over several comm CTAs), start at 0
  syncopate_u64* cta_trace;           // device [4 * gridDim.x] or nullptr: impl/trace.cuh
  // Device [2]: the next tile ticket and the CTAs done claiming, for FusedSchedule::claim
  // (dynamic dealing). Zero at every launch's start: the last CTA to run out resets both. A
  // launch that aborts may leave them mid-way: the host then refuses the group's launches, but
  // replays of a caller's graph still run, with the device abort word raised (their results
  // are void; the op's error is sticky). nullptr: claim deals statically.
  syncopate_u32* tile_counter;
  // Device epoch (see "Where e comes from" above), or all three nullptr for a host epoch.
  syncopate_u32* launch_epoch;         // device [2]: the last launch's epoch, CTAs started
  syncopate_u32* const* peer_entered;  // device table [world_size]: rank q's entered word about
                                       // this rank (nullptr: q on another node)
  syncopate_u32* progress;             // host-mapped [2]: epoch started, epoch finished
  // Device [kStepCounterCapacity]: per transfer-program step, (epoch << 32) | pieces of the step
  // claimed in that launch, for plans whose transfers wait for tiles (impl/pieces.cuh). Tagged
  // with the epoch, so never reset; start at 0. nullptr: steps split statically.
  syncopate_u64* step_claims;
  // Device table [world_size]: rank q's tile-progress word (in q's control block; nullptr: q on
  // another node). nullptr: no tile progress published or read (a static deal, or hand-made
  // arguments). See "Tile progress" above.
  syncopate_u32* const* tile_progress;
};

}  // namespace syncopate

#endif  // SYNCOPATE_LAUNCH_ABI_H_
