// The communication CTAs of the SM backend: CTAs [0, num_comm_ctas) execute this rank's transfer
// program (every transfer the rank executes, except outgoing chunks their producer tiles move
// themselves: direct chunks and chunks in tile parts). With at least two comm CTAs per channel,
// each channel gets split = num_comm_ctas / channels CTAs that run every step of it together, each
// a 1/split part (one CTA keeps too few bytes in flight for the memory system); the last part's CTA
// signals, and no part of a step that depends on channel order (kAfterPrevious) starts before the
// channel's previous step completed.
// Otherwise channel g belongs to comm CTA g % num_comm_ctas, and a CTA interleaves its channels:
// thread 0 polls each channel's next step without blocking and runs the first one whose
// dependencies are met, so a step blocked on one channel never stalls another channel
// (channels of a rank run concurrently in the plan's semantics). Before its first step a comm
// CTA waits for the entry guards (peers entered the launch); comm CTA 0 ends with the tail waits
// when the launch has no control CTA (launch_abi.h). When no transfer of the plan waits for a
// tile (Tables::kCommJoinsCompute: AllGather-like plans) and tiles are dealt dynamically, a comm
// CTA that finished its program goes on to compute tiles (FusedSchedule::CommJoinsCompute says
// when), so the slots it held are not lost to the GEMM for the rest of the kernel. Plans whose
// transfers do wait for tiles go the other way (impl/pieces.cuh): steps move in claimed pieces,
// and compute CTAs with no tile left join in (FusedSchedule::join_transfers).
// Header-only, compiled by NVRTC and nvcc.
#ifndef SYNCOPATE_IMPL_COMM_CUH_
#define SYNCOPATE_IMPL_COMM_CUH_

#include <syncopate/impl/launch_waits.cuh>
#include <syncopate/impl/pieces.cuh>
#include <syncopate/impl/schedule.cuh>
#include <syncopate/impl/sync.cuh>
#include <syncopate/impl/types.cuh>

namespace syncopate {

// Channels one comm CTA interleaves at a time; more are handled in successive batches (launch
// ceil(channels / 64) comm CTAs or more to keep every channel live).
constexpr int kCommMaxChannelsPerCta = 64;

// CTA-collective; call from comm CTAs only (blockIdx.x < args.num_comm_ctas). False when the
// launch aborted (the CTA must then return).
template <class Tables>
SYNCOPATE_DEVICE bool RunTransferProgram(const FusedLaunchArgs& args) {
  __shared__ int cursor[kCommMaxChannelsPerCta];
  __shared__ int cursor_end[kCommMaxChannelsPerCta];
  __shared__ int next_step;
  const int cta = static_cast<int>(blockIdx.x);
  const int ctas = static_cast<int>(args.num_comm_ctas);
  const int chan_begin = Tables::chan_base()[args.rank];
  const int chan_count = Tables::chan_base()[args.rank + 1] - chan_begin;
  const int total_ops = Tables::chan_ops()[Tables::chan_base()[Tables::kWorldSize]];
  // slot: this CTA's place among `slots` channel owners; part of `parts` of each step.
  int slot = cta, slots = ctas, part = 0, parts = 1;
  const bool in_pieces = StepsMoveInPieces<Tables>(args);
  if (chan_count > 0 && ctas >= 2 * chan_count && total_ops <= kStepCounterCapacity) {
    parts = ctas / chan_count;
    slot = cta % chan_count;
    slots = chan_count;
    part = cta / chan_count;
    if (part >= parts) slot = chan_count;  // a leftover CTA: owns nothing
  }
  const int owned = chan_count > slot ? (chan_count - slot + slots - 1) / slots : 0;
  const bool tid0 = FlatThreadIdx() == 0;
  if (owned > 0 && !__syncthreads_and(tid0 ? WaitGuards(args, -1) : true)) return false;

  for (int batch = 0; batch < owned; batch += kCommMaxChannelsPerCta) {
    const int n = owned - batch < kCommMaxChannelsPerCta ? owned - batch : kCommMaxChannelsPerCta;
    if (tid0) {
      for (int j = 0; j < n; ++j) {
        const int g = chan_begin + slot + (batch + j) * slots;
        cursor[j] = Tables::chan_ops()[g];
        cursor_end[j] = Tables::chan_ops()[g + 1];
      }
    }
    __syncthreads();
    int rr = 0;  // round-robin start, so no channel starves
    for (;;) {
      if (tid0) {
        int pick = -1;  // -1: batch finished, -2: aborted
        SpinState st;
        for (;;) {
          bool left = false;
          WaitEntry blocked{0, 0, -1, -1};
          unsigned seen = 0;
          for (int k = 0; k < n && pick < 0; ++k) {
            const int j = (rr + k) % n;
            if (cursor[j] == cursor_end[j]) continue;
            left = true;
            // Channel order (plan.h): where other CTAs move parts of a channel's steps, the
            // previous step may still be moving elsewhere when this CTA finished its share. In
            // pieces, wait for its signal (every claimer of it is running). In static parts only
            // for a step that touches what an earlier one writes (kAfterPrevious): a sibling
            // part's CTA may not be resident yet, and holding this slot for it could starve it.
            // A CTA that owns its channel alone moved the previous step itself. The first step is
            // recomputed, not kept in shared memory: the fused kernel's static shared memory must
            // stay within jit::kFusedStaticSmemReserve.
            const int first = Tables::chan_ops()[chan_begin + slot + (batch + j) * slots];
            const bool waits_for_previous =
                in_pieces || (parts > 1 && Tables::prog_ops()[cursor[j]].direct == kAfterPrevious);
            const bool in_order = !waits_for_previous || cursor[j] == first ||
                                  detail::StepDone<Tables>(args, cursor[j] - 1, blocked, seen);
            if (in_order &&
                detail::StepReady<Tables>(args, Tables::prog_ops()[cursor[j]], blocked, seen)) {
              pick = cursor[j]++;
              rr = j + 1;
            }
          }
          if (pick >= 0 || !left) break;
          if (!SpinRound(args, st, -1, blocked, seen)) {
            pick = -2;
            break;
          }
        }
        next_step = pick;
      }
      __syncthreads();
      const int step = next_step;
      if (step == -2) return false;
      if (step < 0) break;
      // Both end with a barrier, so next_step is not rewritten before every thread has read it.
      if (in_pieces) {
        // The CTAs of the channel and any joined compute CTA share the step piece by piece.
        MoveStepPieces(args, Tables::prog_ops()[step], step, Tables::segments(), WholeCta());
      } else {
        MoveChunkAndSignal(args, Tables::prog_ops()[step], Tables::segments(), part, parts, step);
      }
    }
    __syncthreads();  // the cursors are rewritten by the next batch
  }
  if (cta == 0 && args.num_control_ctas == 0) RunTailWaits(args);
  return true;
}

}  // namespace syncopate

#endif  // SYNCOPATE_IMPL_COMM_CUH_
