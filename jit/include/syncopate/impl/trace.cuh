// Per-CTA timeline of one fused launch, for diagnosis (FusedLaunchArgs::cta_trace; off when
// null, which costs one pointer test per CTA and per tile wait). Record r of CTA b lives at
// cta_trace[4 * b .. 4 * b + 3]:
//   [0] %globaltimer when thread 0 entered the kernel
//   [1] %globaltimer when thread 0 left it (its role's end: within a tile of the CTA's end)
//   [2] nanoseconds spent in tile waits that had something to wait for (summed, atomics)
//   [3] (smid << 32) | number of such waits
// The host reads the records after the launch (syncopate_tp_bench --trace). They answer where a
// fused kernel's time goes beside concurrent ranks: CTAs that start late (not resident), waits
// for peers' chunks, or the computation itself.
// Header-only, compiled by NVRTC and nvcc.
#ifndef SYNCOPATE_IMPL_TRACE_CUH_
#define SYNCOPATE_IMPL_TRACE_CUH_

#include <syncopate/impl/sync.cuh>
#include <syncopate/impl/types.cuh>
#include <syncopate/launch_abi.h>

namespace syncopate {

SYNCOPATE_DEVICE unsigned SmId() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// Lives for the whole kernel body (the generated entry's first statement), so every return path
// records the end.
class CtaTrace {
 public:
  SYNCOPATE_DEVICE explicit CtaTrace(const FusedLaunchArgs& args)
      : rec_(args.cta_trace != nullptr && FlatThreadIdx() == 0 ? Record(args) : nullptr) {
    if (rec_ == nullptr) return;
    rec_[0] = GlobalTimerNs();
    rec_[2] = 0;
    rec_[3] = static_cast<unsigned long long>(SmId()) << 32;
  }
  SYNCOPATE_DEVICE ~CtaTrace() {
    if (rec_ != nullptr) rec_[1] = GlobalTimerNs();
  }
  // This CTA's 4 words. syncopate_u64 is uint64_t under nvcc (unsigned long on Linux), which
  // atomicAdd does not take: the record is addressed as unsigned long long (same width).
  static SYNCOPATE_DEVICE unsigned long long* Record(const FusedLaunchArgs& args) {
    return reinterpret_cast<unsigned long long*>(args.cta_trace) + 4 * blockIdx.x;
  }
  CtaTrace(const CtaTrace&) = delete;
  CtaTrace& operator=(const CtaTrace&) = delete;

 private:
  unsigned long long* rec_;
};

// A tile wait of `ns` nanoseconds, from whichever thread waited (wait or wait_by_thread).
SYNCOPATE_DEVICE void TraceWait(const FusedLaunchArgs& args, unsigned long long ns) {
  if (args.cta_trace == nullptr) return;
  unsigned long long* rec = CtaTrace::Record(args);
  atomicAdd(rec + 2, ns);
  atomicAdd(rec + 3, 1ull);
}

}  // namespace syncopate

#endif  // SYNCOPATE_IMPL_TRACE_CUH_
