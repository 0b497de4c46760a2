// How many comm CTAs the SM backend launches when the caller sets none: DefaultCommCtas beside a
// GEMM, TransfersAloneCommCtas for transfers alone (overlap_runtime.h says why each); and the
// compute CTAs of transfers alone, TransfersAloneComputeCtas.
#include <gtest/gtest.h>

#include "runtime/cuda/overlap_runtime.h"

namespace syncopate::cuda {
namespace {

TEST(DefaultCommCtasTest, AnEighthOfTheResidentSlotsUpToSixteen) {
  EXPECT_EQ(DefaultCommCtas(1, 66, 2), 16);
  EXPECT_EQ(DefaultCommCtas(3, 66, 2), 15);  // 5 CTAs per channel
  EXPECT_EQ(DefaultCommCtas(1, 32, 2), 8);
  EXPECT_EQ(DefaultCommCtas(4, 4, 2), 1);    // fewer than channels: one CTA interleaves them
  EXPECT_EQ(DefaultCommCtas(14, 16, 2), 4);  // 8 ranks' allreduce.direct: 14 channels
  EXPECT_EQ(DefaultCommCtas(7, 66, 2), 14);  // two per channel fit the budget of 16
  EXPECT_EQ(DefaultCommCtas(3, 20, 2), 3);   // budget 5 < 2 x 3: one each, none left idle
  EXPECT_EQ(DefaultCommCtas(200, 132, 2), 16);
  EXPECT_EQ(DefaultCommCtas(2000, 132, 2), 32);  // at most 64 channels a comm CTA
}

TEST(DefaultCommCtasTest, TwoWhereEachCtaTakesAWholeSm) {
  EXPECT_EQ(DefaultCommCtas(1, 132, 1), 2);
  EXPECT_EQ(DefaultCommCtas(1, 66, 1), 2);
  EXPECT_EQ(DefaultCommCtas(3, 66, 1), 2);    // a comm CTA interleaves channels
  EXPECT_EQ(DefaultCommCtas(7, 16, 1), 2);    // 8 ranks' direct ReduceScatter: 7 rounds
  EXPECT_EQ(DefaultCommCtas(200, 66, 1), 4);  // at most 64 channels a comm CTA
  EXPECT_EQ(DefaultCommCtas(1, 14, 1), 1);  // below 16 SMs one, as the rule before gave
  EXPECT_EQ(DefaultCommCtas(100, 14, 1), 2);  // ... but one per 64 channels
  EXPECT_EQ(DefaultCommCtas(1, 3, 1), 1);
}

TEST(DefaultCommCtasTest, OneForTheTailWaitsWhereNoChannelHasSteps) {
  // Every chunk moved by its tiles (direct, or in tile parts): nothing for a comm CTA to move.
  EXPECT_EQ(DefaultCommCtas(0, 132, 1), 1);
  EXPECT_EQ(DefaultCommCtas(0, 66, 2), 1);
  EXPECT_EQ(DefaultCommCtas(0, 3, 1), 1);
}

TEST(TransfersAloneCommCtasTest, ARankWithItsGpuAloneGetsThirtyTwo) {
  EXPECT_EQ(TransfersAloneCommCtas(1, 132, 1), 32);
  EXPECT_EQ(TransfersAloneCommCtas(2, 132, 1), 32);
  EXPECT_EQ(TransfersAloneCommCtas(3, 132, 1), 30);  // whole channels
}

TEST(TransfersAloneCommCtasTest, RanksSharingAGpuFitTheirCommAndControlCtasTogether) {
  // 8 ranks of 32 comm CTAs on one GPU waited for chunks until their deadline, 16 passed: the
  // rule keeps (comm + 1 control) x ranks within the resident slots a rank sees.
  for (int ranks : {2, 3, 4, 8}) {
    const int comm = TransfersAloneCommCtas(1, 132, ranks);
    EXPECT_LE((comm + 1) * ranks, 132) << ranks << " ranks";
    EXPECT_GE(comm, 1);
  }
  EXPECT_EQ(TransfersAloneCommCtas(1, 132, 2), 32);
  EXPECT_EQ(TransfersAloneCommCtas(1, 132, 4), 32);
  EXPECT_EQ(TransfersAloneCommCtas(1, 132, 8), 15);
  EXPECT_EQ(TransfersAloneCommCtas(2, 132, 8), 14);
}

TEST(TransfersAloneCommCtasTest, AGpuTooSmallForEveryRankStillGetsOneCtaPerChannel) {
  EXPECT_EQ(TransfersAloneCommCtas(2, 8, 8), 2);
  EXPECT_EQ(TransfersAloneCommCtas(1, 0, 1), 1);
}

TEST(TransfersAloneComputeCtasTest, OnePerTwoSmsTheRankSees) {
  EXPECT_EQ(TransfersAloneComputeCtas(1792, 132, 1000), 66);
  EXPECT_EQ(TransfersAloneComputeCtas(224, 32, 47), 16);  // a quarter of an H100 under MPS
}

TEST(TransfersAloneComputeCtasTest, NeverMoreThanTheTilesOrTheRoomNorFewerThanOne) {
  EXPECT_EQ(TransfersAloneComputeCtas(4, 132, 1000), 4);
  EXPECT_EQ(TransfersAloneComputeCtas(1792, 66, 5), 5);  // comm CTAs took most slots
  EXPECT_EQ(TransfersAloneComputeCtas(1792, 66, -3), 1);
  EXPECT_EQ(TransfersAloneComputeCtas(1792, 1, 1000), 1);
  EXPECT_EQ(TransfersAloneComputeCtas(0, 132, 1000), 1);
}

TEST(DefaultCopyEngineFreeCtasTest, AThirtySecondOfTheSlotsForOneOrTwoRanks) {
  EXPECT_EQ(DefaultCopyEngineFreeCtas(132, 1), 4);
  EXPECT_EQ(DefaultCopyEngineFreeCtas(66, 2), 2);
  EXPECT_EQ(DefaultCopyEngineFreeCtas(16, 2), 1);  // never none
}

TEST(DefaultCopyEngineFreeCtasTest, ThreeEighthsWhenMoreRanksShareTheGpu) {
  // 4 ranks under MPS: 4 free stalled at once, 8 after hundreds of launches, 12 ran clean.
  EXPECT_EQ(DefaultCopyEngineFreeCtas(32, 4), 12);
  EXPECT_EQ(DefaultCopyEngineFreeCtas(16, 8), 6);
  EXPECT_EQ(DefaultCopyEngineFreeCtas(2, 8), 1);
}

}  // namespace
}  // namespace syncopate::cuda
