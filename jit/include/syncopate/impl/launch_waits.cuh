// The launch waits of a fused kernel (launch_abi.h, "Protocol"): entry guards before writes into
// a peer, gates that release a copy-engine step's side stream, and tail waits before the kernel
// ends. Every one is a bounded device-side spin: no dependency on another process is ever left to
// a stream wait. Header-only, compiled by NVRTC and nvcc.
#ifndef SYNCOPATE_IMPL_LAUNCH_WAITS_CUH_
#define SYNCOPATE_IMPL_LAUNCH_WAITS_CUH_

#include <syncopate/impl/sync.cuh>
#include <syncopate/impl/types.cuh>

namespace syncopate {
namespace detail {

SYNCOPATE_DEVICE bool WaitLaunchOp(const FusedLaunchArgs& args, const LaunchWaitOp& op) {
  SpinState st;
  const WaitEntry w{op.index, args.rank, op.transfer, op.peer};
  return SpinUntilEpoch(args, op.word, w, -1, st, (op.kind + 1) | (op.word_kind << 4));
}

}  // namespace detail

// One thread: every guard op (peer < 0) or those about `peer`. False when the launch aborted.
SYNCOPATE_DEVICE bool WaitGuards(const FusedLaunchArgs& args, int peer) {
  for (unsigned i = 0; i < args.num_launch_waits; ++i) {
    const LaunchWaitOp op = args.launch_waits[i];
    if (op.kind != kGuardWait || (peer >= 0 && op.peer != peer)) continue;
    if (!detail::WaitLaunchOp(args, op)) return false;
  }
  return true;
}

// Threads [0, nthreads) of a CTA, each on its share of the ops of `kind` (gates: whole gates, so
// no gate's wait delays another's). A gate's word is released once all its ops are met.
SYNCOPATE_DEVICE bool RunLaunchWaitsOfKind(const FusedLaunchArgs& args, int kind, int tid,
                                           int nthreads) {
  bool ok = true;
  for (unsigned i = 0; i < args.num_launch_waits && ok; ++i) {
    const LaunchWaitOp op = args.launch_waits[i];
    if (op.kind != kind) continue;
    const int owner = kind == kGateWait ? op.gate : static_cast<int>(i);
    if (owner % nthreads != tid) continue;
    ok = detail::WaitLaunchOp(args, op);
    if (ok && kind == kGateWait) {
      const bool last = i + 1 == args.num_launch_waits ||
                        args.launch_waits[i + 1].kind != kGateWait ||
                        args.launch_waits[i + 1].gate != op.gate;
      if (last) StoreReleaseSys(args.gate_words + op.gate, args.epoch);
    }
  }
  return ok;
}

// After an abort: every gate released, so no side stream stays blocked on this kernel.
SYNCOPATE_DEVICE void ReleaseAllGates(const FusedLaunchArgs& args, int tid, int nthreads) {
  for (unsigned i = static_cast<unsigned>(tid); i < args.num_launch_waits;
       i += static_cast<unsigned>(nthreads)) {
    const LaunchWaitOp op = args.launch_waits[i];
    if (op.kind == kGateWait) StoreReleaseSys(args.gate_words + op.gate, args.epoch);
  }
  __threadfence_system();
}

// CTA-collective: gates, then tails. The control CTA of a copy-engine launch.
SYNCOPATE_DEVICE void RunControlCta(const FusedLaunchArgs& args) {
  const int tid = FlatThreadIdx();
  const int n = FlatBlockDim();
  const bool gates_ok = RunLaunchWaitsOfKind(args, kGateWait, tid, n);
  if (!__syncthreads_and(gates_ok)) {
    ReleaseAllGates(args, tid, n);
    return;
  }
  RunLaunchWaitsOfKind(args, kTailWait, tid, n);
  __syncthreads();
}

// CTA-collective: tails only (comm CTA 0 of an SM launch, after its transfer program).
SYNCOPATE_DEVICE void RunTailWaits(const FusedLaunchArgs& args) {
  RunLaunchWaitsOfKind(args, kTailWait, FlatThreadIdx(), FlatBlockDim());
  __syncthreads();
}

}  // namespace syncopate

#endif  // SYNCOPATE_IMPL_LAUNCH_WAITS_CUH_
