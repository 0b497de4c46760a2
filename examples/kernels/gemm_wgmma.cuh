// Example local kernel for Hopper (sm_90a): C[M, N] = A[M, K] * B[N, K]^T, the same contract as
// gemm_mma.cuh (both operands K-contiguous, bf16 or fp16 in, fp32 accumulate, T out), at
// tensor-core rate through wgmma.
//
// Structure (warp specialisation, one CTA per SM, persistent over the schedule's tiles):
//   warpgroup 0      producer: one thread claims the next tile (s.claim(); dealt dynamically
//                    when the launch asks for it, so a CTA that starts late takes fewer tiles
//                    instead of a fixed share; the index reaches the consumers with the tile's
//                    first stage), acquires the tile's incoming chunks (s.wait_by_thread), then
//                    streams the tile's k-blocks (BM x 64 of A, BN x 64 of B) into a
//                    kStages-deep ring of shared-memory stages with two TMA bulk tensor copies
//                    per stage, landing in the 128-byte swizzle that wgmma
//                    descriptors expect; the copies complete the stage's "full" mbarrier by
//                    their byte count. The rest of warp 0 exits after encoding the descriptors,
//                    the other three producer warps at once, unless they move tile parts: in a
//                    GEMM+ReduceScatter with push_tiles (s.tile_parts_from_staging) they take
//                    each tile from the consumers' staging tile (mbarriers staged_full /
//                    staged_empty) and reduce its parts into their owners from shared memory
//                    (MoveStagedTileParts), while the consumers go on with their next tile.
//   warpgroups 1, 2  consumers: each owns 64 rows of the BM = 128 row tile; per k-block, four
//                    wgmma.m64nBNk16 (A and B from shared memory), one commit group kept in
//                    flight, the stage released on its "empty" mbarrier once the wgmmas reading it
//                    completed. Epilogue: fp32 -> T into a shared-memory staging tile, then one
//                    thread per warpgroup stores it with TMA and goes on to the next tile while
//                    the store drains (waiting for it only where s.publishes_from_memory(t):
//                    the chunk the tile completes is published by s.done_by_group over the 256
//                    consumer threads, named barrier 2). Without room for the staging tile (4
//                    stages of 128 x 256), with a misaligned C, or with the cp.async producer
//                    (the descriptors come from the TMA path), registers go straight to global
//                    memory.
//                    With no tile left, they join the transfers still waiting (s.join_transfers).
// The producer runs up to kStages k-blocks ahead, across tile boundaries, so a tile's wait for
// its chunks overlaps the math of earlier tiles, and the consumers never wait on a flag.
//
// TMA descriptors are encoded on the device (EncodeTensorMap: the launch ABI carries operand
// pointers, not CUtensorMaps). kLoads = kLoadCpAsync selects the earlier producer instead: the
// 128 producer threads copy 16 bytes each with cp.async (same layout), for comparison. Shapes:
// any M, N; K % 8 == 0 with 16-byte aligned A and B takes the TMA (or cp.async) path, anything
// else a (slow) element-wise producer path. Out-of-range rows and k are zero-filled, stores
// predicated.
//
// Launch: 384 threads; dynamic shared memory jit::GemmWgmmaSmemBytes(BM, BN, kStages): the
// stages, 2048 bytes, and the BM x BN staging tile when all fits in kMaxDynamicSmem (215040 bytes
// for 128 x 256 x 3 stages); any grid (a persistent grid of one CTA per SM is best). Compile for
// sm_90a (wgmma); on other targets this header compiles to a trap, and the runtime selects
// gemm_mma.cuh there.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <syncopate/device.cuh>

namespace syncopate_examples {
namespace wgmma_detail {

constexpr int kBK = 64;            // k elements per stage: one 128-byte swizzle row of 16-bit data
constexpr int kRowBytes = kBK * 2;
constexpr int kThreads = 384;      // 3 warpgroups
constexpr int kProducerThreads = 128;
constexpr int kConsumerThreads = 256;
constexpr int kConsumerBarrier = 2;  // named barriers: 1 producer group, 2 consumer group,
constexpr int kProducerBarrier = 1;  // 3 + i consumer warpgroup i's epilogue
constexpr int kEpilogueBarrier0 = 3;
constexpr int kPartMoverBarrier = 5;  // the tile-part movers (producer warps 1-3)
constexpr int kPartMoverThreads = kProducerThreads - 32;
// Hopper's largest shared memory per block (227 KB) less 2048 bytes for the static shared
// memory of a fused kernel (jit::kFusedStaticSmemReserve). The epilogue stages the whole BM x BN
// output tile through shared memory (and stores it with TMA) when that still fits beside the
// stages; jit::GemmWgmmaSmemBytes applies the same rule on the host.
constexpr int kMaxDynamicSmem = 232448 - 2048;
template <int BM, int BN, int kStages>
__host__ __device__ constexpr bool StagedEpilogueFits() {
  return kStages * (BM + BN) * kRowBytes + 2048 + BM * BN * 2 <= kMaxDynamicSmem;
}

__device__ __forceinline__ unsigned SmemAddr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && \
    (defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(__CUDA_ARCH_SPECIFIC__) || \
     defined(__CUDA_ARCH_FEAT_SM90A))
#define SYNCOPATE_WGMMA_OK 1
#else
#define SYNCOPATE_WGMMA_OK 0
#endif

__device__ __forceinline__ void MbarInit(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(SmemAddr(bar)), "r"(count)
               : "memory");
}

__device__ __forceinline__ void MbarArrive(unsigned long long* bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(
                   SmemAddr(bar))
               : "memory");
}

// Spins until the barrier's phase with parity `parity` has completed (acquire, CTA scope).
__device__ __forceinline__ void MbarWait(unsigned long long* bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(SmemAddr(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

// 16-byte async copy; bytes beyond `src_bytes` (0 or 16) are zero-filled.
__device__ __forceinline__ void CpAsync16(unsigned smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem), "l"(gmem),
               "r"(src_bytes)
               : "memory");
}

// Arrives on `bar` once every cp.async this thread issued so far has landed; the arrival counts
// toward the barrier's initial count (noinc).
__device__ __forceinline__ void CpAsyncArrive(unsigned long long* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(SmemAddr(bar))
               : "memory");
}

// Shared memory written through the generic proxy (cp.async, st.shared) is read by wgmma through
// the async proxy: order the two.
__device__ __forceinline__ void FenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ---- TMA (cp.async.bulk.tensor) --------------------------------------------------------------
// The launch ABI carries no host-encoded CUtensorMap, so the kernel encodes its own descriptors
// for A and B: zero 128 bytes of shared memory, set every field with tensormap.replace, then
// publish the descriptor to a global slot (TMA reads descriptors from param, const or global
// memory, never shared) with a release in the tensormap proxy that the issuing thread acquires.
// Each CTA takes the next slot of a 1024-slot ring from a ticket, so launches in flight together
// (other streams, other operands) get different slots unless 1024 more CTAs of this module start
// while one is still resident (one CTA per SM runs at a time; concurrent launches of one module
// on many streams, with a CTA stalled on a peer, are the case this does not cover).
constexpr unsigned kTensorMapSlots = 1024;
constexpr int kTensorMapBytes = 128;
constexpr int kMapsPerSlot = 3;  // A, B, C
__device__ __align__(128) unsigned char g_tensor_maps[kTensorMapSlots * kMapsPerSlot *
                                                      kTensorMapBytes];
__device__ unsigned g_tensor_map_ticket;

#if SYNCOPATE_WGMMA_OK
// Encodes a 2-D descriptor for a [rows, cols] 16-bit row-major matrix at `base`, boxes of
// `box_rows` rows x 64 columns landing in the 128-byte swizzle (the layout Descriptor() names),
// out-of-range elements zero-filled. Whole warp; `smem_map` 128-byte aligned scratch.
__device__ __forceinline__ void EncodeTensorMap(unsigned char* smem_map, unsigned char* gmem_map,
                                                const void* base, int rows, int cols,
                                                int box_rows, int lane) {
  reinterpret_cast<unsigned*>(smem_map)[lane] = 0u;
  __syncwarp();
  const unsigned m = SmemAddr(smem_map);
  if (lane == 0) {
    // Dimension 0 is the contiguous one (columns = k). Element type .u16 (ordinal 1): TMA only
    // moves bits, and a zero fill is +0 in both bf16 and fp16. Swizzle mode 3 = 128 bytes.
    const unsigned long long row_pitch = static_cast<unsigned long long>(cols) * 2ull;
    asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;"
                 ::"r"(m), "l"(base) : "memory");
    asm volatile("tensormap.replace.tile.rank.shared::cta.b1024.b32 [%0], %1;"
                 ::"r"(m), "r"(1) : "memory");  // rank - 1
    asm volatile("tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%0], 0, %1;"
                 ::"r"(m), "r"(kBK) : "memory");
    asm volatile("tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%0], 1, %1;"
                 ::"r"(m), "r"(box_rows) : "memory");
    asm volatile("tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 0, %1;"
                 ::"r"(m), "r"(cols) : "memory");
    asm volatile("tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 1, %1;"
                 ::"r"(m), "r"(rows) : "memory");
    asm volatile("tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%0], 0, %1;"
                 ::"r"(m), "l"(row_pitch) : "memory");
    asm volatile("tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%0], 0, %1;"
                 ::"r"(m), "r"(1) : "memory");
    asm volatile("tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%0], 1, %1;"
                 ::"r"(m), "r"(1) : "memory");
    asm volatile("tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%0], 1;" ::"r"(m)
                 : "memory");
    asm volatile("tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%0], 3;" ::"r"(m)
                 : "memory");
  }
  __syncwarp();
  unsigned long long g;
  asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(gmem_map));
  asm volatile(
      "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned "
      "[%0], [%1], 128;" ::"l"(g), "r"(m) : "memory");
}

// The issuing thread's side of the publication above.
__device__ __forceinline__ void AcquireTensorMap(const void* gmem_map) {
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(gmem_map)
               : "memory");
  asm volatile("prefetch.tensormap [%0];" ::"l"(gmem_map) : "memory");
}

__device__ __forceinline__ void MbarArriveExpectTx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SmemAddr(bar)),
               "r"(bytes)
               : "memory");
}

// Box (rows [c1, c1 + box_rows), columns [c0, c0 + 64)) into shared memory at `dst`; its bytes
// count toward `bar`'s transaction count.
__device__ __forceinline__ void TmaLoad2d(unsigned dst, const void* map, int c0, int c1,
                                          unsigned long long* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
      "[%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(SmemAddr(bar))
      : "memory");
}

// Shared memory at `src` (a 64 x 64 box in the 128-byte swizzle) to rows [c1, c1 + 64), columns
// [c0, c0 + 64) of the tensor; out-of-range rows and columns are not written. Asynchronous: the
// issuing thread commits and later waits (BulkWaitRead / BulkWaitAll).
__device__ __forceinline__ void TmaStore2d(const void* map, int c0, int c1, unsigned src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
               ::"l"(map), "r"(c0), "r"(c1), "r"(src)
               : "memory");
}
__device__ __forceinline__ void BulkCommit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// This thread's committed bulk stores have read their shared memory (it may be rewritten).
__device__ __forceinline__ void BulkWaitRead() {
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
// This thread's committed bulk stores are complete, and ordered before its later generic-proxy
// accesses (so a following release publishes them).
__device__ __forceinline__ void BulkWaitAll() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  asm volatile("fence.proxy.async.global;" ::: "memory");
}
#endif  // SYNCOPATE_WGMMA_OK

// wgmma shared-memory matrix descriptor for a K-major tile in the 128-byte swizzle: rows of 128
// bytes, 8-row (1024-byte) swizzle atoms stacked at a stride of 1024 bytes (SBO); LBO is unused
// for this layout (1 by convention); layout type 1 = SWIZZLE_128B (bits 62-63).
__device__ __forceinline__ unsigned long long Descriptor(unsigned smem_addr) {
  return static_cast<unsigned long long>((smem_addr & 0x3FFFF) >> 4) |
         (1ull << 16) | (static_cast<unsigned long long>(1024 >> 4) << 32) | (1ull << 62);
}

#if SYNCOPATE_WGMMA_OK
__device__ __forceinline__ void WgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void WgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// The wgmma wrappers below are mechanical (one per N x dtype; 128 or 64 accumulator registers).
// D[64 x 256] (+)= A[64 x 16] * B[256 x 16]^T, both K-major in 128B-swizzled shared memory.
__device__ __forceinline__ void Wgmma256Bf16(float (&d)[128], unsigned long long desc_a,
                                            unsigned long long desc_b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d)
      : "memory");
}
// D[64 x 256] (+)= A[64 x 16] * B[256 x 16]^T, both K-major in 128B-swizzled shared memory.
__device__ __forceinline__ void Wgmma256F16(float (&d)[128], unsigned long long desc_a,
                                            unsigned long long desc_b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d)
      : "memory");
}
// D[64 x 128] (+)= A[64 x 16] * B[128 x 16]^T, both K-major in 128B-swizzled shared memory.
__device__ __forceinline__ void Wgmma128Bf16(float (&d)[64], unsigned long long desc_a,
                                            unsigned long long desc_b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d)
      : "memory");
}
// D[64 x 128] (+)= A[64 x 16] * B[128 x 16]^T, both K-major in 128B-swizzled shared memory.
__device__ __forceinline__ void Wgmma128F16(float (&d)[64], unsigned long long desc_a,
                                            unsigned long long desc_b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d)
      : "memory");
}
#endif  // SYNCOPATE_WGMMA_OK

template <class T, int BN>
struct Wgmma;

#if SYNCOPATE_WGMMA_OK
template <>
struct Wgmma<__nv_bfloat16, 256> {
  static __device__ __forceinline__ void Run(float (&d)[128], unsigned long long a,
                                             unsigned long long b) {
    Wgmma256Bf16(d, a, b, 1);
  }
};
template <>
struct Wgmma<__half, 256> {
  static __device__ __forceinline__ void Run(float (&d)[128], unsigned long long a,
                                             unsigned long long b) {
    Wgmma256F16(d, a, b, 1);
  }
};
template <>
struct Wgmma<__nv_bfloat16, 128> {
  static __device__ __forceinline__ void Run(float (&d)[64], unsigned long long a,
                                             unsigned long long b) {
    Wgmma128Bf16(d, a, b, 1);
  }
};
template <>
struct Wgmma<__half, 128> {
  static __device__ __forceinline__ void Run(float (&d)[64], unsigned long long a,
                                             unsigned long long b) {
    Wgmma128F16(d, a, b, 1);
  }
};
#endif

template <class T>
struct Out;
template <>
struct Out<__nv_bfloat16> {
  static __device__ __forceinline__ __nv_bfloat162 Pack(float x, float y) {
    return __floats2bfloat162_rn(x, y);
  }
  static __device__ __forceinline__ __nv_bfloat16 One(float x) { return __float2bfloat16_rn(x); }
};
template <>
struct Out<__half> {
  static __device__ __forceinline__ __half2 Pack(float x, float y) { return __floats2half2_rn(x, y); }
  static __device__ __forceinline__ __half One(float x) { return __float2half_rn(x); }
};

// Producer, one stage: rows [row0, row0 + ROWS) x k [k0, k0 + 64) of a [rows, K] K-contiguous
// matrix into the swizzled stage at `stage` (shared address, 1024-aligned): row r's 16-byte
// chunk c lands at r * 128 + ((c ^ (r % 8)) * 16), the 128-byte swizzle's address pattern.
template <int ROWS, class T>
__device__ __forceinline__ void LoadStage(unsigned stage, const T* g, int row0, int rows, int k0,
                                          int K, int ptid) {
  constexpr int kChunks = ROWS * 8;
  static_assert(kChunks % kProducerThreads == 0, "rows must be a multiple of 16");
#pragma unroll
  for (int j = 0; j < kChunks / kProducerThreads; ++j) {
    const int c = ptid + j * kProducerThreads;
    const int r = c >> 3;
    const int ch = c & 7;
    const int gr = row0 + r;
    const int gk = k0 + ch * 8;
    const bool in = gr < rows && gk < K;  // K % 8 == 0: a chunk is all in or all out
    CpAsync16(stage + r * kRowBytes + ((ch ^ (r & 7)) << 4),
              in ? g + static_cast<long long>(gr) * K + gk : g, in ? 16 : 0);
  }
}

// The same with ordinary loads and stores (any K, any alignment); the caller fences.
template <int ROWS, class T>
__device__ __forceinline__ void LoadStageScalar(unsigned char* stage, const T* g, int row0,
                                                int rows, int k0, int K, int ptid) {
  const unsigned short* src = reinterpret_cast<const unsigned short*>(g);
  for (int c = ptid; c < ROWS * 8; c += kProducerThreads) {
    const int r = c >> 3;
    const int ch = c & 7;
    const int gr = row0 + r;
    unsigned short* d =
        reinterpret_cast<unsigned short*>(stage + r * kRowBytes + ((ch ^ (r & 7)) << 4));
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int gk = k0 + ch * 8 + e;
      d[e] = (gr < rows && gk < K) ? src[static_cast<long long>(gr) * K + gk] : 0;
    }
  }
}

// Epilogue, register path: a consumer thread's accumulators straight to global memory.
// acc[4j + {0,1}] is row `row`, columns col0 + 8j + {0,1}; acc[4j + {2,3}] row `row` + 8.
template <class T, int BN>
__device__ __forceinline__ void StoreTileFromRegisters(T* C, const float (&acc)[BN / 2], int row,
                                                       int col0, int M, int N, bool pair_store) {
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int col = col0 + j * 8;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row + h * 8;
      if (r >= M) continue;
      T* out = C + static_cast<long long>(r) * N + col;
      const float x = acc[4 * j + 2 * h];
      const float y = acc[4 * j + 2 * h + 1];
      if (pair_store && col + 1 < N) {
        *reinterpret_cast<decltype(Out<T>::Pack(0.f, 0.f))*>(out) = Out<T>::Pack(x, y);
      } else {
        if (col < N) out[0] = Out<T>::One(x);
        if (col + 1 < N) out[1] = Out<T>::One(y);
      }
    }
  }
}

// Epilogue, staged path: a consumer thread's accumulators into its warpgroup's 64-row half of
// the staging tile, as BN / 64 boxes of 64 x 64 in the 128-byte swizzle that TMA stores read
// (16-byte chunk c of row r at r * 128 + (c ^ r % 8) * 16): the 8 rows a warp writes per store
// land in 8 different bank groups, so the stores are conflict-free.
template <class T, int BN>
__device__ __forceinline__ void StageTile(unsigned char* half, const float (&acc)[BN / 2],
                                          int warp, int lane) {
  using Pair = decltype(Out<T>::Pack(0.f, 0.f));
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warp * 16 + lane / 4 + h * 8;
      unsigned char* p = half + (j >> 3) * 64 * kRowBytes + r * kRowBytes +
                         (((j & 7) ^ (r & 7)) << 4) + (lane & 3) * 4;
      *reinterpret_cast<Pair*>(p) = Out<T>::Pack(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
    }
  }
}

// A producer that stops (no tile left, or the launch aborted) completes the stage the consumers
// wait on next, k-block `it`, once they have released it; they see `stop_at` there and return.
template <int kStages>
__device__ __forceinline__ void WakeConsumersAt(int it, unsigned long long* full,
                                                unsigned long long* empty) {
  const int st = it % kStages;
  MbarWait(&empty[st], ((it / kStages) & 1) ^ 1);
  MbarArrive(&full[st]);
}

// The 16 bytes at byte offset `off` of C (row pitch `c_pitch` bytes) from tile t's staging
// copy (two 64-row halves of BN / 64 boxes in the 128-byte swizzle, StageTile's layout). The
// offset must fall inside the tile: the lowering's parts are boxes of the tile's footprint.
template <int BM, int BN>
__device__ __forceinline__ uint4 StagedTileUnit(const unsigned char* c_staging,
                                                const syncopate::Tile& t, long long c_pitch,
                                                long long off) {
  const long long row = off / c_pitch;
  const int r = static_cast<int>(row) - t.m * BM;
  const int cb = static_cast<int>(off - row * c_pitch) - t.n * BN * 2;
  if (r < 0 || r >= BM || cb < 0 || cb >= BN * 2 || (cb & 15) != 0) __trap();  // not the tile's
  const int rr = r & 63;
  const unsigned char* p = c_staging + (r >> 6) * 64 * BN * 2 + (cb >> 7) * 64 * kRowBytes +
                           rr * kRowBytes + ((((cb >> 4) & 7) ^ (rr & 7)) << 4);
  return *reinterpret_cast<const uint4*>(p);
}

// The tile-part movers (Schedule::tile_parts_from_staging): producer warps 1-3, idle otherwise,
// take each tile from the consumers' staging tile (staged_full[ci]: warpgroup ci's half is
// staged, its tile in staged_tile[ci]; -1 ends), move its parts, and give the halves back
// (staged_empty). The consumer warps go on with their next tile meanwhile. An abort leaves the
// parts unmoved but keeps the handshake going, so no consumer waits on a mover that left.
template <int BM, int BN, class Schedule>
__device__ void MoveStagedTileParts(Schedule& s, const unsigned char* c_staging, int N,
                                    unsigned long long* staged_full,
                                    unsigned long long* staged_empty,
                                    volatile const int* staged_tile) {
  const syncopate::ThreadGroup movers{static_cast<int>(threadIdx.x) - 32, kPartMoverThreads,
                                      kPartMoverBarrier};
  const long long c_pitch = static_cast<long long>(N) * 2;
  bool aborted = false;
  for (unsigned j = 0;; ++j) {
    MbarWait(&staged_full[0], j & 1u);
    MbarWait(&staged_full[1], j & 1u);
    const int i = staged_tile[0];  // both halves are of one tile
    if (i < 0) return;
    const syncopate::Tile t = s.tile(i);
    if (!aborted) {
      aborted = !s.move_tile_parts(t, movers, [&](long long off) {
        return StagedTileUnit<BM, BN>(c_staging, t, c_pitch, off);
      });
    }
    movers.sync();  // every mover's reads of the staging tile are done
    if (movers.tid == 0) {
      MbarArrive(&staged_empty[0]);
      MbarArrive(&staged_empty[1]);
    }
  }
}

}  // namespace wgmma_detail

// Producer load paths: TMA (one thread issues two bulk tensor copies per stage) or cp.async (the
// producer warpgroup's 128 threads copy 16 bytes at a time; kept for comparison and for GPUs or
// drivers where the device-encoded descriptors misbehave). Operands that are not 16-byte aligned
// with K % 8 == 0 take the element-wise path whatever kLoads says.
constexpr int kLoadTma = 0;
constexpr int kLoadCpAsync = 1;

template <class Schedule, class T, int BM = 128, int BN = 256, int kStages = 3,
          int kLoads = kLoadTma>
__device__ void gemm_wgmma(Schedule& s, const T* __restrict__ A, const T* __restrict__ B,
                           T* __restrict__ C, int M, int N, int K) {
  using namespace wgmma_detail;
  static_assert(BM == 128, "two consumer warpgroups of 64 rows each");
  static_assert(BN == 128 || BN == 256, "wgmma wrappers exist for N = 128 and 256");
  static_assert(kStages >= 2, "at least double buffering");
  static_assert(kLoads == kLoadTma || kLoads == kLoadCpAsync, "kLoads: kLoadTma or kLoadCpAsync");
#if !SYNCOPATE_WGMMA_OK
  __trap();  // compiled for a target without wgmma: the runtime never launches this
#else
  constexpr int kStageA = BM * kRowBytes;
  constexpr int kStageB = BN * kRowBytes;
  extern __shared__ __align__(1024) unsigned char syncopate_wgmma_smem[];
  // Swizzle atoms need 1024-byte alignment; the dynamic size carries 1024 bytes of slack.
  const unsigned raw = SmemAddr(syncopate_wgmma_smem);
  unsigned char* base = syncopate_wgmma_smem + (((raw + 1023u) & ~1023u) - raw);
  unsigned char* a_stages = base;
  unsigned char* b_stages = base + kStages * kStageA;
  // After the stages, 1024 bytes: mbarriers, the abort word and the tensor-map slot, then at +512
  // three 128-byte tensor-map scratch areas; then (when it fits) the epilogue's staging tile.
  unsigned char* tail = b_stages + kStages * kStageB;
  unsigned long long* full = reinterpret_cast<unsigned long long*>(tail);
  unsigned long long* empty = full + kStages;
  // `stop_at` = it + 1: the consumers return when they would start k-block `it` (no tile left,
  // or the producer gave up on a tile's chunks).
  volatile int* stop_at = reinterpret_cast<volatile int*>(empty + kStages);
  unsigned* map_slot = reinterpret_cast<unsigned*>(empty + kStages) + 1;
  // Tiles are claimed (s.claim) by the producer; a tile's index travels to the consumers in the
  // slot of the stage that holds its first k-block, written before that stage's arrival.
  volatile int* stage_tile = reinterpret_cast<volatile int*>(map_slot + 1);  // [kStages]
  volatile int* claimed = stage_tile + kStages;  // producer warpgroup broadcast (cp.async path)
  // At +256: the staging tile's handshake with the tile-part movers (MoveStagedTileParts).
  unsigned long long* staged_full = reinterpret_cast<unsigned long long*>(tail + 256);  // [2]
  unsigned long long* staged_empty = staged_full + 2;                                   // [2]
  volatile int* staged_tile = reinterpret_cast<volatile int*>(staged_empty + 2);        // [2]
  unsigned char* map_scratch = tail + 512;
  unsigned char* c_staging = tail + 1024;  // BM x BN of T: 64-row halves, 64 x 64 boxes
  static_assert(2 * kStages * 8 + 8 + 4 * kStages + 4 <= 256,
                "mbarriers and tile slots overlap the movers' handshake");
  constexpr bool kStagedEpilogue = StagedEpilogueFits<BM, BN, kStages>();

  const bool aligned = K % 8 == 0 && ((reinterpret_cast<unsigned long long>(A) |
                                       reinterpret_cast<unsigned long long>(B)) & 15ull) == 0ull;
  const bool tma = aligned && kLoads == kLoadTma;
  const bool cp_async = aligned && kLoads == kLoadCpAsync;
  // The epilogue's TMA store: needs the TMA descriptors (TMA loads), the staging tile, and C
  // 16-byte aligned with 16-byte rows; otherwise the consumers store from registers.
  const bool tma_store = kStagedEpilogue && tma && N % 8 == 0 &&
                         (reinterpret_cast<unsigned long long>(C) & 15ull) == 0ull;
  const int ktiles = (K + kBK - 1) / kBK;
  // Tile parts (GEMM+ReduceScatter with push_tiles) moved from the staging tile by producer
  // warps 1-3 instead of the consumers (Schedule::tile_parts_from_staging says why).
  const bool part_movers = tma_store && ktiles > 0 && s.tile_parts_from_staging();

  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      // TMA: one arrival (with the stage's byte count); otherwise every producer thread arrives.
      MbarInit(&full[i], tma ? 1 : kProducerThreads);
      MbarInit(&empty[i], kConsumerThreads / 32);  // lane 0 of each consumer warp
    }
    for (int i = 0; i < 2; ++i) {
      MbarInit(&staged_full[i], 1);   // the half's issuing consumer thread
      MbarInit(&staged_empty[i], 1);  // mover thread 0
    }
    *stop_at = 0;
    *map_slot = tma ? atomicAdd(&g_tensor_map_ticket, 1u) % kTensorMapSlots : 0u;
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  // Broadcast from lane 0 so the compiler sees the role as warp-uniform; otherwise ptxas treats
  // the consumer branch as divergent and serialises the wgmmas (warning C7518).
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
  unsigned char* map_a = g_tensor_maps + *map_slot * kMapsPerSlot * kTensorMapBytes;
  unsigned char* map_b = map_a + kTensorMapBytes;
  unsigned char* map_c = map_b + kTensorMapBytes;

  if (wg == 0 && tma) {
    // ---------------- producer, TMA: warp 0 encodes, thread 0 issues ----------------
    if (threadIdx.x >= 32) {
      if (part_movers) {
        MoveStagedTileParts<BM, BN>(s, c_staging, N, staged_full, staged_empty, staged_tile);
      }
      return;
    }
    const int lane = threadIdx.x;
    EncodeTensorMap(map_scratch, map_a, A, M, K, BM, lane);
    EncodeTensorMap(map_scratch + kTensorMapBytes, map_b, B, N, K, BN, lane);
    // C's map: the consumers' issuing threads acquire it; this warp's release reaches them
    // through lane 0's first arrival on a "full" barrier, which they wait on before any store.
    if (tma_store) EncodeTensorMap(map_scratch + 2 * kTensorMapBytes, map_c, C, M, N, 64, lane);
    if (lane != 0 || ktiles == 0) return;  // K = 0: the consumers alone (below)
    AcquireTensorMap(map_a);
    AcquireTensorMap(map_b);
    int it = 0;  // k-blocks issued by this CTA, across tiles: stage it % kStages
    for (int i = s.claim(); i >= 0; i = s.claim()) {
      const syncopate::Tile t = s.tile(i);
      // wait_by_thread also orders the acquired chunks before these TMA reads (fence.proxy.async).
      if (!s.wait_by_thread(t)) break;
      const int m0 = t.m * BM;
      const int n0 = t.n * BN;
      for (int kb = 0; kb < ktiles; ++kb, ++it) {
        const int st = it % kStages;
        MbarWait(&empty[st], ((it / kStages) & 1) ^ 1);
        if (kb == 0) stage_tile[st] = i;  // released by the arrival below
        // Out-of-range rows and k are zero-filled and still count their bytes.
        MbarArriveExpectTx(&full[st], kStageA + kStageB);
        TmaLoad2d(SmemAddr(a_stages + st * kStageA), map_a, kb * kBK, m0, &full[st]);
        TmaLoad2d(SmemAddr(b_stages + st * kStageB), map_b, kb * kBK, n0, &full[st]);
      }
    }
    // No tile left, or the chunks of one never came: `stop_at` names the k-block at which the
    // producer stopped (it + 1), so a consumer stops only there, never at an earlier tile whose
    // stage it is still reading. Wake the consumers at the stage they will wait on next.
    *stop_at = it + 1;
    WakeConsumersAt<kStages>(it, full, empty);
    return;
  }

  if (wg == 0) {
    // ---------------- producer, cp.async or element-wise: the whole warpgroup ----------------
    const int ptid = threadIdx.x;
    if (ktiles == 0) return;  // K = 0: the consumers alone (below)
    int it = 0;  // k-blocks issued by this CTA, across tiles: stage it % kStages
    while (true) {
      if (ptid == 0) {
        const int c = s.claim();
        *claimed = c;
        // `stop_at` names the k-block at which the producer stopped (it + 1), as above.
        if (c < 0 || !s.wait_by_thread(s.tile(c))) *stop_at = it + 1;
      }
      syncopate::GroupBarrier(kProducerBarrier, kProducerThreads);  // claimed, chunks acquired
      const int i = *claimed;
      const bool stop = *stop_at != 0;
      syncopate::GroupBarrier(kProducerBarrier, kProducerThreads);  // read before rewritten
      if (stop) {
        WakeConsumersAt<kStages>(it, full, empty);
        break;
      }
      const syncopate::Tile t = s.tile(i);
      const int m0 = t.m * BM;
      const int n0 = t.n * BN;
      for (int kb = 0; kb < ktiles; ++kb, ++it) {
        const int st = it % kStages;
        MbarWait(&empty[st], ((it / kStages) & 1) ^ 1);
        unsigned char* sa = a_stages + st * kStageA;
        unsigned char* sb = b_stages + st * kStageB;
        if (kb == 0 && ptid == 0) stage_tile[st] = i;  // released by ptid 0's arrival below
        if (cp_async) {
          LoadStage<BM>(SmemAddr(sa), A, m0, M, kb * kBK, K, ptid);
          LoadStage<BN>(SmemAddr(sb), B, n0, N, kb * kBK, K, ptid);
          CpAsyncArrive(&full[st]);
        } else {
          LoadStageScalar<BM>(sa, A, m0, M, kb * kBK, K, ptid);
          LoadStageScalar<BN>(sb, B, n0, N, kb * kBK, K, ptid);
        }
        // cp.async and st.shared write through the generic proxy; wgmma reads through the async
        // proxy. For cp.async the fence must follow completion, so the consumers fence (below);
        // the element-wise stores are complete here.
        if (!cp_async) {
          FenceProxyAsync();
          MbarArrive(&full[st]);
        }
      }
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    return;
  }

  // ---------------- consumer warpgroups ----------------
  const int ci = wg - 1;                 // rows [ci * 64, ci * 64 + 64) of the tile
  const int ctid = threadIdx.x - kProducerThreads;
  const syncopate::ThreadGroup group{ctid, kConsumerThreads, kConsumerBarrier};
  const int lane = threadIdx.x % 32;
  const int warp = (threadIdx.x / 32) % 4;  // warp within the warpgroup: 16 rows each
  const bool pair_store = N % 2 == 0 && (reinterpret_cast<unsigned long long>(C) & 3ull) == 0ull;
  const unsigned a_base = SmemAddr(a_stages) + ci * 64 * kRowBytes;
  const unsigned b_base = SmemAddr(b_stages);
  bool map_c_acquired = false;
  if (part_movers) s.leave_tile_parts();  // done_by_group skips the movers' parts
  unsigned staged = 0;                    // tiles staged by this CTA (the movers' handshake)
  if (ktiles == 0) {
    // K = 0: C is zero and no k-block can carry tile indices from the producer: deal statically
    // (claim() is never called, so the tile counter stays untouched).
    for (int i = s.first(); i < s.num_tiles(); i += s.stride()) {
      const syncopate::Tile t = s.tile(i);
      float acc[BN / 2];
#pragma unroll
      for (int j = 0; j < BN / 2; ++j) acc[j] = 0.f;
      StoreTileFromRegisters<T, BN>(C, acc, t.m * BM + ci * 64 + warp * 16 + lane / 4,
                                    t.n * BN + (lane % 4) * 2, M, N, pair_store);
      s.done_by_group(t, group);
    }
    return;  // no join_transfers: this deal is static (impl/pieces.cuh says why that matters)
  }
  int it = 0;
  // Tiles come from the producer (the slot of each tile's first stage) until it stops.
  while (true) {
    // The next tile's first stage says whether there is one: no tile left, or the producer gave
    // up on this tile's chunks (read once per warp: a uniform branch). The loop is left with a
    // break, not a return from inside it: an exit inside the loop made ptxas treat the wgmmas as
    // divergent and serialise them (warning C7518). Waiting on that stage again below returns at
    // once (its phase cannot advance before this warpgroup releases it).
    MbarWait(&full[it % kStages], (it / kStages) & 1);
    if (__shfl_sync(0xffffffffu, *stop_at, 0) == it + 1) break;
    const int ti = stage_tile[it % kStages];  // before the stage is released
    const syncopate::Tile t = s.tile(ti);
    float acc[BN / 2];
#pragma unroll
    for (int j = 0; j < BN / 2; ++j) acc[j] = 0.f;
    int prev = -1;
    for (int kb = 0; kb < ktiles; ++kb, ++it) {
      const int st = it % kStages;
      MbarWait(&full[st], (it / kStages) & 1);
      if (cp_async) FenceProxyAsync();  // TMA writes through the async proxy already
      WgmmaFence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        Wgmma<T, BN>::Run(acc, Descriptor(a_base + st * kStageA + kk * 32),
                          Descriptor(b_base + st * kStageB + kk * 32));
      }
      WgmmaCommit();
      WgmmaWait<1>();  // the previous k-block's wgmmas are done reading their stage
      if (prev >= 0 && lane == 0) MbarArrive(&empty[prev]);
      prev = st;
    }
    WgmmaWait<0>();
    if (prev >= 0 && lane == 0) MbarArrive(&empty[prev]);

    if (tma_store) {
      unsigned char* half = c_staging + ci * 64 * BN * 2;  // this warpgroup's 64 rows
      const bool issuer = (ctid & 127) == 0;
      const int barrier = kEpilogueBarrier0 + ci;
      if (issuer) BulkWaitRead();  // the previous tile's store has read the staging half
      // ... and the movers have read it.
      if (issuer && part_movers && staged > 0) MbarWait(&staged_empty[ci], (staged - 1) & 1u);
      syncopate::GroupBarrier(barrier, 128);
      StageTile<T, BN>(half, acc, warp, lane);
      FenceProxyAsync();  // these generic-proxy writes, before the TMA store reads them
      syncopate::GroupBarrier(barrier, 128);
      if (issuer) {
        if (!map_c_acquired) AcquireTensorMap(map_c);
        map_c_acquired = true;
#pragma unroll
        for (int b = 0; b < BN / 64; ++b) {
          TmaStore2d(map_c, t.n * BN + b * 64, t.m * BM + ci * 64,
                     SmemAddr(half + b * 64 * kRowBytes));
        }
        BulkCommit();
        // done_by_group publishes what it stored (the movers' parts come from the staging tile).
        if (s.publishes_from_memory(t)) BulkWaitAll();
        if (part_movers) {
          staged_tile[ci] = ti;
          MbarArrive(&staged_full[ci]);  // releases the half's staging (the barrier above)
        }
      }
      ++staged;
    } else {
      StoreTileFromRegisters<T, BN>(C, acc, t.m * BM + ci * 64 + warp * 16 + lane / 4,
                                    t.n * BN + (lane % 4) * 2, M, N, pair_store);
    }
    s.done_by_group(t, group);
  }
  if (tma_store && (ctid & 127) == 0) BulkWaitAll();  // no store outlives the CTA
  if (part_movers && (ctid & 127) == 0) {             // no tile left: the movers leave
    if (staged > 0) MbarWait(&staged_empty[ci], (staged - 1) & 1u);
    staged_tile[ci] = -1;
    MbarArrive(&staged_full[ci]);
  }
  // No tile left: the consumers help move the chunks still waiting to leave (GEMM+RS, +AR).
  s.join_transfers(group);
#endif  // SYNCOPATE_WGMMA_OK
}

}  // namespace syncopate_examples
