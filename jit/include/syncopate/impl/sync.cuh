// Memory-ordering primitives and the bounded wait every device-side wait goes through.
//
// Signals cross processes and GPUs, so acquire/release are system scope (.sys). Only one thread
// of a CTA spins (the caller decides which); the CTA learns the outcome through a barrier.
// Header-only, compiled by NVRTC and nvcc.
#ifndef SYNCOPATE_IMPL_SYNC_CUH_
#define SYNCOPATE_IMPL_SYNC_CUH_

#include <syncopate/impl/types.cuh>

namespace syncopate {

SYNCOPATE_DEVICE unsigned LoadAcquireSys(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

SYNCOPATE_DEVICE void StoreReleaseSys(unsigned* p, unsigned v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// The abort flag may live in host-mapped memory: a relaxed system-scope load sees host and peer
// writes without ordering anything else.
SYNCOPATE_DEVICE unsigned LoadRelaxedSys(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

SYNCOPATE_DEVICE unsigned long long GlobalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

SYNCOPATE_DEVICE bool LaunchAborted(const FusedLaunchArgs& args) {
  return args.abort_flag != nullptr && LoadRelaxedSys(args.abort_flag) != 0u;
}

// Fills the timeout record once per launch (the first expiring wait wins the atomicCAS) and
// raises the abort flag so every other wait gives up at once.
SYNCOPATE_DEVICE void RecordTimeout(const FusedLaunchArgs& args, int tile, const WaitEntry& w,
                                    unsigned seen, unsigned long long waited_ns) {
  WaitTimeoutRecord* rec = args.timeout_record;
  if (rec != nullptr && atomicCAS(&rec->timed_out, 0u, 1u) == 0u) {
    volatile WaitTimeoutRecord* v = rec;
    v->rank = args.rank;
    v->tile = tile;
    v->chunk = w.transfer;
    v->peer = w.peer;
    v->signal = w.signal;
    v->expected = args.epoch;
    v->seen = seen;
    v->waited_ns = waited_ns;
  }
  if (args.abort_flag != nullptr) {
    __threadfence_system();
    atomicExch(args.abort_flag, 1u);
  }
  __threadfence_system();
}

// Spins (one thread) until *flag >= args.epoch. `start_ns` is when the enclosing wait began: a
// wait set shares one deadline. Returns false when the launch aborted (this wait expired and
// recorded it, or another wait had already expired).
SYNCOPATE_DEVICE bool SpinUntilEpoch(const FusedLaunchArgs& args, const unsigned* flag,
                                     const WaitEntry& w, int tile,
                                     unsigned long long& start_ns) {
  unsigned seen = LoadAcquireSys(flag);
  if (seen >= args.epoch) return true;
  if (start_ns == 0ull) start_ns = GlobalTimerNs();
  unsigned backoff = 32;
  for (;;) {
    if (LaunchAborted(args)) return false;
    const unsigned long long now = GlobalTimerNs();
    if (args.wait_timeout_ns != 0ull && now - start_ns > args.wait_timeout_ns) {
      RecordTimeout(args, tile, w, seen, now - start_ns);
      return false;
    }
#if __CUDA_ARCH__ >= 700
    __nanosleep(backoff);
#endif
    if (backoff < 1024) backoff *= 2;
    seen = LoadAcquireSys(flag);
    if (seen >= args.epoch) return true;
  }
}

// The signal word a WaitEntry names: this rank's own array, or a peer's through peer_signals.
SYNCOPATE_DEVICE const unsigned* SignalWord(const FusedLaunchArgs& args, const WaitEntry& w) {
  const unsigned* base = w.signal_rank == args.rank ? args.signals : args.peer_signals[w.signal_rank];
  return base + w.signal;
}

}  // namespace syncopate

#endif  // SYNCOPATE_IMPL_SYNC_CUH_
