// Transfer-program steps moved in pieces that any CTA of the rank may claim (SM backend).
//
// Why: in plans whose transfers wait for tiles (GEMM+ReduceScatter, GEMM+AllReduce) the last
// chunks become ready only when the GEMM ends, and the few comm CTAs then move them alone while
// every compute CTA has left: the kernel's tail. The comm CTAs are few because each holds a
// whole SM (a CTA of the fused grid gets the GEMM's shared memory). So once a compute CTA has no
// tile left it joins the transfers (FusedSchedule::join_transfers), and a step is split into
// pieces of about kTransferPieceBytes that whoever comes first takes.
//
// Protocol, per step s of this rank's program and launch epoch e (all words local device memory
// of this rank except the signal):
//   step_claims[s]    (e << 32) | pieces claimed in launch e; a claimer CASes it from
//                     (e << 32) | n to (e << 32) | n + 1 and moves piece n (a word tagged with an
//                     older epoch counts as 0 claimed). Never reset: the tag does it.
//   step_counters[s]  pieces moved; the claimer of a piece fences its stores system-wide, then
//                     adds 1. The one that completes the count resets it to 0 (every piece of s
//                     arrived, so no add of launch e follows; launch e+1 of this rank starts after
//                     launch e ended) and release-stores s's signal on the destination = e
//                     (ArriveAndSignal, as static parts do; a step of one piece only signals).
// Who claims: the comm CTAs, each in its channel's order (RunTransferProgram), and joined
// compute CTAs, which take a channel's first not fully claimed step. Either starts a step only
// once its dependencies are met and the channel's previous step completed (its signal reached
// e), not merely was claimed: channel order is part of the plan's semantics (plan.h), and an
// imported plan may rely on it for data (msccl_import.cc drops same-channel deps). A joined CTA
// leaves when every piece of every step of the rank is claimed, when what is left waits for a
// peer (it does not wait for another rank beyond kJoinPeerWaitNs, 200 us by default:
// NextJoinableStep says why), or when the launch aborts.
// Only CTAs that took their tiles from the launch's tile counter join: once claim() ran out,
// every tile belongs to a CTA that is running, so the steps a joined CTA waits for never need
// a slot it holds. A CTA of a static deal may wait for a share not yet resident (under MPS a
// CTA was seen starting 4.8 ms late), which could then wait for the slot the joined CTA holds.
// Header-only, compiled by NVRTC and nvcc.
#ifndef SYNCOPATE_IMPL_PIECES_CUH_
#define SYNCOPATE_IMPL_PIECES_CUH_

#include <syncopate/impl/join_clock.h>

#include <syncopate/impl/copy.cuh>
#include <syncopate/impl/launch_waits.cuh>
#include <syncopate/impl/schedule.cuh>
#include <syncopate/impl/sync.cuh>
#include <syncopate/impl/types.cuh>

namespace syncopate {

// A piece: long enough that its claim and arrival (two atomics and a system fence, a few
// microseconds) stay small against moving it (15 us for one CTA at about 35 GB/s), short enough
// that the GEMM's 60-130 CTAs each find one in a chunk of a few MB. A step of 128 KB or more
// has at least kMinTransferPieces (of at least kMinPieceBytes), so the comm CTAs sharing a
// channel still share its smaller steps.
// -DSYNCOPATE_TRANSFER_PIECE_KB=N (SYNCOPATE_NVRTC_OPTIONS) sets another size, for A/B runs.
#ifndef SYNCOPATE_TRANSFER_PIECE_KB
#define SYNCOPATE_TRANSFER_PIECE_KB 512
#endif
static_assert(SYNCOPATE_TRANSFER_PIECE_KB > 0, "SYNCOPATE_TRANSFER_PIECE_KB must be positive");
constexpr long long kTransferPieceBytes = static_cast<long long>(SYNCOPATE_TRANSFER_PIECE_KB) << 10;
constexpr long long kMinPieceBytes = 32ll << 10;
constexpr long long kMinTransferPieces = 4;
constexpr long long kMaxTransferPieces = 1024;

// How long a joined compute CTA keeps polling when every step left waits for a peer, before it
// leaves them to the comm CTAs. -DSYNCOPATE_JOIN_PEER_WAIT_US=N (SYNCOPATE_NVRTC_OPTIONS) sets N
// microseconds for A/B runs (0: leave at once). In an AllReduce nearly every step waits for a
// peer (landing guards, the gather of reductions); leaving at once let the 2 comm CTAs move the
// last chunk alone. Measured (bench/RESULTS.md, fourteenth session; H200, ranks as MPS clients,
// the same call): fused AllReduce at 2 ranks, M=8192, 2.386 ms at 0, 1.502 at 200 us, 1.579 at
// 1,000; at 4 ranks, M=2048, 0.844 at 0 against 0.710 at 200. The wait stays bounded because a
// joined CTA may hold a slot a peer's CTAs need when ranks share a GPU (NextJoinableStep says
// why). The bound holds per step taken: after each step it moves, a joined CTA may wait that
// long again; and by default it restarts while the peers waited for draw tiles
// (SYNCOPATE_JOIN_FOLLOWS_PEERS below). Keep N well below the launch's wait deadline: a joined
// CTA's wait that reaches the deadline records a timeout and aborts the launch like any other wait.
#ifndef SYNCOPATE_JOIN_PEER_WAIT_US
#define SYNCOPATE_JOIN_PEER_WAIT_US 200
#endif
static_assert(SYNCOPATE_JOIN_PEER_WAIT_US >= 0, "SYNCOPATE_JOIN_PEER_WAIT_US must not be negative");
constexpr unsigned long long kJoinPeerWaitNs =
    static_cast<unsigned long long>(SYNCOPATE_JOIN_PEER_WAIT_US) * 1000ull;

// -DSYNCOPATE_JOIN_FOLLOWS_PEERS=0 (SYNCOPATE_NVRTC_OPTIONS; 1, the default, on) makes
// kJoinPeerWaitNs a bound on the whole wait for peers, as before the twentieth session. With 1
// it bounds a wait in which the peers waited for made no progress: a joined CTA waiting only for
// peers restarts its clock whenever the tile-progress word (launch_abi.h) of a peer it waits for
// moves. Why: after a line-up one rank's GEMM ended about 0.25 ms after its peer's, the peer's
// joined CTAs left after 200 us and its 2 comm CTAs moved the AllReduce's rest alone. Measured
// (bench/RESULTS.md, twentieth session; H100, 2 ranks as MPS clients at 50%, 70B, M=8192, one
// call): the first run's kernel 5.95 ms following the peers, 7.61-7.68 with 0, 5.94-5.98 with 0
// and a fixed 2,000 us; back to back 5.89 ms a run against 5.90 with 0. A fixed bound that long
// would also hold slots that a peer with no resident CTAs needs (NextJoinableStep); such a peer
// draws no tickets, so with its word still the joined CTAs leave as before.
#ifndef SYNCOPATE_JOIN_FOLLOWS_PEERS
#define SYNCOPATE_JOIN_FOLLOWS_PEERS 1
#endif

namespace detail {

// Thread 0 only. True when every plan dependency of `op` is met (signals, possibly a peer's);
// otherwise `blocked` names the first unmet wait and `seen` its value.
template <class Tables>
SYNCOPATE_DEVICE bool StepDepsMet(const FusedLaunchArgs& args, const TransferOp& op,
                                  WaitEntry& blocked, unsigned& seen) {
  for (int d = op.dep_begin; d < op.dep_end; ++d) {
    const WaitEntry w = Tables::deps()[d];
    const unsigned v = LoadAcquireSys(SignalWord(args, w));
    if (!EpochReached(v, LaunchEpoch(args))) {
      blocked = w;
      seen = v;
      return false;
    }
  }
  return true;
}

// Thread 0 only. True when `op` waits for no chunk of this rank's tiles or that chunk is
// published; otherwise `blocked` and `seen` say so.
SYNCOPATE_DEVICE bool StepChunkReady(const FusedLaunchArgs& args, const TransferOp& op,
                                     WaitEntry& blocked, unsigned& seen) {
  if (op.ready_chunk < 0) return true;
  const unsigned v = LoadAcquireSys(args.chunk_ready + op.ready_chunk);
  if (EpochReached(v, LaunchEpoch(args))) return true;
  blocked = WaitEntry{op.ready_chunk, args.rank, op.transfer, args.rank};
  seen = v;
  return false;
}

// Thread 0 only. True when every dependency of `op` is met: StepDepsMet and StepChunkReady.
template <class Tables>
SYNCOPATE_DEVICE bool StepReady(const FusedLaunchArgs& args, const TransferOp& op,
                                WaitEntry& blocked, unsigned& seen) {
  return StepDepsMet<Tables>(args, op, blocked, seen) && StepChunkReady(args, op, blocked, seen);
}

// Thread 0 only. Rank `peer`'s tile-progress word, 0 where it publishes none (another node, a
// static deal, SYNCOPATE_JOIN_FOLLOWS_PEERS=0).
SYNCOPATE_DEVICE unsigned PeerTileProgress(const FusedLaunchArgs& args, int peer) {
#if SYNCOPATE_JOIN_FOLLOWS_PEERS
  if (args.tile_progress == nullptr || peer < 0 || peer >= args.world_size) return 0u;
  const unsigned* word = args.tile_progress[peer];
  return word != nullptr ? LoadRelaxedSys(word) : 0u;
#else
  (void)args;
  (void)peer;
  return 0u;
#endif
}

// Pieces of `op`: one per kTransferPieceBytes of its segments; at least kMinTransferPieces where
// each still gets kMinPieceBytes, and at least 1.
SYNCOPATE_DEVICE int StepPieces(const TransferOp& op, const CopySegment* segments) {
  long long bytes = 0;
  for (int i = op.seg_begin; i < op.seg_end; ++i) bytes += segments[i].row_bytes * segments[i].rows;
  long long pieces = (bytes + kTransferPieceBytes - 1) / kTransferPieceBytes;
  if (pieces < kMinTransferPieces) {
    const long long small = bytes / kMinPieceBytes;
    pieces = small < kMinTransferPieces ? small : kMinTransferPieces;
  }
  if (pieces < 1) pieces = 1;
  return static_cast<int>(pieces > kMaxTransferPieces ? kMaxTransferPieces : pieces);
}

// Pieces of the claim word `word` already taken in launch `epoch`.
SYNCOPATE_DEVICE unsigned ClaimedIn(unsigned long long word, unsigned epoch) {
  return static_cast<unsigned>(word >> 32) == epoch ? static_cast<unsigned>(word) : 0u;
}

// One thread: takes the next piece of a step in launch `epoch`; -1 when all `pieces` are taken.
SYNCOPATE_DEVICE int ClaimPiece(unsigned long long* claim, unsigned epoch, int pieces) {
  unsigned long long old = *reinterpret_cast<volatile unsigned long long*>(claim);
  for (;;) {
    const unsigned taken = ClaimedIn(old, epoch);
    if (taken >= static_cast<unsigned>(pieces)) return -1;
    const unsigned long long want = (static_cast<unsigned long long>(epoch) << 32) | (taken + 1u);
    const unsigned long long seen = atomicCAS(claim, old, want);
    if (seen == old) return static_cast<int>(taken);
    old = seen;
  }
}

// Thread 0 only. True when step `step` (global program index) completed in this launch: its
// signal on the destination reached the epoch. Otherwise `blocked` and `seen` say what it waits
// for.
template <class Tables>
SYNCOPATE_DEVICE bool StepDone(const FusedLaunchArgs& args, int step, WaitEntry& blocked,
                               unsigned& seen) {
  const TransferOp& op = Tables::prog_ops()[step];
  const unsigned v = LoadAcquireSys(SignalWordOn(args, op.dst_rank, op.signal));
  if (EpochReached(v, LaunchEpoch(args))) return true;
  blocked = WaitEntry{op.signal, op.dst_rank, op.transfer, args.rank};
  seen = v;
  return false;
}

SYNCOPATE_DEVICE bool StepFullyClaimed(const FusedLaunchArgs& args, int step, int pieces) {
  const unsigned long long word =
      *reinterpret_cast<volatile unsigned long long*>(args.step_claims + step);
  return ClaimedIn(word, LaunchEpoch(args)) >= static_cast<unsigned>(pieces);
}

}  // namespace detail

// True when this launch moves its transfer-program steps in claimed pieces: an SM-backend launch
// (comm CTAs) whose plan has transfers waiting for tiles, with the claim words bound.
// -DSYNCOPATE_STEP_PIECES=0 (SYNCOPATE_NVRTC_OPTIONS) turns it off, for A/B runs: steps then split
// statically over the comm CTAs of their channel and nobody joins.
template <class Tables>
SYNCOPATE_DEVICE bool StepsMoveInPieces(const FusedLaunchArgs& args) {
#if defined(SYNCOPATE_STEP_PIECES) && !SYNCOPATE_STEP_PIECES
  return false;
#endif
  return !Tables::kCommJoinsCompute && args.num_comm_ctas > 0 && args.step_claims != nullptr &&
         Tables::chan_ops()[Tables::chan_base()[Tables::kWorldSize]] <= kStepCounterCapacity;
}

// Group-collective over `g`: claims pieces of step `step` (global program index) until none is
// left, moving each; the piece that completes the step signals its destination. Ends with g.sync().
SYNCOPATE_DEVICE void MoveStepPieces(const FusedLaunchArgs& args, const TransferOp& op, int step,
                                     const CopySegment* segments, const ThreadGroup& g) {
  __shared__ int piece_shared;
  const int pieces = detail::StepPieces(op, segments);
  const void* src = OperandOn(args, op.src_slot, op.src_rank);
  void* dst = OperandOn(args, op.dst_slot, op.dst_rank);
  for (;;) {
    if (g.tid == 0) {
      piece_shared =
          detail::ClaimPiece(reinterpret_cast<unsigned long long*>(args.step_claims) + step,
                             LaunchEpoch(args), pieces);
    }
    g.sync();
    const int piece = piece_shared;
    if (piece < 0) break;
    GroupMoveSegments(segments, op.seg_begin, op.seg_end, src, dst, op.dtype, op.reduce, g.tid,
                      g.nthreads, piece, pieces);
    g.sync();  // every member's stores of the piece are issued (and piece_shared read)
    if (g.tid == 0) ArriveAndSignal(args, op, pieces, step);
  }
  g.sync();  // piece_shared read by every member before a later call rewrites it
}

namespace detail {

// Thread 0 only: every entry guard of the launch is met now (peers entered it), without waiting.
SYNCOPATE_DEVICE bool GuardsMetNow(const FusedLaunchArgs& args) {
  for (unsigned i = 0; i < args.num_launch_waits; ++i) {
    const LaunchWaitOp op = args.launch_waits[i];
    if (op.kind == kGuardWait && !EpochReached(LoadAcquireSys(op.word), LaunchEpoch(args))) {
      return false;
    }
  }
  return true;
}

// True when no tile of this rank waits for an incoming chunk: its tiles then finish without any
// peer's help, so waiting for this rank's own chunk_ready cannot wait on a peer.
template <class Tables>
SYNCOPATE_DEVICE bool TilesWaitForNothing(const FusedLaunchArgs& args) {
  const int* off = Tables::wait_offsets() + args.rank * Tables::kNumTiles;
  return off[0] == off[Tables::kNumTiles];
}

// Thread 0 of a joined group: the global index of a step it may take now (the first not fully
// claimed step of some channel of this rank, dependencies met, the channel's previous step
// complete), -1 when none is left that it may wait for, -2 when the launch aborted.
// A joined CTA waits (bounded, as every wait) only for its own rank's progress: a claimed step
// to complete, or a chunk of its own tiles where those wait for nothing. It does not wait for a
// peer (a dependency on another rank's signal) once that peer drew no tile for kJoinPeerWaitNs
// (200 us by default; SYNCOPATE_JOIN_FOLLOWS_PEERS=0: once it waited that long), and leaves
// instead: with ranks sharing one GPU, a peer's CTAs may need the very slots the joined CTAs of
// every rank hold (seen: 4 ranks at 50% of the SMs each deadlocked on a guard until the
// deadline), and the comm CTAs move such steps anyway.
template <class Tables>
SYNCOPATE_DEVICE int NextJoinableStep(const FusedLaunchArgs& args) {
  const int chan_begin = Tables::chan_base()[args.rank];
  const int chan_end = Tables::chan_base()[args.rank + 1];
  const bool own_chunks_wait_for_nobody = TilesWaitForNothing<Tables>(args);
  // An aborted launch's joined CTAs take nothing more: the first pass may find a step ready
  // without spinning, and a step claimed part-way after the abort would leave its counter for
  // the next launch to trip over. Later passes follow a SpinRound, which checks the abort.
  if (DeviceAborted(args)) return -2;
  SpinState st;
  JoinPeerClock peer_clock;
  for (;;) {
    bool wait_locally = false;
    bool wait_for_peer = false;
    unsigned peers_progress = 0u;  // tile-progress words of the peers waited for, summed
    WaitEntry blocked{0, 0, -1, -1};
    unsigned seen = 0;
    for (int g = chan_begin; g < chan_end; ++g) {
      const int first = Tables::chan_ops()[g];
      const int end = Tables::chan_ops()[g + 1];
      int s = first;
      while (s < end &&
             StepFullyClaimed(args, s, StepPieces(Tables::prog_ops()[s], Tables::segments()))) {
        ++s;
      }
      if (s == end) continue;
      // Channel order: the previous step (fully claimed, so being moved by this rank's CTAs)
      // has completed.
      if (s > first && !StepDone<Tables>(args, s - 1, blocked, seen)) {
        wait_locally = true;
        continue;
      }
      const TransferOp& op = Tables::prog_ops()[s];
      // An unmet dependency is another rank's signal (or one a peer's progress may hold up):
      // waited for here at most kJoinPeerWaitNs, then left to the comm CTAs. The
      // wait reported is a local one where there is one, else the first peer's.
      WaitEntry unmet{0, 0, -1, -1};
      unsigned unmet_seen = 0;
      if (!StepDepsMet<Tables>(args, op, unmet, unmet_seen)) {
        if (!wait_for_peer && !wait_locally) {
          blocked = unmet;
          seen = unmet_seen;
        }
        wait_for_peer = true;
        if (unmet.peer != args.rank) peers_progress += PeerTileProgress(args, unmet.peer);
        continue;
      }
      if (StepChunkReady(args, op, unmet, unmet_seen)) return s;
      if (own_chunks_wait_for_nobody) {
        wait_locally = true;
        blocked = unmet;
        seen = unmet_seen;
      }
    }
    if (!wait_locally) {
      if (!wait_for_peer || kJoinPeerWaitNs == 0ull) return -1;
      if (peer_clock.ShouldLeave(GlobalTimerNs(), peers_progress, kJoinPeerWaitNs)) return -1;
    }
    if (!wait_locally && !wait_for_peer) return -1;  // nothing left to take
    if (!SpinRound(args, st, -1, blocked, seen)) return -2;
  }
}

}  // namespace detail

// Group-collective over `g`, the threads of a compute CTA that has no tile left: helps move this
// rank's transfer program (see above) until every piece of it is claimed or only steps waiting
// for peers are left (after kJoinPeerWaitNs). False when the launch aborted. A no-op unless the
// launch moves steps in pieces.
template <class Tables>
SYNCOPATE_DEVICE bool JoinTransfers(const FusedLaunchArgs& args, const ThreadGroup& g) {
  // A static deal never joins (see above); nor does a rank with no step of its own.
  if (!StepsMoveInPieces<Tables>(args) || args.tile_counter == nullptr) return true;
  const int begin = Tables::chan_ops()[Tables::chan_base()[args.rank]];
  if (begin == Tables::chan_ops()[Tables::chan_base()[args.rank + 1]]) return true;
  __shared__ int step_shared;
  // Before writing into a peer: the peer entered this launch. Checked, not awaited (a joined
  // CTA waits for a peer only within kJoinPeerWaitNs, and only for a step's dependencies): the
  // comm CTAs move everything if the guards are not met yet.
  if (g.tid == 0) {
    step_shared = detail::GuardsMetNow(args) ? detail::NextJoinableStep<Tables>(args) : -1;
  }
  g.sync();
  int step = step_shared;
  while (step >= 0) {
    // Every member read step_shared above; MoveStepPieces' barriers order that before the
    // rewrite below.
    MoveStepPieces(args, Tables::prog_ops()[step], step, Tables::segments(), g);
    if (g.tid == 0) step_shared = detail::NextJoinableStep<Tables>(args);
    g.sync();
    step = step_shared;
  }
  g.sync();  // step_shared read by every member
  return step == -1;
}

}  // namespace syncopate

#endif  // SYNCOPATE_IMPL_PIECES_CUH_
