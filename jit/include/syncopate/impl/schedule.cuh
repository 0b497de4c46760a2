// The two schedules a local kernel is instantiated with:
//   LocalSchedule          identity: every tile, kernel's own order, no waits, no signals.
//   FusedSchedule<Tables>  the overlap schedule; Tables is generated per (plan, kernel spec) and
//                          holds per-rank constant arrays (see jit/compiler/codegen.cc).
// Both are CTA-collective objects: every thread of a compute CTA makes the same calls in the
// same order (wait/done contain barriers). Header-only, compiled by NVRTC and nvcc.
#ifndef SYNCOPATE_IMPL_SCHEDULE_CUH_
#define SYNCOPATE_IMPL_SCHEDULE_CUH_

#include <syncopate/impl/copy.cuh>
#include <syncopate/impl/launch_waits.cuh>
#include <syncopate/impl/sync.cuh>
#include <syncopate/impl/trace.cuh>
#include <syncopate/impl/types.cuh>

namespace syncopate {

// Tile i of a tiles_m x tiles_n grid in the kernel's own order: row-major when group_m <= 1,
// else grouped-M (group_m tile rows walked column by column, for L2 reuse of B). Mirrored on the
// host by syncopate::jit::SwizzledTile (jit/compiler/lowering.cc); the two must agree.
SYNCOPATE_DEVICE Tile SwizzleTile(int i, int tiles_m, int tiles_n, int group_m) {
  if (group_m <= 1) return Tile{i / tiles_n, i % tiles_n, i};
  const int per_group = group_m * tiles_n;
  const int group = i / per_group;
  const int first_m = group * group_m;
  const int rows = tiles_m - first_m < group_m ? tiles_m - first_m : group_m;
  const int in_group = i - group * per_group;
  const int m = first_m + in_group % rows;
  const int n = in_group / rows;
  return Tile{m, n, m * tiles_n + n};
}

// This rank's pointer (or a peer's, through the symmetric table) for operand slot `slot`.
SYNCOPATE_DEVICE void* OperandOn(const FusedLaunchArgs& args, int slot, int rank) {
  return rank == args.rank ? args.operands[slot] : args.peer_operands[slot * args.world_size + rank];
}

SYNCOPATE_DEVICE unsigned* SignalWordOn(const FusedLaunchArgs& args, int rank, int signal) {
  return (rank == args.rank ? args.signals : args.peer_signals[rank]) + signal;
}

// One thread, for the group that moved one of `parts` parts of `op` (a static part or a claimed
// piece), once the group's stores are issued: fences them system-wide and, with parts > 1,
// counts the arrival in args.step_counters[counter]; the arrival that completes `parts` resets
// the counter for the next launch (no arrival of this launch follows it) and release-stores the
// destination signal.
SYNCOPATE_DEVICE void ArriveAndSignal(const FusedLaunchArgs& args, const TransferOp& op, int parts,
                                      int counter) {
  __threadfence_system();  // this part's stores (or reductions) before its arrival
  if (parts > 1) {
    const unsigned prev = atomicAdd(args.step_counters + counter, 1u);
    if (prev + 1u != static_cast<unsigned>(parts)) return;
    atomicExch(args.step_counters + counter, 0u);
    __threadfence_system();  // the other parts' stores before the signal
  }
  StoreReleaseSys(SignalWordOn(args, op.dst_rank, op.signal), LaunchEpoch(args));
}

// CTA-collective: moves part `part` of `parts` of one chunk (copy or reduce); the CTA that
// completes the last part release-stores the destination signal (ArriveAndSignal). Ends with a
// barrier.
SYNCOPATE_DEVICE void MoveChunkAndSignal(const FusedLaunchArgs& args, const TransferOp& op,
                                         const CopySegment* segments, int part = 0,
                                         int parts = 1, int counter = -1) {
  CtaMoveSegments(segments, op.seg_begin, op.seg_end, OperandOn(args, op.src_slot, op.src_rank),
                  OperandOn(args, op.dst_slot, op.dst_rank), op.dtype, op.reduce, part, parts);
  __syncthreads();
  if (FlatThreadIdx() == 0) ArriveAndSignal(args, op, parts, counter);
  __syncthreads();
}

// Named barrier `id` (1..15; 0 is __syncthreads) over `nthreads` threads (a multiple of 32):
// the barrier of a thread group in a warp-specialised kernel, where the other warps must not be
// stalled.
SYNCOPATE_DEVICE void GroupBarrier(int id, int nthreads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(nthreads) : "memory");
}

// A thread group of a warp-specialised CTA: this thread's index in the group, the group's size,
// and the named barrier its members (and only they) synchronise on; barrier 0 is the whole CTA
// (__syncthreads, for any block size).
struct ThreadGroup {
  int tid;
  int nthreads;
  int barrier;
  SYNCOPATE_DEVICE void sync() const {
    if (barrier == 0) {
      __syncthreads();
    } else {
      GroupBarrier(barrier, nthreads);
    }
  }
};

// The whole CTA as a ThreadGroup.
SYNCOPATE_DEVICE ThreadGroup WholeCta() { return ThreadGroup{FlatThreadIdx(), FlatBlockDim(), 0}; }

// impl/pieces.cuh: a compute CTA with no tile left helping move the transfer program.
template <class Tables>
SYNCOPATE_DEVICE bool JoinTransfers(const FusedLaunchArgs& args, const ThreadGroup& g);

// Group-collective MoveChunkAndSignal.
SYNCOPATE_DEVICE void GroupMoveChunkAndSignal(const FusedLaunchArgs& args, const TransferOp& op,
                                              const CopySegment* segments, const ThreadGroup& g) {
  GroupMoveSegments(segments, op.seg_begin, op.seg_end, OperandOn(args, op.src_slot, op.src_rank),
                    OperandOn(args, op.dst_slot, op.dst_rank), op.dtype, op.reduce, g.tid,
                    g.nthreads);
  g.sync();
  if (g.tid == 0) ArriveAndSignal(args, op, /*parts=*/1, /*counter=*/-1);
}

// Dynamic dealing over a launch's two-word tile counter (FusedLaunchArgs::tile_counter), for
// both schedules' claim(): word 0 hands out tile indices in order; once they run out, each of
// the `participants` CTAs takes its -1 and counts itself in word 1, and the last one resets both
// for the next launch (every participant holds its -1: nobody claims again in this launch).
// `progress` (nullptr: none) gets every ticket drawn, +1, the run-out ones included: those are
// drawn as CTAs finish their last tiles, so peers see this rank compute to its last tile.
SYNCOPATE_DEVICE int ClaimFromCounter(unsigned* counter, int num_tiles, int participants,
                                      unsigned* progress) {
  const unsigned ticket = atomicAdd(counter, 1u);
  if (progress != nullptr) StoreRelaxedSys(progress, ticket + 1u);
  if (ticket < static_cast<unsigned>(num_tiles)) return static_cast<int>(ticket);
  if (atomicAdd(counter + 1, 1u) + 1u == static_cast<unsigned>(participants)) {
    atomicExch(counter, 0u);
    atomicExch(counter + 1, 0u);
  }
  return -1;
}

// Identity schedule: the kernel runs as an ordinary local kernel over all tiles.
class LocalSchedule {
 public:
  // `tile_counter`: FusedLaunchArgs::tile_counter, for claim() (nullptr: a static deal).
  SYNCOPATE_DEVICE LocalSchedule(int tiles_m, int tiles_n, int group_m,
                                 unsigned* tile_counter = nullptr)
      : tiles_m_(tiles_m), tiles_n_(tiles_n), group_m_(group_m), tile_counter_(tile_counter) {}

  SYNCOPATE_DEVICE int first() const { return blockIdx.x; }
  SYNCOPATE_DEVICE int stride() const { return gridDim.x; }
  SYNCOPATE_DEVICE int num_tiles() const { return tiles_m_ * tiles_n_; }
  SYNCOPATE_DEVICE int tiles_m() const { return tiles_m_; }
  SYNCOPATE_DEVICE int tiles_n() const { return tiles_n_; }
  SYNCOPATE_DEVICE Tile tile(int i) const { return SwizzleTile(i, tiles_m_, tiles_n_, group_m_); }
  // As FusedSchedule::claim: from the counter when the launch has one, else statically (first,
  // first + stride, ...). Dynamic matters beside concurrent ranks even with no waits: a
  // persistent grid whose CTAs need a whole SM each does not always start at once next to
  // another process's kernels, and a late CTA's static share then runs after everyone else's
  // (an unfused GEMM+ReduceScatter under MPS took 0.35-0.75 ms longer, bench/RESULTS.md).
  SYNCOPATE_DEVICE int claim() {
    if (tile_counter_ == nullptr) {
      next_ = next_ < 0 ? first() : next_ + stride();
      return next_ < num_tiles() ? next_ : -1;
    }
    return ClaimFromCounter(tile_counter_, num_tiles(), stride(), /*progress=*/nullptr);
  }
  SYNCOPATE_DEVICE bool wait(const Tile&) const { return true; }
  SYNCOPATE_DEVICE void done(const Tile&) const {}
  SYNCOPATE_DEVICE bool wait_by_thread(const Tile&) const { return true; }
  SYNCOPATE_DEVICE void done_by_group(const Tile&, const ThreadGroup&) const {}
  SYNCOPATE_DEVICE bool publishes(const Tile&) const { return false; }
  // No tile parts in a local launch (FusedSchedule::tile_parts_from_staging).
  SYNCOPATE_DEVICE bool tile_parts_from_staging() const { return false; }
  SYNCOPATE_DEVICE void leave_tile_parts() const {}
  SYNCOPATE_DEVICE bool publishes_from_memory(const Tile&) const { return false; }
  template <class Read>
  SYNCOPATE_DEVICE bool move_tile_parts(const Tile&, const ThreadGroup&, const Read&) const {
    return true;
  }
  // Nothing to move in a local launch.
  SYNCOPATE_DEVICE bool join_transfers(const ThreadGroup&) const { return true; }
  SYNCOPATE_DEVICE bool join_transfers() const { return true; }
  // No peers in a local launch.
  SYNCOPATE_DEVICE void* remote(int /*operand*/, int /*peer*/) const { return nullptr; }
  template <class T>
  SYNCOPATE_DEVICE T* remote_as(int operand, int peer) const {
    return static_cast<T*>(remote(operand, peer));
  }

 private:
  int tiles_m_;
  int tiles_n_;
  int group_m_;
  unsigned* tile_counter_;
  int next_ = -1;  // claim's cursor (static deal)
};

// Whether generated `Tables` move some chunk in tile parts (KernelSpec::push_tiles): such tables
// define kTileParts and tile_out_segs(); tables without define neither (their source is what it
// was before tile parts existed).
template <class Tables, class = void>
struct TilePartsOf {
  static constexpr bool value = false;
};
template <class Tables>
struct TilePartsOf<Tables, decltype(void(Tables::kTileParts))> {
  static constexpr bool value = Tables::kTileParts;
  // Every part's segments in 16-byte units (offsets, rows and pitches), each part a copy or a
  // sum of 16-bit floats: a kernel may hand them out of its own staged copy of the tile
  // (move_tile_parts) instead of global memory.
  static constexpr bool vec16 = Tables::kTilePartsVec16;
};

// The overlap schedule. `Tables` (generated) provides:
//   static constexpr int kWorldSize, kTilesM, kTilesN, kNumTiles, kGroupM;
//   static constexpr bool kCommJoinsCompute;  no transfer waits for a tile (no producers, guards)
//   static const int* tile_order();     [world][num_tiles] canonical tile ids, execution order
//   static const int* wait_offsets();   [world * num_tiles + 1] into waits(), by canonical id
//   static const WaitEntry* waits();
//   static const int* out_offsets();    [world * num_tiles + 1] into tile_out(), by canonical id
//   static const int* tile_out();       rank-local outgoing chunk indices
//   static const int* out_base();       [world + 1] into out_chunks()
//   static const TransferOp* out_chunks();
//   static const int* chan_base();      [world + 1] into chan_ops() (global channel ids)
//   static const int* chan_ops();       [channels + 1] into prog_ops()
//   static const TransferOp* prog_ops();
//   static const WaitEntry* deps();
//   static const CopySegment* segments();
// and, where some chunk moves in tile parts (TilePartsOf):
//   static constexpr bool kTileParts, kTilePartsVec16;
//   static const int* tile_out_segs();  two per tile_out() entry: the tile's part, segments()
//                                       rows [first, second)
template <class Tables>
class FusedSchedule {
 public:
  SYNCOPATE_DEVICE explicit FusedSchedule(const FusedLaunchArgs& args) : args_(args) {}
  // One per thread of a compute CTA, for the kernel's whole run: a copy would count the tile
  // parts it holds twice (~FusedSchedule).
  FusedSchedule(const FusedSchedule&) = delete;
  FusedSchedule& operator=(const FusedSchedule&) = delete;

  // Compute CTAs follow the comm and control CTAs; tiles are dealt out among them. Where comm
  // CTAs join the computation (CommJoinsCompute), they take the last places of the deal, so the
  // first tiles of the order go to CTAs that start on them at once.
  SYNCOPATE_DEVICE int first() const {
    const int b = static_cast<int>(blockIdx.x);
    const int fixed = static_cast<int>(args_.num_comm_ctas + args_.num_control_ctas);
    if (!CommJoinsCompute(args_)) return b - fixed;
    const int compute = static_cast<int>(gridDim.x) - fixed;
    return b < fixed ? compute + b : b - fixed;
  }
  SYNCOPATE_DEVICE int stride() const {
    return static_cast<int>(gridDim.x) -
           (CommJoinsCompute(args_)
                ? 0
                : static_cast<int>(args_.num_comm_ctas + args_.num_control_ctas));
  }
  // True when comm CTAs compute tiles after their transfer program: no transfer of the plan
  // waits for a tile (so a comm CTA's program never waits for work dealt to comm CTAs), the
  // launch has no control CTA (which must stay free to release gates until the end), and tiles
  // are dealt dynamically (claim with a counter). With a static deal a comm CTA starts its share
  // after its program and its tail waits, i.e. after the slowest peer entered: traced under MPS
  // (70B, TP=4) the joined comm CTAs were the last CTAs of their kernels, and 8B TP=2 went from
  // 1.77 ms (session 2, no join) to 2.30 ms.
  static SYNCOPATE_DEVICE bool CommJoinsCompute(const FusedLaunchArgs& args) {
    return Tables::kCommJoinsCompute && args.num_comm_ctas > 0 && args.num_control_ctas == 0 &&
           args.tile_counter != nullptr;
  }
  SYNCOPATE_DEVICE int num_tiles() const { return Tables::kNumTiles; }

  // Dynamic dealing, for persistent kernels: called by ONE thread of the CTA (the one that
  // starts a tile's work, e.g. a producer; it hands the index to the others), repeatedly until
  // it returns -1. Tiles go out in execution order to whichever CTA asks first, so a CTA that
  // starts late (beside concurrent ranks not every CTA of a full grid is resident at once: one
  // seen starting 4.8 ms after its kernel under MPS) or waits long takes fewer tiles instead of
  // holding back its static share. A kernel uses either claim() or first()/stride(), not both.
  // Participants are the stride() CTAs; the last one to run out resets the counter for the
  // next launch. Without a counter (args.tile_counter null) it deals statically.
  SYNCOPATE_DEVICE int claim() {
    if (args_.tile_counter == nullptr) {
      next_ = next_ < 0 ? first() : next_ + stride();
      return next_ < Tables::kNumTiles ? next_ : -1;
    }
    unsigned* progress = args_.tile_progress != nullptr ? args_.tile_progress[args_.rank] : nullptr;
    return ClaimFromCounter(args_.tile_counter, Tables::kNumTiles, stride(), progress);
  }
  SYNCOPATE_DEVICE int tiles_m() const { return Tables::kTilesM; }
  SYNCOPATE_DEVICE int tiles_n() const { return Tables::kTilesN; }
  SYNCOPATE_DEVICE int rank() const { return args_.rank; }
  SYNCOPATE_DEVICE int world_size() const { return args_.world_size; }

  SYNCOPATE_DEVICE Tile tile(int i) const {
    const int id = Tables::tile_order()[args_.rank * Tables::kNumTiles + i];
    return Tile{id / Tables::kTilesN, id % Tables::kTilesN, id};
  }

  // CTA-collective. Thread 0 acquires every signal of the tile's wait set (all under one
  // deadline); returns false for every thread when the launch aborted, and the kernel must
  // then return.
  SYNCOPATE_DEVICE bool wait(const Tile& t) const {
    int ok = 1;
    if (FlatThreadIdx() == 0) {
      const int* off = Tables::wait_offsets() + args_.rank * Tables::kNumTiles + t.index;
      const unsigned long long t0 = args_.cta_trace != nullptr ? GlobalTimerNs() : 0;
      SpinState st;
      for (int k = off[0]; k < off[1]; ++k) {
        const WaitEntry w = Tables::waits()[k];
        if (!SpinUntilEpoch(args_, args_.signals + w.signal, w, t.index, st)) {
          ok = 0;
          break;
        }
      }
      if (off[0] != off[1] && args_.cta_trace != nullptr) TraceWait(args_, GlobalTimerNs() - t0);
    }
    return __syncthreads_and(ok) != 0;
  }

  // CTA-collective. Counts this tile into every outgoing chunk it writes; the last producer of a
  // chunk resets its counter and publishes it (SM mode, direct chunk: moves it to the peer and
  // sets the peer's signal; landing guard: sets this rank's guard word; always:
  // chunk_ready[c] = epoch, for the copy engine / comm CTAs). A chunk in tile parts (SM mode):
  // the tile moves its own part now, once the destination entered the launch (so this may wait
  // for a peer), and counts it at its next call, join_transfers or the schedule's end; its last
  // part sets the peer's signal.
  SYNCOPATE_DEVICE void done(const Tile& t) {
    const int* off = OutEntries(t);
    const int begin = off[0];
    const int end = off[1];
    if (begin == end) {
      if (FlatThreadIdx() == 0) FlushTileParts();
      return;
    }
    __syncthreads();  // every thread's stores of the tile are issued
    const bool tid0 = FlatThreadIdx() == 0;
    if (tid0) __threadfence_system();
    if (tid0) CountTileParts();  // the previous tile's, covered by that fence
    for (int k = begin; k < end; ++k) {
      const int c = Tables::tile_out()[k];
      const TransferOp& op = OutChunk(c);
      if (MovesTileParts(op)) {
        if (!parts_left_ && !MoveTilePart(k, op, WholeCta())) return;
        continue;
      }
      int last = 0;
      if (tid0) {
        const unsigned prev = atomicAdd(args_.chunk_counters + c, 1u);
        if (prev + 1u == static_cast<unsigned>(op.producers)) {
          last = 1;
          atomicExch(args_.chunk_counters + c, 0u);  // ready for the next launch
          __threadfence_system();                    // acquire the other producers' stores
        }
      }
      if (__syncthreads_or(last)) {
        if (op.direct == kDirectMove && args_.num_comm_ctas > 0) {
          // The peer must have entered this launch before we write into it.
          if (!__syncthreads_and(tid0 ? WaitGuards(args_, op.dst_rank) : true)) return;
          MoveChunkAndSignal(args_, op, Tables::segments());
        }
        if (tid0) {
          // A landing guard releases this rank's own word: the peer may now reduce into it.
          if (op.direct == kLandingGuard)
            StoreReleaseSys(args_.signals + op.signal, LaunchEpoch(args_));
          StoreReleaseSys(args_.chunk_ready + c, LaunchEpoch(args_));
        }
      }
    }
    if (tid0 && !parts_left_) DeferTileParts(begin, end);
  }

  // Warp-specialised kernels (a producer warp loads tiles while consumer warps compute earlier
  // ones) cannot call the CTA-collective wait()/done(): their barriers would stall one role on
  // the other. These two split them by role; a kernel uses either the pair above or this pair.
  //
  // wait_by_thread: called by ONE thread (the one that issues the tile's loads of consumed
  // operands), no barrier. Acquires the tile's wait set like wait(); the caller then orders its
  // group's loads after it (a group barrier; plus fence.proxy.async before TMA loads, which
  // this does for TMA's sake). Returns false when the launch aborted: the kernel must tell its
  // other roles (it owns the protocol for that) and return.
  SYNCOPATE_DEVICE bool wait_by_thread(const Tile& t) const {
    const int* off = Tables::wait_offsets() + args_.rank * Tables::kNumTiles + t.index;
    const unsigned long long t0 = args_.cta_trace != nullptr ? GlobalTimerNs() : 0;
    SpinState st;
    for (int k = off[0]; k < off[1]; ++k) {
      const WaitEntry w = Tables::waits()[k];
      if (!SpinUntilEpoch(args_, args_.signals + w.signal, w, t.index, st)) return false;
    }
    if (off[0] != off[1] && args_.cta_trace != nullptr) TraceWait(args_, GlobalTimerNs() - t0);
#if __CUDA_ARCH__ >= 900
    if (off[0] != off[1]) asm volatile("fence.proxy.async;" ::: "memory");
#endif
    return true;
  }

  // True when done()/done_by_group() of tile t publishes outgoing chunks (t writes part of one):
  // its stores must then be complete, not merely issued, before that call. A kernel that stores
  // asynchronously (TMA bulk stores) waits for them only for such tiles.
  SYNCOPATE_DEVICE bool publishes(const Tile& t) const {
    const int* off = OutEntries(t);
    return off[0] != off[1];
  }

  // Tile parts moved by a group of their own. A warp-specialised kernel that stages each tile
  // in shared memory (for a TMA store) may give the tile parts' reductions to warps that are
  // otherwise idle (the producer warpgroup's, beside the one that issues the loads), so the
  // consumer warps go on with their next tile instead of reducing (tile parts measured 6-12%
  // slower than whole chunks at 2 ranks when the consumers moved them: bench/RESULTS.md,
  // 2026-12-07). The kernel then:
  //   - asks tile_parts_from_staging() (the same answer on every thread of the launch);
  //   - has every thread that calls done()/done_by_group() call leave_tile_parts() first, so
  //     those skip the parts (they still count and publish every other chunk);
  //   - waits for its asynchronous stores before done_by_group() only where
  //     publishes_from_memory(t) (a part is read from the staged tile, not from memory);
  //   - has the moving group call move_tile_parts(t, g, read) for every tile whose staged copy
  //     it holds, `read(src_offset)` returning the tile's 16 bytes at that byte offset of the
  //     parts' source operand (the offsets the plan's segments use).
  // -DSYNCOPATE_TILE_PARTS_IN_CONSUMERS=1 (SYNCOPATE_NVRTC_OPTIONS) keeps them in done*(), for
  // A/B runs.
#ifndef SYNCOPATE_TILE_PARTS_IN_CONSUMERS
#define SYNCOPATE_TILE_PARTS_IN_CONSUMERS 0
#endif
  SYNCOPATE_DEVICE bool tile_parts_from_staging() const {
    if constexpr (TilePartsOf<Tables>::value) {
      return TilePartsOf<Tables>::vec16 && !SYNCOPATE_TILE_PARTS_IN_CONSUMERS &&
             args_.num_comm_ctas > 0;
    }
    return false;
  }
  SYNCOPATE_DEVICE void leave_tile_parts() { parts_left_ = tile_parts_from_staging(); }

  // Whether done*() of tile t reads what the tile stored (it publishes a chunk other than a part
  // left to another group): the kernel's asynchronous stores must then be complete.
  SYNCOPATE_DEVICE bool publishes_from_memory(const Tile& t) const {
    if (!parts_left_) return publishes(t);
    const int* off = OutEntries(t);
    for (int k = off[0]; k < off[1]; ++k) {
      if (!MovesTileParts(OutChunk(Tables::tile_out()[k]))) return true;
    }
    return false;
  }

  // Group-collective over the moving group `g` (see tile_parts_from_staging), for every tile
  // the group is handed: counts the parts it moved for the previous one (they had a tile's time
  // to land; the last ones are counted when the kernel returns), then moves tile t's, each once
  // its destination entered the launch, reading the tile through `read`. False when the launch
  // aborted.
  template <class Read>
  SYNCOPATE_DEVICE bool move_tile_parts(const Tile& t, const ThreadGroup& g, const Read& read) {
    if constexpr (TilePartsOf<Tables>::value) {
      if (g.tid == 0) FlushTileParts();  // the reductions were issued before the last g.sync()
      const int* off = OutEntries(t);
      bool any = false;
      for (int k = off[0]; k < off[1]; ++k) {
        const TransferOp& op = OutChunk(Tables::tile_out()[k]);
        if (!MovesTileParts(op)) continue;
        any = true;
        if (!GuardPart(op, g)) return false;
        const int* segs = Tables::tile_out_segs() + 2 * k;
        MoveSegmentsFrom(read, segs[0], segs[1], OperandOn(args_, op.dst_slot, op.dst_rank),
                         op.dtype, op.reduce, g);
      }
      if (!any) return true;
      g.sync();  // every member's reductions issued before thread 0's later fence
      if (g.tid == 0) DeferTileParts(off[0], off[1]);
    }
    return true;
  }

  // done_by_group: collective over the thread group `g` that wrote the tile (every member calls
  // it after its stores of the tile; only g's named barrier is used). Same effect as done().
  SYNCOPATE_DEVICE void done_by_group(const Tile& t, const ThreadGroup& g) {
    __shared__ int syncopate_done_last;
    const int* off = OutEntries(t);
    const int begin = off[0];
    const int end = off[1];
    if (begin == end) {
      if (g.tid == 0) FlushTileParts();
      return;
    }
    g.sync();  // every member's stores of the tile are issued
    const bool tid0 = g.tid == 0;
    if (tid0) __threadfence_system();
    if (tid0) CountTileParts();  // the previous tile's, covered by that fence
    for (int k = begin; k < end; ++k) {
      const int c = Tables::tile_out()[k];
      const TransferOp& op = OutChunk(c);
      if (MovesTileParts(op)) {
        if (!parts_left_ && !MoveTilePart(k, op, g)) return;
        continue;
      }
      if (tid0) {
        int last = 0;
        const unsigned prev = atomicAdd(args_.chunk_counters + c, 1u);
        if (prev + 1u == static_cast<unsigned>(op.producers)) {
          last = 1;
          atomicExch(args_.chunk_counters + c, 0u);  // ready for the next launch
          __threadfence_system();                    // acquire the other producers' stores
        }
        syncopate_done_last = last;
      }
      g.sync();
      const int last = syncopate_done_last;
      g.sync();  // read before the next chunk's tid0 rewrites it
      if (last) {
        if (op.direct == kDirectMove && args_.num_comm_ctas > 0) {
          if (tid0) syncopate_done_last = WaitGuards(args_, op.dst_rank) ? 1 : 0;
          g.sync();
          const int guarded = syncopate_done_last;
          g.sync();
          if (!guarded) return;
          GroupMoveChunkAndSignal(args_, op, Tables::segments(), g);
        }
        if (tid0) {
          if (op.direct == kLandingGuard)
            StoreReleaseSys(args_.signals + op.signal, LaunchEpoch(args_));
          StoreReleaseSys(args_.chunk_ready + c, LaunchEpoch(args_));
        }
      }
    }
    if (tid0 && !parts_left_) DeferTileParts(begin, end);
  }

  // The last tile's parts are counted when the kernel returns (and the schedule with it): by
  // the thread that moved them, which alone holds them. Not after an abort (nothing more is
  // published then).
  SYNCOPATE_DEVICE ~FusedSchedule() { FlushTileParts(); }

  // After the kernel's last tile, in a kernel that takes its tiles with claim() (once it
  // returned -1), collective over the threads that computed tiles (a thread group, or the whole
  // CTA): they help move the rank's transfers still waiting to leave (impl/pieces.cuh) instead
  // of leaving the last chunks to the comm CTAs alone. A no-op where the plan's transfers do not
  // wait for tiles, and in a launch that deals statically (no tile counter), since a static share
  // may belong to a CTA not yet resident. A kernel that deals itself statically (first/stride)
  // must not call it. False when the launch aborted. Call it once, as the group's last use of
  // the schedule, from one group per CTA (its claim and step words are CTA-wide shared memory).
  SYNCOPATE_DEVICE bool join_transfers(const ThreadGroup& g) {
    // The group's last parts first: a joined CTA may wait for a peer (pieces.cuh) whose step
    // waits for them.
    if (g.tid == 0) FlushTileParts();
    return JoinTransfers<Tables>(args_, g);
  }
  SYNCOPATE_DEVICE bool join_transfers() { return join_transfers(WholeCta()); }

  // Operand `operand` (slot) on rank `peer`, for direct stores from an epilogue; nullptr when
  // the runtime bound no symmetric allocation for it.
  SYNCOPATE_DEVICE void* remote(int operand, int peer) const {
    return OperandOn(args_, operand, peer);
  }
  template <class T>
  SYNCOPATE_DEVICE T* remote_as(int operand, int peer) const {
    return static_cast<T*>(remote(operand, peer));
  }

  // Outgoing chunks no tile writes are ready from the start; the first compute CTA publishes
  // them (the copy engine or the comm CTAs may be waiting for chunk_ready).
  SYNCOPATE_DEVICE void PublishUnproducedChunks() const {
    if (blockIdx.x != args_.num_comm_ctas + args_.num_control_ctas || FlatThreadIdx() != 0) return;
    const int begin = Tables::out_base()[args_.rank];
    const int end = Tables::out_base()[args_.rank + 1];
    for (int i = begin; i < end; ++i) {
      if (Tables::out_chunks()[i].producers == 0) {
        StoreReleaseSys(args_.chunk_ready + (i - begin), LaunchEpoch(args_));
      }
    }
  }

 private:
  // Tile t's entries of tile_out(): [OutEntries(t)[0], OutEntries(t)[1]).
  SYNCOPATE_DEVICE const int* OutEntries(const Tile& t) const {
    return Tables::out_offsets() + args_.rank * Tables::kNumTiles + t.index;
  }
  // This rank's outgoing chunk c (a tile_out() value).
  SYNCOPATE_DEVICE const TransferOp& OutChunk(int c) const {
    return Tables::out_chunks()[Tables::out_base()[args_.rank] + c];
  }

  // Tile parts (kTileParts chunks, SM mode): each producer tile moves its own part as soon as it
  // is written, and the last producer sets the destination's signal. Counting a part into the
  // chunk needs its reductions to have landed (a fence), which takes them a while to drain: the
  // count waits until the moving group's next tile is done (that tile's fence covers them,
  // having had a tile's computation to land) or the kernel returns (the destructor).
  SYNCOPATE_DEVICE bool MovesTileParts(const TransferOp& op) const {
    if constexpr (TilePartsOf<Tables>::value) {
      return op.direct == kTileParts && args_.num_comm_ctas > 0;
    }
    return false;
  }

  // Group-collective: waits (thread 0) for the destination to have entered the launch, as a
  // direct move does (its identity fill before our reductions), then moves entry k's part. False
  // when the launch aborted.
  SYNCOPATE_DEVICE bool MoveTilePart(int k, const TransferOp& op, const ThreadGroup& g) {
    if constexpr (TilePartsOf<Tables>::value) {
      if (!GuardPart(op, g)) return false;
      const int* segs = Tables::tile_out_segs() + 2 * k;
      GroupMoveSegments(
          Tables::segments(), segs[0], segs[1], OperandOn(args_, op.src_slot, op.src_rank),
          OperandOn(args_, op.dst_slot, op.dst_rank), op.dtype, op.reduce, g.tid, g.nthreads);
      g.sync();  // every member's part issued before thread 0's later fence
    }
    return true;
  }

  // Group-collective: thread 0 waits for op's destination to have entered the launch (once per
  // destination and thread); false for every member when the launch aborted. The group's word
  // is indexed by its barrier, so two groups of one CTA (consumers and a moving group) never
  // share it.
  SYNCOPATE_DEVICE bool GuardPart(const TransferOp& op, const ThreadGroup& g) {
    __shared__ int syncopate_part_guarded[16];
    int& word = syncopate_part_guarded[g.barrier & 15];
    if (g.tid == 0) {
      const unsigned long long bit = 1ull << op.dst_rank;
      if ((entered_ & bit) == 0ull && WaitGuards(args_, op.dst_rank)) entered_ |= bit;
      word = (entered_ & bit) != 0ull ? 1 : 0;
    }
    g.sync();
    const int guarded = word;
    g.sync();  // read before thread 0 may write it again
    return guarded != 0;
  }

  // Segments [begin, end) (16-byte units, TilePartsOf::vec16) from `read` into `dst_base`: a
  // store, or a reduction by vector atomics (other ranks add into the same bytes).
  template <class Read>
  SYNCOPATE_DEVICE void MoveSegmentsFrom(const Read& read, int begin, int end, void* dst_base,
                                         int dtype, int reduce, const ThreadGroup& g) const {
    char* dst = static_cast<char*>(dst_base);
    const bool sum = (reduce & ~kDevReducePlain) == kDevReduceSum;
    for (int i = begin; i < end; ++i) {
      const CopySegment seg = Tables::segments()[i];
      const long long per_row = seg.row_bytes / 16;
      const long long units = per_row * seg.rows;
      for (long long u = g.tid; u < units; u += g.nthreads) {
        const long long row = u / per_row;
        const long long col = (u - row * per_row) * 16;
        const uint4 v = read(seg.src_offset + row * seg.src_pitch + col);
        char* to = dst + seg.dst_offset + row * seg.dst_pitch + col;
        if (sum) {
          detail::ReduceSum16Bytes(to, v, dtype);
        } else {
          *reinterpret_cast<uint4*>(to) = v;
        }
      }
    }
  }

  // Thread 0 of the group, with nothing else to publish now (no chunk in this tile, before
  // joining the transfers, at the kernel's end): its pending parts are counted, after a fence
  // (their reductions were issued before the group's last barrier). Not after an abort (nothing
  // more is published then).
  SYNCOPATE_DEVICE void FlushTileParts() {
    if constexpr (TilePartsOf<Tables>::value) {
      if (pending_begin_ == pending_end_ || DeviceAborted(args_)) return;
      __threadfence_system();
      CountTileParts();
    }
  }

  // Thread 0 of the group, after moving this tile's parts: they are counted later.
  SYNCOPATE_DEVICE void DeferTileParts(int begin, int end) {
    if constexpr (TilePartsOf<Tables>::value) {
      if (args_.num_comm_ctas == 0) return;
      pending_begin_ = begin;
      pending_end_ = end;
    }
  }

  // Thread 0 of the group, after a fence that follows the pending parts' reductions: counts each
  // into its chunk; the last producer resets the counter and releases the destination's signal
  // and this rank's chunk_ready.
  SYNCOPATE_DEVICE void CountTileParts() {
    if constexpr (TilePartsOf<Tables>::value) {
      for (int k = pending_begin_; k < pending_end_; ++k) {
        const int c = Tables::tile_out()[k];
        const TransferOp& op = OutChunk(c);
        if (!MovesTileParts(op)) continue;
        const unsigned prev = atomicAdd(args_.chunk_counters + c, 1u);
        if (prev + 1u != static_cast<unsigned>(op.producers)) continue;
        atomicExch(args_.chunk_counters + c, 0u);  // ready for the next launch
        __threadfence_system();                    // the other producers' parts before the signal
        StoreReleaseSys(SignalWordOn(args_, op.dst_rank, op.signal), LaunchEpoch(args_));
        StoreReleaseSys(args_.chunk_ready + c, LaunchEpoch(args_));
      }
      pending_begin_ = pending_end_ = 0;
    }
  }

  const FusedLaunchArgs& args_;
  int next_ = -1;  // claim's cursor when it deals statically
  // Tile parts, on the thread that moves a group's parts: tile_out() entries of its last tile
  // not yet counted, and the ranks seen entered this launch (a bit each, kMaxRanks <= 64).
  int pending_begin_ = 0;
  int pending_end_ = 0;
  unsigned long long entered_ = 0ull;
  bool parts_left_ = false;  // leave_tile_parts(): done*() skip them
};

}  // namespace syncopate

#endif  // SYNCOPATE_IMPL_SCHEDULE_CUH_
