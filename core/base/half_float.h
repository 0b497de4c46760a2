// bf16 and fp16 bit patterns <-> float on the host: the one conversion the host reductions
// (runtime/ucx), the GEMM checks (runtime/cuda/workloads) and the ops' tests share. Float to
// half rounds to nearest even, as the GPU's conversions do; NaN stays NaN, overflow to fp16
// becomes infinity.
#pragma once

#include <cstdint>

namespace syncopate {

float Bf16ToFloat(uint16_t bits);
uint16_t FloatToBf16(float value);
float HalfToFloat(uint16_t bits);
uint16_t FloatToHalf(float value);

}  // namespace syncopate
