// Copy descriptors reproduce the plan's element-order mapping exactly (checked element by element
// against Region::Offsets) and fold regular patterns into few 2D segments.
#include "jit/compiler/copy_descriptors.h"

#include <random>

#include "gtest/gtest.h"

namespace syncopate::jit {
namespace {

using plan::Box;
using plan::Region;

// Expands segments into (src element offset, dst element offset) pairs, in order.
std::vector<std::pair<int64_t, int64_t>> Expand(const std::vector<CopySegment>& segs,
                                                int64_t esize) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const CopySegment& s : segs) {
    EXPECT_GE(s.src_pitch_bytes, s.row_bytes);
    EXPECT_GE(s.dst_pitch_bytes, s.row_bytes);
    EXPECT_EQ(s.row_bytes % esize, 0);
    for (int64_t r = 0; r < s.rows; ++r) {
      for (int64_t b = 0; b < s.row_bytes; b += esize) {
        out.push_back({(s.src_offset_bytes + r * s.src_pitch_bytes + b) / esize,
                       (s.dst_offset_bytes + r * s.dst_pitch_bytes + b) / esize});
      }
    }
  }
  return out;
}

void ExpectMatchesOffsets(const plan::BufferSpec& src, const Region& sr, const plan::BufferSpec& dst,
                          const Region& dr, const std::vector<CopySegment>& segs) {
  const std::vector<int64_t> so = sr.Offsets(src.strides);
  const std::vector<int64_t> dof = dr.Offsets(dst.strides);
  const auto pairs = Expand(segs, plan::DTypeSize(src.dtype));
  ASSERT_EQ(pairs.size(), so.size());
  for (size_t i = 0; i < so.size(); ++i) {
    ASSERT_EQ(pairs[i].first, so[i]) << "element " << i;
    ASSERT_EQ(pairs[i].second, dof[i]) << "element " << i;
  }
}

// The regular cases: the whole copy folds into the one segment `want`.
void ExpectOneSegment(const plan::BufferSpec& src, const Region& sr, const plan::BufferSpec& dst,
                      const Region& dr, const CopySegment& want) {
  auto segs = BuildCopyDescriptors(src, sr, dst, dr);
  ASSERT_TRUE(segs.ok()) << segs.status();
  ASSERT_EQ(segs->size(), 1u);
  EXPECT_EQ((*segs)[0], want);
}

TEST(CopyDescriptorsTest, FullRowSlabIsOneSegment) {
  const auto buf = plan::MakeBuffer("data", plan::DType::kBF16, {64, 32});
  const Region r = Region::Slab(buf.shape, 0, 16, 32);
  const int64_t slab_bytes = int64_t{16} * 32 * 2;  // rows [16, 32) of 32 bf16 columns
  ExpectOneSegment(buf, r, buf, r, CopySegment{slab_bytes, slab_bytes, slab_bytes, 1, 1024, 1024});
}

TEST(CopyDescriptorsTest, ColumnSlabIsOne2DSegment) {
  const auto buf = plan::MakeBuffer("data", plan::DType::kF32, {8, 100});
  const Region r = Region::Slab(buf.shape, 1, 25, 50);
  ExpectOneSegment(buf, r, buf, r, CopySegment{100, 100, 100, 8, 400, 400});
}

TEST(CopyDescriptorsTest, ShardIntoSmallerOutputBuffer) {
  // ReduceScatter style: rows [10, 20) of a [40, 6] input land at rows [0, 10) of a [10, 6] output.
  const auto in = plan::MakeBuffer("input", plan::DType::kF16, {40, 6});
  const auto out = plan::MakeBuffer("output", plan::DType::kF16, {10, 6});
  ExpectOneSegment(in, Region::Slab(in.shape, 0, 10, 20), out, Region::Whole(out.shape),
                   CopySegment{int64_t{10} * 6 * 2, 0, 120, 1, 120, 120});
}

TEST(CopyDescriptorsTest, MismatchedShapesFollowElementOrder) {
  // A [4, 6] box copied into a [6, 4] box: runs split at both sides' row ends.
  const auto a = plan::MakeBuffer("a", plan::DType::kI32, {8, 8});
  const auto b = plan::MakeBuffer("b", plan::DType::kI32, {8, 8});
  const Region sr({Box{{0, 0}, {4, 6}}});
  const Region dr({Box{{1, 2}, {7, 6}}});
  auto segs = BuildCopyDescriptors(a, sr, b, dr);
  ASSERT_TRUE(segs.ok()) << segs.status();
  ExpectMatchesOffsets(a, sr, b, dr, *segs);
}

TEST(CopyDescriptorsTest, RandomRegionsMatchOffsets) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    const plan::Shape shape = {1 + static_cast<int64_t>(rng() % 9), 1 + static_cast<int64_t>(rng() % 9),
                               1 + static_cast<int64_t>(rng() % 5)};
    const auto buf = plan::MakeBuffer("x", plan::DType::kBF16, shape);
    auto random_region = [&](int boxes) {
      std::vector<Box> bs;
      for (int i = 0; i < boxes; ++i) {
        Box b;
        for (int64_t d : shape) {
          const int64_t lo = rng() % d;
          b.lo.push_back(lo);
          b.hi.push_back(lo + 1 + rng() % (d - lo));
        }
        bs.push_back(b);
      }
      return Region(bs);
    };
    const Region sr = random_region(1 + rng() % 3);
    // The destination: a flat run of the same element count somewhere in a 1-D buffer.
    const auto flat = plan::MakeBuffer("y", plan::DType::kBF16, {sr.NumElements() + 17});
    const int64_t at = rng() % 17;
    const Region dr({Box{{at}, {at + sr.NumElements()}}});
    auto segs = BuildCopyDescriptors(buf, sr, flat, dr);
    ASSERT_TRUE(segs.ok()) << segs.status();
    ExpectMatchesOffsets(buf, sr, flat, dr, *segs);
    auto back = BuildCopyDescriptors(flat, dr, buf, sr);
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectMatchesOffsets(flat, dr, buf, sr, *back);
  }
}

TEST(CopyDescriptorsTest, ErrorsNameTheBuffers) {
  const auto a = plan::MakeBuffer("a", plan::DType::kF32, {4, 4});
  const auto b = plan::MakeBuffer("b", plan::DType::kF16, {4, 4});
  auto e1 = BuildCopyDescriptors(a, Region::Whole(a.shape), b, Region::Whole(b.shape));
  EXPECT_EQ(e1.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(e1.status().message().find("element sizes differ"), std::string::npos);
  auto e2 = BuildCopyDescriptors(a, Region::Slab(a.shape, 0, 0, 2), a, Region::Whole(a.shape));
  EXPECT_NE(e2.status().message().find("element counts differ"), std::string::npos);
  auto e3 = BuildCopyDescriptors(a, Region({Box{{0, 0}, {5, 4}}}), a, Region({Box{{0, 0}, {5, 4}}}));
  EXPECT_NE(e3.status().message().find("outside buffer \"a\""), std::string::npos);
}

}  // namespace
}  // namespace syncopate::jit
