// A tiny local kernel and its kernel spec for compile tests (examples/kernels/scale_rows.cuh and
// .spec, embedded in the compiler library): valid against allgather plans of a [64, 32] bf16
// "data" buffer (X, consumed) with a local output Y; NVRTC compiles the fused kernel in about a
// second. A kernel that does not compile beside them.
#pragma once

#include <string>

#include "jit/compiler/embedded_headers.h"

namespace syncopate::testing {

inline const std::string kTestKernelSource(*jit::ExampleKernelSource("scale_rows.cuh"));

inline constexpr char kBrokenKernelSource[] = R"(#include <syncopate/device.cuh>
namespace test_kernels {
template <class Schedule>
__device__ void scale_rows(Schedule& s, const __nv_bfloat16* X, __nv_bfloat16* Y, int cols) {
  undefined_name = 1;
}
}  // namespace test_kernels
)";

inline const std::string kTestKernelSpec(*jit::ExampleKernelSpec("scale_rows.spec"));

}  // namespace syncopate::testing
