// Syncopate's device API: what a local kernel is written against, and what generated overlap
// kernels instantiate. Header-only CUDA C++ that NVRTC compiles without any include path (no std
// headers, no cuda_fp16.h / cuda_bf16.h); nvcc compiles it too.
//
// A local kernel is a __device__ function template generic over its schedule:
//
//   template <class Schedule, class T>
//   __device__ void my_kernel(Schedule& s, const T* A, T* C, int M, int N) {
//     for (int i = s.first(); i < s.num_tiles(); i += s.stride()) {
//       const syncopate::Tile t = s.tile(i);  // t.m, t.n: tile coordinates; t.index: m*tiles_n+n
//       if (!s.wait(t)) return;               // every incoming chunk the tile reads has arrived
//       ... compute tile (t.m, t.n) ...
//       s.done(t);                            // count the tile into the chunks it writes
//     }
//   }
//
// Schedule concept (both implementations in impl/schedule.cuh):
//   int first(), stride(), num_tiles(), tiles_m(), tiles_n()
//   Tile tile(int i)          tile i of this CTA's walk, in execution order
//   bool wait(const Tile&)    CTA-collective; false: the launch aborted (a wait timed out)
//   void done(const Tile&)    CTA-collective; publishes outgoing chunks whose last producer it is
//   void* remote(int operand, int peer) / T* remote_as<T>(operand, peer)
//                             an operand slot's pointer on a peer (nullptr when not symmetric)
// wait() and done() contain __syncthreads(): every thread of the CTA calls them, in the same
// order. Kernels must leave shared memory consistent across tiles (a persistent CTA runs many).
// done() and done_by_group() may move data and wait (bounded) for a peer to enter the launch,
// and keep state in the schedule (a spec with push_tiles counts a tile's part at the next call
// or when the schedule is destroyed): take the schedule by reference, never copy it, and return
// from the kernel normally (no exit or trap). One thread group per CTA calls done_by_group.
// Warp-specialised kernels (examples/kernels/gemm_wgmma.cuh) use the role-split pair instead:
//   bool wait_by_thread(const Tile&)                 one thread (the loader), no barrier
//   void done_by_group(const Tile&, ThreadGroup g)   the threads that wrote the tile, named
//                                                    barrier g.barrier over g.nthreads threads
//   bool publishes(const Tile&)                      done_by_group will publish chunks: the
//                                                    tile's asynchronous (bulk) stores must be
//                                                    complete before it, not just issued
// Optionally, a kernel that stages each tile in shared memory gives the tile parts (push_tiles)
// to idle warps of its own, which move them from the staged copy while the tile's computing
// warps go on (FusedSchedule::tile_parts_from_staging has the protocol; gemm_wgmma.cuh does it):
//   bool tile_parts_from_staging()                   whether the launch moves parts that way
//   void leave_tile_parts()                          done*() of this thread skip the parts
//   bool publishes_from_memory(const Tile&)          as publishes, less the parts left
//   bool move_tile_parts(Tile, ThreadGroup, read)    the moving group: read(src_offset) gives
//                                                    the staged tile's 16 bytes; false: aborted
// And, in a kernel that takes its tiles with claim(), after claim() returned -1 (optional, but a
// kernel without it leaves a GEMM+ReduceScatter's last chunks to the few comm CTAs; never in a
// kernel that deals itself statically with first/stride):
//   bool join_transfers() / join_transfers(ThreadGroup g)
//                             the CTA (or the group that computed tiles) helps move the chunks
//                             still waiting to leave (impl/pieces.cuh); false: aborted
//
// Schedules:
//   syncopate::LocalSchedule(tiles_m, tiles_n, group_m, args.tile_counter)
//                                                        all tiles, no waits: a plain kernel
//   syncopate::FusedSchedule<Tables>(args)               generated per plan x kernel spec
// Communication CTAs of the SM backend run syncopate::RunTransferProgram<Tables>(args)
// (impl/comm.cuh), the control CTA of a copy-engine launch syncopate::RunControlCta(args)
// (impl/launch_waits.cuh); the launch ABI (FusedLaunchArgs, the protocol, timeouts) is in
// syncopate/launch_abi.h.
#ifndef SYNCOPATE_DEVICE_CUH_
#define SYNCOPATE_DEVICE_CUH_

#include <syncopate/launch_abi.h>
#include <syncopate/impl/types.cuh>
#include <syncopate/impl/sync.cuh>
#include <syncopate/impl/copy.cuh>
#include <syncopate/impl/launch_waits.cuh>
#include <syncopate/impl/schedule.cuh>
#include <syncopate/impl/comm.cuh>

#endif  // SYNCOPATE_DEVICE_CUH_
