// Unit tests: plan regions as byte ranges and segment pairing; host reductions.
#include "runtime/ucx/segments.h"

#include "core/base/half_float.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/ucx/host_reduce.h"

namespace syncopate::ucx {
namespace {

using plan::Box;
using plan::DType;
using plan::Region;

TEST(RegionBytesTest, WholeRowsMergeIntoOneRange) {
  plan::BufferSpec b = plan::MakeBuffer("x", DType::kF32, {8, 16});
  auto r = RegionBytes(b, Region::Slab(b.shape, 0, 2, 5));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (std::vector<ByteRange>{{2 * 16 * 4, 3 * 16 * 4}}));
}

TEST(RegionBytesTest, ColumnSlabIsOneRangePerRow) {
  plan::BufferSpec b = plan::MakeBuffer("x", DType::kBF16, {3, 10});
  auto r = RegionBytes(b, Region::Slab(b.shape, 1, 4, 6));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (std::vector<ByteRange>{{8, 4}, {28, 4}, {48, 4}}));
}

TEST(RegionBytesTest, BoxesKeepElementOrderAnd3D) {
  plan::BufferSpec b = plan::MakeBuffer("x", DType::kU8, {2, 3, 4});
  Region region({Box{{1, 0, 0}, {2, 3, 4}}, Box{{0, 1, 0}, {1, 2, 4}}});
  auto r = RegionBytes(b, region);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (std::vector<ByteRange>{{12, 12}, {4, 4}}));
}

TEST(RegionBytesTest, OutsideShapeIsAnError) {
  plan::BufferSpec b = plan::MakeBuffer("x", DType::kU8, {4});
  EXPECT_EQ(RegionBytes(b, Region({Box{{2}, {9}}})).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST(PairRangesTest, SplitsAtBothSidesBoundaries) {
  auto s = PairRanges({{0, 10}, {100, 6}}, {{50, 4}, {60, 12}});
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->size(), 3u);
  EXPECT_EQ((*s)[0].local_offset, 0u);
  EXPECT_EQ((*s)[0].remote_offset, 50u);
  EXPECT_EQ((*s)[0].length, 4u);
  EXPECT_EQ((*s)[1].local_offset, 4u);
  EXPECT_EQ((*s)[1].remote_offset, 60u);
  EXPECT_EQ((*s)[1].length, 6u);
  EXPECT_EQ((*s)[2].local_offset, 100u);
  EXPECT_EQ((*s)[2].remote_offset, 66u);
  EXPECT_EQ((*s)[2].length, 6u);
  EXPECT_EQ(PairRanges({{0, 3}}, {{0, 4}}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HostReduceTest, SumAndMaxForEveryFamily) {
  float a[3] = {1, 2, 3}, b[3] = {10, -20, 30};
  ASSERT_TRUE(HostReduce(DType::kF32, plan::ReduceOp::kSum, a, b, sizeof a).ok());
  EXPECT_THAT(a, ::testing::ElementsAre(11, -18, 33));
  int64_t c[2] = {5, 9}, d[2] = {7, 1};
  ASSERT_TRUE(HostReduce(DType::kI64, plan::ReduceOp::kMax, c, d, sizeof c).ok());
  EXPECT_THAT(c, ::testing::ElementsAre(7, 9));
  uint16_t h[2] = {FloatToBf16(1.5f), FloatToHalf(2.0f)};
  uint16_t hb[1] = {FloatToBf16(2.25f)};
  ASSERT_TRUE(HostReduce(DType::kBF16, plan::ReduceOp::kSum, h, hb, 2).ok());
  EXPECT_EQ(Bf16ToFloat(h[0]), 3.75f);
  uint16_t f16[1] = {FloatToHalf(2.0f)}, f16b[1] = {FloatToHalf(0.5f)};
  ASSERT_TRUE(HostReduce(DType::kF16, plan::ReduceOp::kSum, f16, f16b, 2).ok());
  EXPECT_EQ(HalfToFloat(f16[0]), 2.5f);
  EXPECT_EQ(HalfToFloat(FloatToHalf(65504.0f)), 65504.0f);
  EXPECT_EQ(HostReduce(DType::kF32, plan::ReduceOp::kSum, a, b, 6).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace syncopate::ucx
