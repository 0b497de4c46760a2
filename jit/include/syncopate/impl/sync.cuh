// Memory-ordering primitives and the bounded wait every device-side wait goes through.
//
// Signals cross processes and GPUs, so acquire/release are system scope (.sys). Only one thread
// of a CTA spins (the caller decides which); the CTA learns the outcome through a barrier.
// A spin reads device memory only, but for the host's abort flag every kHostAbortPollSpins-th
// round (launch_abi.h says why). Header-only, compiled by NVRTC and nvcc.
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

// Abort words are plain flags: a relaxed system-scope load sees host and peer writes without
// ordering anything else.
SYNCOPATE_DEVICE unsigned LoadRelaxedSys(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// A hint for peers (launch_abi.h "Tile progress"): visible to them eventually, orders nothing.
SYNCOPATE_DEVICE void StoreRelaxedSys(unsigned* p, unsigned v) {
  asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

SYNCOPATE_DEVICE unsigned long long GlobalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// `epoch` reached: `seen` is `epoch` or less than kEpochLead past it (launch_abi.h says why not
// a cyclic >=).
SYNCOPATE_DEVICE bool EpochReached(unsigned seen, unsigned epoch) {
  return seen - epoch < kEpochLead;
}

namespace detail {
// The launch's device epoch, one per CTA (EnterLaunch in launch_waits.cuh sets it).
SYNCOPATE_DEVICE unsigned& SharedLaunchEpoch() {
  __shared__ unsigned epoch;
  return epoch;
}
}  // namespace detail

// This launch's epoch: the host's by-value one, or the device epoch EnterLaunch took
// (launch_abi.h, "Where e comes from").
SYNCOPATE_DEVICE unsigned LaunchEpoch(const FusedLaunchArgs& args) {
  return args.launch_epoch != nullptr ? detail::SharedLaunchEpoch() : args.epoch;
}

// Device-memory abort only: the fast check of every spin round.
SYNCOPATE_DEVICE bool DeviceAborted(const FusedLaunchArgs& args) {
  return args.device_abort != nullptr && LoadRelaxedSys(args.device_abort) != 0u;
}

// Both abort words; the host one costs a PCIe read.
SYNCOPATE_DEVICE bool LaunchAborted(const FusedLaunchArgs& args) {
  return DeviceAborted(args) ||
         (args.abort_flag != nullptr && LoadRelaxedSys(args.abort_flag) != 0u);
}

namespace detail {
// RecordTimeout's work, compiled once rather than at every wait site (a cold path). Scalars
// only: a FusedLaunchArgs reference would force the kernel's arguments into local memory.
__device__ __noinline__ void FillTimeoutRecord(WaitTimeoutRecord* rec, unsigned* device_abort,
                                               int rank, int tile, WaitEntry w,
                                               unsigned expected, unsigned seen,
                                               unsigned long long waited_ns, int what) {
  if (rec != nullptr && atomicCAS(&rec->timed_out, 0u, kTimeoutRecordClaimed) == 0u) {
    volatile WaitTimeoutRecord* v = rec;
    v->rank = rank;
    v->tile = tile;
    v->chunk = w.transfer;
    v->peer = w.peer;
    v->signal = w.signal;
    v->expected = expected;
    v->seen = seen;
    v->waited_ns = waited_ns;
    v->what = what;
    __threadfence_system();  // the fields before the word that says they are there
    atomicExch(&rec->timed_out, kTimeoutRecordFilled);
  }
  __threadfence_system();
  if (device_abort != nullptr) atomicExch(device_abort, 1u);
  __threadfence_system();
}
}  // namespace detail

// Fills the timeout record once per launch (the first expiring wait wins the atomicCAS) and
// raises the device abort word so every other wait gives up at once.
SYNCOPATE_DEVICE void RecordTimeout(const FusedLaunchArgs& args, int tile, const WaitEntry& w,
                                    unsigned seen, unsigned long long waited_ns, int what = 0) {
  detail::FillTimeoutRecord(args.timeout_record, args.device_abort, args.rank, tile, w,
                            LaunchEpoch(args), seen, waited_ns, what);
}

// One spin round's bookkeeping, shared by every waiting loop: sleeps with backoff, checks the
// abort words (the host's rarely) and the deadline. Returns false when the wait must give up;
// it then recorded the timeout (its own expiry) or saw another wait's abort.
struct SpinState {
  unsigned long long start_ns = 0;
  unsigned backoff = 32;
  unsigned rounds = 0;
};

SYNCOPATE_DEVICE bool SpinRound(const FusedLaunchArgs& args, SpinState& st, int tile,
                                const WaitEntry& w, unsigned seen, int what = 0) {
  const unsigned long long now = GlobalTimerNs();
  if (st.start_ns == 0ull) st.start_ns = now;
  ++st.rounds;
  const bool host_check = st.rounds % static_cast<unsigned>(kHostAbortPollSpins) == 0u;
  if (host_check ? LaunchAborted(args) : DeviceAborted(args)) return false;
  if (args.wait_timeout_ns != 0ull && now - st.start_ns > args.wait_timeout_ns) {
    RecordTimeout(args, tile, w, seen, now - st.start_ns, what);
    return false;
  }
#if __CUDA_ARCH__ >= 700
  __nanosleep(st.backoff);
#endif
  if (st.backoff < 1024) st.backoff *= 2;
  return true;
}

// Spins (one thread) until *flag reaches args.epoch. `st` spans a wait set: its waits share one
// deadline. Returns false when the launch aborted (this wait expired and recorded it, or another
// wait had already expired).
SYNCOPATE_DEVICE bool SpinUntilEpoch(const FusedLaunchArgs& args, const unsigned* flag,
                                     const WaitEntry& w, int tile, SpinState& st, int what = 0) {
  for (;;) {
    const unsigned seen = LoadAcquireSys(flag);
    if (EpochReached(seen, LaunchEpoch(args))) return true;
    if (!SpinRound(args, st, tile, w, seen, what)) return false;
  }
}

// The signal word a WaitEntry names: this rank's own array, or a peer's through peer_signals.
SYNCOPATE_DEVICE const unsigned* SignalWord(const FusedLaunchArgs& args, const WaitEntry& w) {
  const unsigned* base = w.signal_rank == args.rank ? args.signals : args.peer_signals[w.signal_rank];
  return base + w.signal;
}

}  // namespace syncopate

#endif  // SYNCOPATE_IMPL_SYNC_CUH_
