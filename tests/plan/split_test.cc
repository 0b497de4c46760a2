// SplitPlan: re-chunking every template keeps it valid and correct in simulation; pieces, chunk
// numbers, signals and dependencies follow the documented conventions.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/plan/simulate.h"
#include "core/plan/templates.h"
#include "core/plan/validate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/template_cases.h"

namespace syncopate::plan {
namespace {

using ::syncopate::plan::testing::Case;
using ::syncopate::plan::testing::Describe;
using ::syncopate::plan::testing::DrainError;
using ::syncopate::plan::testing::RandomCase;
using ::testing::HasSubstr;

constexpr uint64_t kSeed = 777;

class SplitProperty : public ::testing::TestWithParam<std::string> {};

TEST_P(SplitProperty, SplitKeepsValidityAndSimulation) {
  uint64_t seed = kSeed;
  for (int world : {1, 2, 3, 4, 7, 8, 16}) {
    for (int n : {1, 2, 3, 5}) {
      if (world >= 16 && n > 2) continue;  // keep the big worlds quick
      const Case c = RandomCase(GetParam(), world, seed++ * 104729 + world);
      SCOPED_TRACE(absl::StrCat(Describe(c), " split n=", n));
      absl::StatusOr<Plan> plan = BuildTemplate(c.name, c.params);
      ASSERT_TRUE(plan.ok()) << plan.status();
      absl::StatusOr<Plan> split = SplitPlan(*plan, n);
      ASSERT_TRUE(split.ok()) << split.status();
      EXPECT_LE(split->NumTransfers(), n * plan->NumTransfers());
      EXPECT_GE(split->NumTransfers(), plan->NumTransfers());
      EXPECT_EQ(DrainError(*split), "");
      absl::Status valid = ValidatePlan(*split);
      ASSERT_TRUE(valid.ok()) << valid;
      SimulationOptions options;
      options.seed = c.seed;
      options.max_delay = std::chrono::microseconds(world >= 16 ? 0 : 10);
      absl::StatusOr<SimulationReport> report = SimulatePlan(*split, options);
      ASSERT_TRUE(report.ok()) << report.status();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTemplates, SplitProperty, ::testing::ValuesIn(TemplateNames()),
                         ::syncopate::plan::testing::TemplateTestName());

using ::syncopate::plan::testing::Params;

TEST(SplitPlanTest, PiecesChunksSignalsAndAlignedDeps) {
  absl::StatusOr<Plan> plan = BuildTemplate("allgather.ring", Params(4, {8, 3}, 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<Plan> split = SplitPlan(*plan, 3);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->name, "allgather.ring.split3");
  EXPECT_EQ(split->NumTransfers(), 3 * plan->NumTransfers());  // 6 elements per chunk
  const std::vector<const Transfer*> by_id = split->TransfersById();
  std::map<int, std::set<int>> signals;
  for (const Transfer* t : by_id) {
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->src_region.NumElements(), 2);
    EXPECT_TRUE(signals[t->dst_rank()].insert(t->signal).second);
    if (t->step > 0) {
      // A forward reads exactly what its dependency wrote: piece i depends on piece i only.
      ASSERT_EQ(t->deps.size(), 1u);
      const Transfer* d = by_id[t->deps[0]];
      EXPECT_EQ(d->dst_region, t->src_region);
      EXPECT_EQ(d->chunk, t->chunk);
    }
  }
  // Chunk c of the original becomes chunks 3c, 3c+1, 3c+2, consecutive in the channel.
  const std::vector<Transfer>& ch = split->ranks[1].channels[0];
  ASSERT_GE(ch.size(), 3u);
  EXPECT_EQ(ch[0].chunk, 3 * plan->ranks[1].channels[0][0].chunk);
  EXPECT_EQ(ch[1].chunk, ch[0].chunk + 1);
  EXPECT_EQ(ch[2].chunk, ch[0].chunk + 2);
}

TEST(SplitPlanTest, UnalignedDepsFallBackToAllPieces) {
  // Two-level RS: the inter-node send reads the partial collected by several intra reductions
  // whose destination is the same region (aligned), while the AllReduce's owner sends wait on
  // both RS levels. Every split stays valid; pieces never lose a dependency.
  TemplateParams p = Params(4, {8, 5}, 1);
  p.ranks_per_node = 2;
  absl::StatusOr<Plan> plan = BuildTemplate("allreduce.two_level", p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<Plan> split = SplitPlan(*plan, 4);
  ASSERT_TRUE(split.ok()) << split.status();
  const std::vector<const Transfer*> orig = plan->TransfersById();
  const std::vector<const Transfer*> got = split->TransfersById();
  for (const Transfer* t : got) {
    const Transfer* o = orig[0];
    for (const Transfer* c : orig) {
      if (c->chunk == t->chunk / 4 && c->rank == t->rank && c->peer == t->peer &&
          c->step == t->step && c->channel == t->channel) {
        o = c;
      }
    }
    EXPECT_GE(t->deps.size(), o->deps.size()) << "transfer " << t->id;
  }
  EXPECT_TRUE(ValidatePlan(*split).ok());
  EXPECT_TRUE(SimulatePlan(*split, SimulationOptions{}).ok());
}

TEST(SplitPlanTest, MorePiecesThanElementsDropsEmptyPieces) {
  absl::StatusOr<Plan> plan = BuildTemplate("reducescatter.ring", Params(3, {3}, 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<Plan> split = SplitPlan(*plan, 8);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->NumTransfers(), plan->NumTransfers());  // one element per chunk
  for (const Transfer* t : split->TransfersById()) EXPECT_EQ(t->chunk % 8, 0);
  EXPECT_TRUE(ValidatePlan(*split).ok());
  EXPECT_TRUE(SimulatePlan(*split, SimulationOptions{}).ok());
}

TEST(SplitPlanTest, SplitOfSplitStaysValid) {
  absl::StatusOr<Plan> plan = BuildTemplate("allreduce.rs_ag", Params(3, {12, 2}, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<Plan> once = SplitPlan(*plan, 2);
  ASSERT_TRUE(once.ok()) << once.status();
  absl::StatusOr<Plan> twice = SplitPlan(*once, 3);
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_TRUE(ValidatePlan(*twice).ok());
  EXPECT_TRUE(SimulatePlan(*twice, SimulationOptions{}).ok());
}

TEST(SplitPlanTest, BadArguments) {
  absl::StatusOr<Plan> plan = BuildTemplate("allgather.push", Params(2, {4}, 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<Plan> zero = SplitPlan(*plan, 0);
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(zero.status().message(), HasSubstr("split n 0 must be >= 1"));

  Plan broken = *plan;
  broken.ranks[0].channels[0][0].deps = {99};
  EXPECT_THAT(SplitPlan(broken, 2).status().message(), HasSubstr("depends on unknown transfer 99"));
  broken = *plan;
  broken.ranks[0].channels[0][0].id = 7;
  EXPECT_THAT(SplitPlan(broken, 2).status().message(), HasSubstr("not dense"));
  broken = *plan;
  broken.ranks[0].channels[0][0].dst_region = Region::Slab({4}, 0, 0, 1);
  EXPECT_THAT(SplitPlan(broken, 2).status().message(), HasSubstr("source has 2 elements"));
}

}  // namespace
}  // namespace syncopate::plan
