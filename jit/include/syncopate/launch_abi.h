// The ABI between the host runtime and a fused overlap kernel: the one struct a launch passes
// by value, and the record a timed-out wait leaves behind. Compiled both by the host compiler
// (runtime/) and by NVRTC (generated kernels), so it uses only fixed-width types and no headers
// beyond <cstdint>-equivalents. Changing it changes kAbiVersion, which is part of every kernel
// cache key.
//
// Protocol (see DESIGN.md "Executing on GPUs"):
// - Launch e (epoch e = 1, 2, ...) considers an incoming chunk arrived when its signal word on
//   this rank is >= e. Signals are never reset, so no memset between launches and CUDA-graph
//   replay works (the runtime bumps `epoch` through a device-side counter when graphs replay).
// - Producer tiles count into chunk_counters[c]; the last one resets the counter to 0 and
//   publishes chunk c: for the copy-engine backend it release-stores chunk_ready[c] = epoch
//   (a host-side stream waits on it); for the SM / direct backends it copies the chunk to the
//   peer itself and release-stores the peer's signal word = epoch.
// - Every wait has a deadline (wait_timeout_ns, measured with %globaltimer). The first wait to
//   expire fills *timeout_record (host-mapped) and sets *abort_flag; every other wait then gives
//   up at once, the kernel returns, and the host turns the record into an error naming the peer.
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

constexpr int kAbiVersion = 1;
constexpr int kMaxRanks = 64;
constexpr int kMaxOperands = 8;
constexpr int kMaxScalars = 8;

// Written once, by the first wait that times out (guarded by atomicCAS on `timed_out`).
struct WaitTimeoutRecord {
  syncopate_u32 timed_out;  // 0 until a wait expires
  syncopate_i32 rank;       // the waiting rank
  syncopate_i32 tile;       // tile index, or -1 for a communication CTA
  syncopate_i32 chunk;      // chunk (plan transfer) being waited for
  syncopate_i32 peer;       // the rank expected to deliver it
  syncopate_i32 signal;     // signal index on the waiting rank (or chunk_ready index)
  syncopate_u32 expected;   // the epoch waited for
  syncopate_u32 seen;       // the value last read
  syncopate_u64 waited_ns;
};

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
  syncopate_u32* abort_flag;          // device or host-mapped word, 0 unless a wait timed out
};

}  // namespace syncopate

#endif  // SYNCOPATE_LAUNCH_ABI_H_
