// Example local kernel: RMS norm over rows, Y[r, :] = X[r, :] / sqrt(mean(X[r, :]^2) + eps).
// Tiles are ROWS consecutive rows (the tile grid is tiles_m x 1); each warp normalises whole rows
// with fp32 accumulation. T is float, __half or __nv_bfloat16. Any block size that is a multiple
// of 32; no shared memory. Written against syncopate/device.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <syncopate/device.cuh>

namespace syncopate_examples {
namespace rowwise_detail {

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

}  // namespace rowwise_detail

template <class Schedule, class T, int ROWS = 16>
__device__ void rms_norm(Schedule& s, const T* __restrict__ X, T* __restrict__ Y, int rows,
                         int cols, float eps) {
  using namespace rowwise_detail;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  for (int i = s.first(); i < s.num_tiles(); i += s.stride()) {
    const syncopate::Tile t = s.tile(i);
    if (!s.wait(t)) return;
    const int end = (t.m + 1) * ROWS < rows ? (t.m + 1) * ROWS : rows;
    for (int r = t.m * ROWS + warp; r < end; r += warps) {
      const T* x = X + static_cast<long long>(r) * cols;
      T* y = Y + static_cast<long long>(r) * cols;
      float ss = 0.f;
      for (int c = lane; c < cols; c += 32) {
        const float v = ToFloat(x[c]);
        ss += v * v;
      }
#pragma unroll
      for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
      const float inv = rsqrtf(ss / static_cast<float>(cols) + eps);
      for (int c = lane; c < cols; c += 32) y[c] = FromFloat<T>(ToFloat(x[c]) * inv);
    }
    s.done(t);
  }
}

}  // namespace syncopate_examples
