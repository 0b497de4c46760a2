// The joined CTAs' leave rule (jit/include/syncopate/impl/join_clock.h), on the host: the same
// header the fused kernels compile.
#include "syncopate/impl/join_clock.h"

#include <gtest/gtest.h>

namespace syncopate {
namespace {

constexpr unsigned long long kWait = 200'000;  // 200 us, the default kJoinPeerWaitNs
constexpr unsigned long long kStart = 5'000'000'000ull;

TEST(JoinPeerClockTest, LeavesOnceThePeersStoodStillForTheWait) {
  JoinPeerClock clock;
  EXPECT_FALSE(clock.ShouldLeave(kStart, 7, kWait));
  EXPECT_FALSE(clock.ShouldLeave(kStart + kWait, 7, kWait));  // not past it yet
  EXPECT_TRUE(clock.ShouldLeave(kStart + kWait + 1, 7, kWait));
}

TEST(JoinPeerClockTest, PeersThatDrawTilesKeepItWaitingPastTheWait) {
  JoinPeerClock clock;
  unsigned progress = 1;
  // A peer 2 ms behind, drawing a tile every 50 us: the CTA stays throughout.
  for (unsigned long long t = kStart; t < kStart + 2'000'000; t += 50'000) {
    EXPECT_FALSE(clock.ShouldLeave(t, progress++, kWait)) << "at " << (t - kStart) << " ns";
  }
  // Then the peer stops (its GEMM ended, or its CTAs wait for slots): the wait counts from the
  // last change.
  const unsigned long long last = kStart + 2'000'000;
  EXPECT_FALSE(clock.ShouldLeave(last, progress, kWait));
  EXPECT_FALSE(clock.ShouldLeave(last + kWait / 2, progress, kWait));
  EXPECT_TRUE(clock.ShouldLeave(last + kWait + 1, progress, kWait));
}

TEST(JoinPeerClockTest, AnyChangeCountsEvenAWordThatWentBack) {
  // Tickets of many CTAs land out of order, and a new launch's start from 1: any change is
  // progress.
  JoinPeerClock clock;
  EXPECT_FALSE(clock.ShouldLeave(kStart, 900, kWait));
  EXPECT_FALSE(clock.ShouldLeave(kStart + kWait + 1, 3, kWait));
  EXPECT_TRUE(clock.ShouldLeave(kStart + 2 * kWait + 2, 3, kWait));
}

TEST(JoinPeerClockTest, WithoutPublishedProgressTheWaitBoundsTheWholeWait) {
  // No words (another node, SYNCOPATE_JOIN_FOLLOWS_PEERS=0): the sum stays 0.
  JoinPeerClock clock;
  EXPECT_FALSE(clock.ShouldLeave(kStart, 0, kWait));
  EXPECT_FALSE(clock.ShouldLeave(kStart + 150'000, 0, kWait));
  EXPECT_TRUE(clock.ShouldLeave(kStart + kWait + 1, 0, kWait));
}

TEST(JoinPeerClockTest, AZeroWaitLeavesAtTheFirstPassAfterTheStart) {
  JoinPeerClock clock;
  EXPECT_FALSE(clock.ShouldLeave(kStart, 4, 0));
  EXPECT_TRUE(clock.ShouldLeave(kStart + 1, 4, 0));
}

}  // namespace
}  // namespace syncopate
