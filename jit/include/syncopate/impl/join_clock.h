// When a joined compute CTA stops waiting for peers (impl/pieces.cuh, NextJoinableStep): apart
// from the kernel so host tests can check the rule (tests/jit/join_clock_test.cc). Compiled by
// NVRTC, nvcc and the host compiler alike, so no headers.
#ifndef SYNCOPATE_IMPL_JOIN_CLOCK_H_
#define SYNCOPATE_IMPL_JOIN_CLOCK_H_

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SYNCOPATE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SYNCOPATE_HOST_DEVICE inline
#endif

namespace syncopate {

// One joined CTA's clock over the passes in which every step left waits for a peer. The clock
// restarts whenever the peers waited for show progress (their tile-progress words, summed, moved:
// a peer still computing will publish chunks soon) and the CTA leaves once `wait_ns` passed
// without any. A sum that never moves (no words published, SYNCOPATE_JOIN_FOLLOWS_PEERS=0)
// makes `wait_ns` a bound on the whole wait, the rule before the twentieth session.
struct JoinPeerClock {
  unsigned long long since_ns = 0ull;  // 0: no pass has waited yet (%globaltimer is never 0)
  unsigned progress = 0u;              // the sum seen at since_ns

  // A pass at `now_ns` that found only steps waiting for peers whose words sum to
  // `peers_progress`: true when the CTA should leave them to the comm CTAs.
  SYNCOPATE_HOST_DEVICE bool ShouldLeave(unsigned long long now_ns, unsigned peers_progress,
                                         unsigned long long wait_ns) {
    if (since_ns == 0ull || peers_progress != progress) {
      since_ns = now_ns;
      progress = peers_progress;
    }
    return now_ns - since_ns > wait_ns;
  }
};

}  // namespace syncopate

#endif  // SYNCOPATE_IMPL_JOIN_CLOCK_H_
