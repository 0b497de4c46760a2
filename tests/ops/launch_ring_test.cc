// LaunchRing (ops/core/launch_ring.h): the slots of LaunchTrace's ring, kept in launch order.
#include "ops/core/launch_ring.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace syncopate::ops {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// The launches the ring keeps, oldest first.
std::vector<int64_t> Kept(const LaunchRing& ring) {
  std::vector<int64_t> launches;
  for (int index : ring.OldestFirst()) launches.push_back(ring.slot(index).launch);
  return launches;
}

TEST(LaunchRingTest, KeepsTheLastLaunchesOldestFirstOnceItWraps) {
  LaunchRing ring(3);
  EXPECT_THAT(ring.OldestFirst(), IsEmpty());
  EXPECT_EQ(ring.Claim({.ctas = 66, .bucket_m = 8192}), 0);
  EXPECT_EQ(ring.Claim({.ctas = 66}), 1);
  EXPECT_THAT(Kept(ring), ElementsAre(0, 1));
  EXPECT_EQ(ring.Claim({}), 2);
  EXPECT_EQ(ring.Claim({.ctas = 60, .bucket_m = 2048, .m = 2000}), 0);  // launch 3 over launch 0
  EXPECT_THAT(Kept(ring), ElementsAre(1, 2, 3));
  EXPECT_EQ(ring.slot(0).launch, 3);
  EXPECT_EQ(ring.slot(0).ctas, 60);
  EXPECT_EQ(ring.slot(0).bucket_m, 2048);
  EXPECT_EQ(ring.slot(0).m, 2000);
  EXPECT_EQ(ring.launches(), 4);
}

TEST(LaunchRingTest, ALaunchThatDidNotHappenGivesItsSlotAndNumberBack) {
  LaunchRing ring(4);
  ring.Claim({});
  ring.Claim({});
  ring.DropLast();
  EXPECT_THAT(Kept(ring), ElementsAre(0));
  EXPECT_EQ(ring.launches(), 1);
  EXPECT_EQ(ring.Claim({}), 1);  // the dropped one's slot, and its number
  EXPECT_THAT(Kept(ring), ElementsAre(0, 1));
  LaunchRing empty(2);
  empty.DropLast();  // nothing to drop
  EXPECT_EQ(empty.launches(), 0);
  EXPECT_THAT(empty.OldestFirst(), IsEmpty());
}

}  // namespace
}  // namespace syncopate::ops
