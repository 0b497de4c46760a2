// A tiny local kernel and its kernel spec for compile tests: valid against allgather plans of a
// [64, 32] bf16 "data" buffer (X, consumed) with a local output Y; NVRTC compiles the fused kernel
// in about a second. examples/python/run_example_test.sh carries the same kernel.
#pragma once

namespace syncopate::testing {

inline constexpr char kTestKernelSource[] = R"(#include <cuda_bf16.h>
#include <syncopate/device.cuh>

namespace test_kernels {
// Y = 2 X, one tile = 16 rows.
template <class Schedule>
__device__ void scale_rows(Schedule& s, const __nv_bfloat16* X, __nv_bfloat16* Y, int cols) {
  for (int i = s.first(); i < s.num_tiles(); i += s.stride()) {
    const syncopate::Tile t = s.tile(i);
    if (!s.wait(t)) return;
    for (int c = threadIdx.x; c < 16 * cols; c += blockDim.x) {
      const long long at = static_cast<long long>(t.m) * 16 * cols + c;
      Y[at] = __float2bfloat16_rn(2.f * __bfloat162float(X[at]));
    }
    s.done(t);
  }
}
}  // namespace test_kernels
)";

inline constexpr char kBrokenKernelSource[] = R"(#include <syncopate/device.cuh>
namespace test_kernels {
template <class Schedule>
__device__ void scale_rows(Schedule& s, const __nv_bfloat16* X, __nv_bfloat16* Y, int cols) {
  undefined_name = 1;
}
}  // namespace test_kernels
)";

inline constexpr char kTestKernelSpec[] = R"(name = scale
entry = test_kernels::scale_rows
problem_m = 64
problem_n = 1
tile_m = 16
tile_n = 1
block_threads = 128
operand = X bf16 consumed data 64x32 16*m:16 *
operand = Y bf16 local - 64x32 16*m:16 *
scalar = cols i32 32
)";

}  // namespace syncopate::testing
