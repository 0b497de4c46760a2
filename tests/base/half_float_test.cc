// bf16/fp16 <-> float: exact values round-trip, ties round to even as the GPU's conversions do,
// and the edges (subnormals, overflow, NaN) keep their meaning.
#include "core/base/half_float.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace syncopate {
namespace {

TEST(HalfFloat, SmallIntegersRoundTripExactly) {
  for (int i = -256; i <= 256; ++i) {
    const float v = static_cast<float>(i);
    EXPECT_EQ(Bf16ToFloat(FloatToBf16(v)), v) << i;
    EXPECT_EQ(HalfToFloat(FloatToHalf(v)), v) << i;
  }
}

TEST(HalfFloat, TiesRoundToEven) {
  // bf16 keeps 8 significant bits: 257 lies halfway between 256 and 258 and goes to 256 (even),
  // 259 halfway between 258 and 260 goes to 260.
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(257.0f)), 256.0f);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(259.0f)), 260.0f);
  // fp16 keeps 11: 2049 -> 2048, 2051 -> 2052.
  EXPECT_EQ(HalfToFloat(FloatToHalf(2049.0f)), 2048.0f);
  EXPECT_EQ(HalfToFloat(FloatToHalf(2051.0f)), 2052.0f);
}

TEST(HalfFloat, EdgesKeepTheirMeaning) {
  EXPECT_EQ(HalfToFloat(FloatToHalf(65504.0f)), 65504.0f);  // the largest fp16
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(70000.0f))));
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // the smallest fp16 subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_TRUE(std::signbit(HalfToFloat(FloatToHalf(-0.0f))));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(nan))));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(nan))));
  EXPECT_TRUE(std::isinf(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::infinity()))));
}

}  // namespace
}  // namespace syncopate
