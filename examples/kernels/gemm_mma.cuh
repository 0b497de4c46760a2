// Example local kernel: C[M, N] = A[M, K] * B[N, K]^T (both operands K-contiguous, like a linear
// layer with PyTorch's weight layout), bf16 or fp16 in, fp32 accumulate, T out.
//
// Tensor cores through mma.sync.m16n8k16 (sm_80+), shared-memory tiles of BM x 32 and BN x 32
// loaded with cp.async in a 3-stage pipeline, rows padded by 8 elements so ldmatrix is free of
// bank conflicts. 256 threads = 8 warps as 2 (M) x 4 (N); each warp owns a (BM/2) x (BN/4) block.
// M, N, K need not be multiples of the tile: loads outside the matrices are zero-filled and
// stores predicated. The cp.async fast path needs K % 8 == 0 and 16-byte aligned A and B; other
// shapes take a (slower) scalar load path.
//
// Launch: 256 threads, dynamic shared memory 3 * (BM + BN) * 40 * sizeof(T) bytes (61440 for
// 128 x 128), any grid (persistent: the schedule deals tiles to CTAs).
// Written against syncopate/device.cuh: the same template is the local kernel (LocalSchedule)
// and the fused overlap kernel (FusedSchedule).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <syncopate/device.cuh>

namespace syncopate_examples {
namespace gemm_detail {

__device__ __forceinline__ unsigned SmemAddr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16-byte async copy; bytes beyond `src_bytes` (0 or 16 here) are zero-filled.
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddr(smem)), "l"(gmem),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void LdMatrixX4(unsigned (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(smem)));
}

template <class T>
struct Mma;

template <>
struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ void Run(float (&d)[4], const unsigned (&a)[4],
                                             unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ __nv_bfloat162 Pack(float x, float y) {
    return __floats2bfloat162_rn(x, y);
  }
  static __device__ __forceinline__ __nv_bfloat16 One(float x) { return __float2bfloat16_rn(x); }
};

template <>
struct Mma<__half> {
  static __device__ __forceinline__ void Run(float (&d)[4], const unsigned (&a)[4],
                                             unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ __half2 Pack(float x, float y) { return __floats2half2_rn(x, y); }
  static __device__ __forceinline__ __half One(float x) { return __float2half_rn(x); }
};

constexpr int kBK = 32;
constexpr int kStages = 3;
constexpr int kLd = kBK + 8;  // padded smem row (elements): 80 bytes, conflict-free ldmatrix
constexpr int kThreads = 256;
constexpr int kWarpsM = 2;
constexpr int kWarpsN = 4;

// Loads rows [row0, row0 + ROWS) x k [k0, k0 + 32) of a [rows, K] K-contiguous matrix into a
// padded smem tile, zero-filling outside the matrix.
template <int ROWS, class T>
__device__ __forceinline__ void LoadTile(T* smem, const T* g, int row0, int rows, int k0, int K,
                                         bool vec_ok) {
  constexpr int kChunks = ROWS * (kBK / 8);
  for (int c = threadIdx.x; c < kChunks; c += kThreads) {
    const int r = c / (kBK / 8);
    const int col = (c % (kBK / 8)) * 8;
    const int gr = row0 + r;
    const int gk = k0 + col;
    T* dst = smem + r * kLd + col;
    if (vec_ok) {
      const bool in = gr < rows && gk < K;  // K % 8 == 0: the chunk is all in or all out
      CpAsync16(dst, in ? g + static_cast<long long>(gr) * K + gk : g, in ? 16 : 0);
    } else {
      const unsigned short* src = reinterpret_cast<const unsigned short*>(g);
      unsigned short* d16 = reinterpret_cast<unsigned short*>(dst);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        d16[e] = (gr < rows && gk + e < K) ? src[static_cast<long long>(gr) * K + gk + e] : 0;
      }
    }
  }
}

}  // namespace gemm_detail

template <class Schedule, class T, int BM = 128, int BN = 128>
__device__ void gemm_mma(Schedule& s, const T* __restrict__ A, const T* __restrict__ B,
                         T* __restrict__ C, int M, int N, int K) {
  using namespace gemm_detail;
  constexpr int WM = BM / kWarpsM;
  constexpr int WN = BN / kWarpsN;
  constexpr int kFragM = WM / 16;
  constexpr int kFragN = WN / 8;
  static_assert(WM % 16 == 0 && WN % 16 == 0, "BM must be a multiple of 32, BN of 64");

  extern __shared__ __align__(16) unsigned char syncopate_gemm_smem[];
  T* As = reinterpret_cast<T*>(syncopate_gemm_smem);  // [kStages][BM][kLd]
  T* Bs = As + kStages * BM * kLd;                     // [kStages][BN][kLd]

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warp_m = warp / kWarpsN;
  const int warp_n = warp % kWarpsN;
  const bool vec_ok = K % 8 == 0 &&
                      ((reinterpret_cast<unsigned long long>(A) |
                        reinterpret_cast<unsigned long long>(B)) & 15ull) == 0ull;
  const bool pair_store = N % 2 == 0 && (reinterpret_cast<unsigned long long>(C) & 3ull) == 0ull;
  const int ktiles = (K + kBK - 1) / kBK;

  for (int i = s.first(); i < s.num_tiles(); i += s.stride()) {
    const syncopate::Tile t = s.tile(i);
    if (!s.wait(t)) return;
    const int m0 = t.m * BM;
    const int n0 = t.n * BN;

    float acc[kFragM][kFragN][4];
#pragma unroll
    for (int a = 0; a < kFragM; ++a)
#pragma unroll
      for (int b = 0; b < kFragN; ++b)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.f;

#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) {
      if (st < ktiles) {
        LoadTile<BM>(As + st * BM * kLd, A, m0, M, st * kBK, K, vec_ok);
        LoadTile<BN>(Bs + st * BN * kLd, B, n0, N, st * kBK, K, vec_ok);
      }
      CpAsyncCommit();
    }

    for (int kt = 0; kt < ktiles; ++kt) {
      CpAsyncWait<kStages - 2>();
      __syncthreads();  // stage kt landed for everyone; stage kt-1 is free to refill
      const int next = kt + kStages - 1;
      if (next < ktiles) {
        const int st = next % kStages;
        LoadTile<BM>(As + st * BM * kLd, A, m0, M, next * kBK, K, vec_ok);
        LoadTile<BN>(Bs + st * BN * kLd, B, n0, N, next * kBK, K, vec_ok);
      }
      CpAsyncCommit();

      const T* as = As + (kt % kStages) * BM * kLd;
      const T* bs = Bs + (kt % kStages) * BN * kLd;
#pragma unroll
      for (int kk = 0; kk < kBK; kk += 16) {
        unsigned af[kFragM][4];
        unsigned bf[kFragN][2];
#pragma unroll
        for (int fm = 0; fm < kFragM; ++fm) {
          const int r = warp_m * WM + fm * 16 + (lane % 16);
          LdMatrixX4(af[fm], as + r * kLd + kk + (lane / 16) * 8);
        }
#pragma unroll
        for (int fn = 0; fn < kFragN / 2; ++fn) {
          const int n = warp_n * WN + fn * 16 + (lane / 16) * 8 + (lane % 8);
          unsigned r4[4];
          LdMatrixX4(r4, bs + n * kLd + kk + ((lane / 8) % 2) * 8);
          bf[2 * fn][0] = r4[0];
          bf[2 * fn][1] = r4[1];
          bf[2 * fn + 1][0] = r4[2];
          bf[2 * fn + 1][1] = r4[3];
        }
#pragma unroll
        for (int fm = 0; fm < kFragM; ++fm)
#pragma unroll
          for (int fn = 0; fn < kFragN; ++fn) Mma<T>::Run(acc[fm][fn], af[fm], bf[fn][0], bf[fn][1]);
      }
    }
    CpAsyncWait<0>();
    __syncthreads();  // shared memory is reused by this CTA's next tile

#pragma unroll
    for (int fm = 0; fm < kFragM; ++fm) {
#pragma unroll
      for (int fn = 0; fn < kFragN; ++fn) {
        const int col = n0 + warp_n * WN + fn * 8 + (lane % 4) * 2;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = m0 + warp_m * WM + fm * 16 + lane / 4 + h * 8;
          if (row >= M) continue;
          T* out = C + static_cast<long long>(row) * N + col;
          const float x = acc[fm][fn][2 * h];
          const float y = acc[fm][fn][2 * h + 1];
          if (pair_store && col + 1 < N) {
            *reinterpret_cast<decltype(Mma<T>::Pack(0.f, 0.f))*>(out) = Mma<T>::Pack(x, y);
          } else {
            if (col < N) out[0] = Mma<T>::One(x);
            if (col + 1 < N) out[1] = Mma<T>::One(y);
          }
        }
      }
    }
    s.done(t);
  }
  // No join_transfers(): this kernel deals its tiles statically (first/stride), and only CTAs
  // that claim() their tiles may join (impl/pieces.cuh says why).
}

}  // namespace syncopate_examples
