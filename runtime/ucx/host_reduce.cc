// Host reductions; see host_reduce.h.
#include "runtime/ucx/host_reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/base/half_float.h"

namespace syncopate::ucx {

namespace {

template <typename T>
void ReduceTyped(plan::ReduceOp op, void* dst, const void* src, size_t n) {
  auto* d = static_cast<T*>(dst);
  auto* s = static_cast<const T*>(src);
  for (size_t i = 0; i < n; ++i) {
    T a, b;
    std::memcpy(&a, d + i, sizeof(T));
    std::memcpy(&b, s + i, sizeof(T));
    T r = op == plan::ReduceOp::kSum ? static_cast<T>(a + b) : std::max(a, b);
    std::memcpy(d + i, &r, sizeof(T));
  }
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void Reduce16(plan::ReduceOp op, void* dst, const void* src, size_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  auto* s = static_cast<const uint16_t*>(src);
  for (size_t i = 0; i < n; ++i) {
    float a = ToF(d[i]), b = ToF(s[i]);
    d[i] = FromF(op == plan::ReduceOp::kSum ? a + b : std::max(a, b));
  }
}

}  // namespace

absl::Status HostReduce(plan::DType dtype, plan::ReduceOp op, void* dst, const void* src,
                        size_t bytes) {
  const size_t esize = plan::DTypeSize(dtype);
  if (bytes % esize != 0) {
    return absl::InvalidArgumentError(absl::StrCat("reduce of ", bytes, " bytes of ",
                                                   plan::DTypeName(dtype), " elements"));
  }
  if (op == plan::ReduceOp::kNone) {
    std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }
  const size_t n = bytes / esize;
  switch (dtype) {
    case plan::DType::kF32: ReduceTyped<float>(op, dst, src, n); break;
    case plan::DType::kF64: ReduceTyped<double>(op, dst, src, n); break;
    case plan::DType::kI32: ReduceTyped<int32_t>(op, dst, src, n); break;
    case plan::DType::kI64: ReduceTyped<int64_t>(op, dst, src, n); break;
    case plan::DType::kI8: ReduceTyped<int8_t>(op, dst, src, n); break;
    case plan::DType::kU8: ReduceTyped<uint8_t>(op, dst, src, n); break;
    case plan::DType::kF16: Reduce16<HalfToFloat, FloatToHalf>(op, dst, src, n); break;
    case plan::DType::kBF16: Reduce16<Bf16ToFloat, FloatToBf16>(op, dst, src, n); break;
  }
  return absl::OkStatus();
}

namespace {
template <typename T>
void FillWith(void* dst, size_t n, T v) {
  auto* d = static_cast<char*>(dst);
  for (size_t i = 0; i < n; ++i) std::memcpy(d + i * sizeof(T), &v, sizeof(T));
}
}  // namespace

absl::Status FillIdentity(plan::DType dtype, plan::ReduceOp op, void* dst, size_t bytes) {
  const size_t esize = plan::DTypeSize(dtype);
  if (bytes % esize != 0) {
    return absl::InvalidArgumentError(absl::StrCat("identity fill of ", bytes, " bytes of ",
                                                   plan::DTypeName(dtype), " elements"));
  }
  if (op != plan::ReduceOp::kMax) {
    std::memset(dst, 0, bytes);  // zero bits are 0 in every dtype
    return absl::OkStatus();
  }
  const size_t n = bytes / esize;
  switch (dtype) {
    case plan::DType::kF32: FillWith<float>(dst, n, -std::numeric_limits<float>::infinity()); break;
    case plan::DType::kF64: FillWith<double>(dst, n, -std::numeric_limits<double>::infinity()); break;
    case plan::DType::kI32: FillWith<int32_t>(dst, n, std::numeric_limits<int32_t>::min()); break;
    case plan::DType::kI64: FillWith<int64_t>(dst, n, std::numeric_limits<int64_t>::min()); break;
    case plan::DType::kI8: FillWith<int8_t>(dst, n, std::numeric_limits<int8_t>::min()); break;
    case plan::DType::kU8: FillWith<uint8_t>(dst, n, 0); break;
    case plan::DType::kF16: FillWith<uint16_t>(dst, n, 0xfc00); break;  // -inf
    case plan::DType::kBF16: FillWith<uint16_t>(dst, n, 0xff80); break;  // -inf
  }
  return absl::OkStatus();
}

}  // namespace syncopate::ucx
