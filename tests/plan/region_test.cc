// Region arithmetic: unions, containment, splits, printing and parsing.
#include "core/plan/region.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::plan {
namespace {

using ::testing::HasSubstr;

Region R(std::string_view text) {
  absl::StatusOr<Region> r = ParseRegion(text);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : Region();
}

TEST(RegionTest, BoxBasics) {
  Box b{{0, 2}, {4, 5}};
  EXPECT_EQ(b.NumElements(), 12);
  EXPECT_EQ(b.Extents(), (std::vector<int64_t>{4, 3}));
  EXPECT_TRUE((Box{{0, 3}, {4, 3}}).Empty());
}

TEST(RegionTest, WholeAndSlab) {
  EXPECT_EQ(Region::Whole({4, 8}).ToString(), "[0:4,0:8)");
  EXPECT_EQ(Region::Slab({4, 8}, 1, 2, 6).ToString(), "[0:4,2:6)");
  EXPECT_EQ(Region::Whole({4, 8}).NumElements(), 32);
}

TEST(RegionTest, ToStringParseRoundTrip) {
  for (std::string_view text : {"[0:4,0:8)", "[0:4,0:8)+[4:8,0:2)", "[]", "[3:7)", "[)"}) {
    EXPECT_EQ(R(text).ToString(), text);
  }
  EXPECT_EQ(R(" [ 0 : 4 , 0:8 ) + [4:8,0:2) ").ToString(), "[0:4,0:8)+[4:8,0:2)");
  EXPECT_TRUE(R("[]").empty());
  EXPECT_EQ(R("[]").rank(), 0);
  EXPECT_EQ(R("[)").NumElements(), 1);  // a rank-0 box is one scalar element
}

TEST(RegionTest, BadParses) {
  for (std::string_view text : {"", "0:4", "[0:4", "[0-4)", "[4:0)", "[0:4)+", "[0:4)[0:2)",
                                "[0:4)+[0:2,0:2)", "[a:b)", "[0:4)x"}) {
    absl::StatusOr<Region> r = ParseRegion(text);
    EXPECT_FALSE(r.ok()) << text;
    EXPECT_THAT(r.status().message(), HasSubstr("bad region")) << text;
  }
  EXPECT_THAT(ParseRegion("[4:0)").status().message(), HasSubstr("below lower bound"));
}

TEST(RegionTest, IntersectsAndIntersect) {
  Region a = R("[0:4,0:8)");
  Region b = R("[2:6,4:12)");
  EXPECT_TRUE(a.Intersects(b));
  EXPECT_EQ(a.Intersect(b).ToString(), "[2:4,4:8)");
  EXPECT_FALSE(a.Intersects(R("[4:8,0:8)")));
  EXPECT_TRUE(a.Intersect(R("[4:8,0:8)")).empty());
}

TEST(RegionTest, IntersectWithOverlappingUnionCountsElementsOnce) {
  Region a = R("[0:4,0:4)");
  Region b = R("[0:2,0:4)+[1:3,0:4)");  // boxes overlap on row 1
  Region i = a.Intersect(b);
  EXPECT_EQ(i.NumElements(), 12);
  EXPECT_TRUE(i.BoxesDisjoint());
  EXPECT_FALSE(b.BoxesDisjoint());
}

TEST(RegionTest, ContainsUnions) {
  Region u = R("[0:2,0:8)+[2:4,0:8)");
  EXPECT_TRUE(u.Contains(R("[1:3,2:6)")));  // spans both boxes
  EXPECT_TRUE(u.Contains(R("[0:4,0:8)")));
  EXPECT_FALSE(u.Contains(R("[0:5,0:8)")));
  EXPECT_TRUE(R("[0:4,0:8)").Contains(u));
  EXPECT_TRUE(u.Contains(Region()));
  EXPECT_FALSE(R("[0:4,0:4)+[0:4,5:8)").Contains(R("[0:4,0:8)")));  // column 4 missing
}

TEST(RegionTest, InsideShape) {
  EXPECT_TRUE(R("[0:4,0:8)").InsideShape({4, 8}));
  EXPECT_FALSE(R("[0:5,0:8)").InsideShape({4, 8}));
  EXPECT_FALSE(R("[0:4)").InsideShape({4, 8}));
  EXPECT_FALSE(R("[-1:4,0:8)").InsideShape({4, 8}));
}

TEST(RegionTest, SplitAxis) {
  std::vector<Region> parts = R("[0:5,0:4)+[10:12,0:4)").SplitAxis(0, 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].ToString(), "[0:2,0:4)+[10:11,0:4)");
  EXPECT_EQ(parts[1].ToString(), "[2:4,0:4)+[11:12,0:4)");
  EXPECT_EQ(parts[2].ToString(), "[4:5,0:4)");  // the second box has no third part
  std::vector<Region> cols = R("[0:2,0:1)").SplitAxis(1, 2);
  EXPECT_EQ(cols[0].NumElements(), 2);
  EXPECT_TRUE(cols[1].empty());
}

TEST(RegionTest, SplitElementsFollowsElementOrder) {
  Region r = R("[0:3,0:4)+[5:6,0:2)");  // 14 elements
  std::vector<Region> parts = r.SplitElements(3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].NumElements(), 5);
  EXPECT_EQ(parts[1].NumElements(), 5);
  EXPECT_EQ(parts[2].NumElements(), 4);
  EXPECT_EQ(parts[0].ToString(), "[0:1,0:4)+[1:2,0:1)");
  EXPECT_EQ(parts[1].ToString(), "[1:2,1:4)+[2:3,0:2)");
  EXPECT_EQ(parts[2].ToString(), "[2:3,2:4)+[5:6,0:2)");
  // Concatenated offsets equal the original's: the split preserves element order.
  std::vector<int64_t> strides = RowMajorStrides({6, 4});
  std::vector<int64_t> all;
  for (const Region& p : parts) {
    std::vector<int64_t> o = p.Offsets(strides);
    all.insert(all.end(), o.begin(), o.end());
  }
  EXPECT_EQ(all, r.Offsets(strides));
}

TEST(RegionTest, SplitElements3DPreservesOrder) {
  Region r = R("[0:3,0:5,0:7)");
  std::vector<int64_t> strides = RowMajorStrides({3, 5, 7});
  for (int n : {1, 2, 4, 7, 13, 105, 200}) {
    std::vector<Region> parts = r.SplitElements(n);
    ASSERT_EQ(static_cast<int>(parts.size()), n);
    std::vector<int64_t> all;
    for (const Region& p : parts) {
      EXPECT_TRUE(p.InsideShape({3, 5, 7}));
      std::vector<int64_t> o = p.Offsets(strides);
      all.insert(all.end(), o.begin(), o.end());
    }
    EXPECT_EQ(all, r.Offsets(strides)) << n;
  }
}

TEST(RegionTest, OffsetsAndStrides) {
  EXPECT_EQ(RowMajorStrides({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(R("[1:2,1:3)").Offsets(RowMajorStrides({2, 4})), (std::vector<int64_t>{5, 6}));
}

}  // namespace
}  // namespace syncopate::plan
