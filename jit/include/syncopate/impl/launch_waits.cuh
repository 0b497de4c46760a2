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
      if (last) StoreReleaseSys(args.gate_words + op.gate, LaunchEpoch(args));
    }
  }
  return ok;
}

// After an abort: every gate released, so no side stream stays blocked on this kernel.
SYNCOPATE_DEVICE void ReleaseAllGates(const FusedLaunchArgs& args, int tid, int nthreads) {
  for (unsigned i = static_cast<unsigned>(tid); i < args.num_launch_waits;
       i += static_cast<unsigned>(nthreads)) {
    const LaunchWaitOp op = args.launch_waits[i];
    if (op.kind == kGateWait) StoreReleaseSys(args.gate_words + op.gate, LaunchEpoch(args));
  }
  __threadfence_system();
}

// CTA-collective, first in every CTA of a fused kernel: takes the device epoch (a no-op for a
// host-epoch launch; launch_abi.h, "Where e comes from"). One thread reads launch_epoch[0],
// announces the launch if this is CTA 0, then counts the CTA as started; the last CTA to start
// (all have read the word by then: read, fence, count) stores the epoch back for the next
// launch. The announcement is a release store per peer: everything this rank did before this
// kernel (its reads of the last launch's data included) is complete, since the kernel started.
SYNCOPATE_DEVICE void EnterLaunch(const FusedLaunchArgs& args) {
  if (args.launch_epoch == nullptr) return;
  if (FlatThreadIdx() == 0) {
    // 0 is never an epoch (zeroed gates mean "not released"): the count skips it at the wrap,
    // as the host's does (Group::NextEpoch).
    unsigned e = LoadRelaxedSys(args.launch_epoch) + 1u;
    if (e == 0u) e = 1u;
    detail::SharedLaunchEpoch() = e;
    const unsigned ctas = gridDim.x * gridDim.y * gridDim.z;
    if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) {
      for (int q = 0; q < args.world_size; ++q) {
        if (args.peer_entered[q] != nullptr) StoreReleaseSys(args.peer_entered[q], e);
      }
      if (args.progress != nullptr) StoreReleaseSys(args.progress, e);
    }
    __threadfence();
    if (atomicAdd(args.launch_epoch + 1, 1u) + 1u == ctas) {
      atomicExch(args.launch_epoch + 1, 0u);
      __threadfence();
      atomicExch(args.launch_epoch, e);
    }
  }
  __syncthreads();
}

// One thread, after a device-epoch launch's tail waits (the control CTA of a copy-engine launch,
// else comm CTA 0; a host-epoch launch's stream writes the word instead, and its launch_epoch
// is null): the host's watch sees the end.
SYNCOPATE_DEVICE void MarkLaunchFinished(const FusedLaunchArgs& args) {
  if (args.launch_epoch != nullptr && args.progress != nullptr) {
    StoreReleaseSys(args.progress + 1, LaunchEpoch(args));
  }
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
  if (tid == 0) MarkLaunchFinished(args);
}

// CTA-collective: tails only (comm CTA 0 of an SM launch, after its transfer program).
SYNCOPATE_DEVICE void RunTailWaits(const FusedLaunchArgs& args) {
  RunLaunchWaitsOfKind(args, kTailWait, FlatThreadIdx(), FlatBlockDim());
  __syncthreads();
  if (FlatThreadIdx() == 0) MarkLaunchFinished(args);
}

}  // namespace syncopate

#endif  // SYNCOPATE_IMPL_LAUNCH_WAITS_CUH_
