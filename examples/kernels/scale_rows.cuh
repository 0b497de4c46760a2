// scale_rows.cuh: the smallest kernel worth fusing, Y = 2 X in tiles of 16 rows; with
// scale_rows.spec, valid against allgather plans of a [64, 32] bf16 buffer "data". The Python
// example (examples/python) and the control-plane tests compile it (about a second in NVRTC).
#include <cuda_bf16.h>

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
