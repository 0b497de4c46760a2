// Host simulator: hand-written plans run correctly under many seeds; broken plans fail with a
// message naming the problem; deadlocks are reported, not hung.
#include "core/plan/simulate.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/plan/hand_plans.h"

namespace syncopate::plan {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace ::syncopate::plan::testing;  // NOLINT: test helpers

SimulationOptions Options(uint64_t seed) {
  SimulationOptions o;
  o.seed = seed;
  o.max_delay = std::chrono::microseconds(20);
  o.deadline = std::chrono::milliseconds(5000);
  return o;
}

TEST(SimulateTest, HandPlansSucceed) {
  for (int world : {1, 2, 3, 4}) {
    for (const Plan& plan :
         {DirectAllGather(world), RingAllGather(world), DirectReduceScatter(world)}) {
      for (uint64_t seed : {1, 2, 3}) {
        absl::StatusOr<SimulationReport> report = SimulatePlan(plan, Options(seed));
        ASSERT_TRUE(report.ok()) << plan.name << " world " << world << ": " << report.status();
        EXPECT_EQ(report->transfers_executed, plan.NumTransfers());
        EXPECT_GT(report->elements_checked, 0);
        EXPECT_THAT(report->Summary(), HasSubstr("executed"));
      }
    }
  }
}

TEST(SimulateTest, MissingChunkFailsNamingTheElement) {
  Plan plan = DirectAllGather(3);
  Remove(plan, 0);  // rank 0 never pushes its shard to rank 1
  absl::StatusOr<SimulationReport> report = SimulatePlan(plan, Options(1));
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(),
              AllOf(HasSubstr("postcondition fails on rank 1"), HasSubstr("data[0:2,0:4)"),
                    HasSubstr("never written")));
}

TEST(SimulateTest, WrongSourceNamesTheRankWhoseValueArrived) {
  Plan plan = DirectAllGather(3);
  // Rank 2's push to rank 0 lands in rank 1's shard instead of its own.
  for (Transfer& t : plan.ranks[2].channels[0]) {
    if (t.peer == 0) t.dst_region = Shard(3, 1);
  }
  absl::StatusOr<SimulationReport> report = SimulatePlan(plan, Options(1));
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(), HasSubstr("postcondition fails on rank 0"));
}

TEST(SimulateTest, ReadOfInvalidDataIsReported) {
  Plan plan = RingAllGather(3);
  // Forwarding without waiting for the data to arrive: step-1 transfers lose their dependency.
  // With max_delay 0 and rank-local order only, some seed reads before the data arrives.
  for (RankPlan& rp : plan.ranks) {
    for (Transfer& t : rp.channels[0]) t.deps.clear();
  }
  bool failed = false;
  for (uint64_t seed = 1; seed < 40 && !failed; ++seed) {
    SimulationOptions o = Options(seed);
    o.max_delay = std::chrono::microseconds(200);
    absl::StatusOr<SimulationReport> report = SimulatePlan(plan, o);
    if (!report.ok()) {
      failed = true;
      EXPECT_THAT(report.status().message(), HasSubstr("holds no valid data yet"));
    }
  }
  EXPECT_TRUE(failed);
}

TEST(SimulateTest, DeadlockIsReportedNotHung) {
  Plan plan = RingAllGather(3);
  // Rank 0's first transfer waits for rank 1's last one, which waits for it (ring forwarding).
  const int last_of_rank1 = plan.ranks[1].channels[0].back().id;
  Find(plan, plan.ranks[0].channels[0].front().id).deps.push_back(last_of_rank1);
  SimulationOptions o = Options(1);
  o.deadline = std::chrono::milliseconds(20000);  // must be found without the deadline
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<SimulationReport> report = SimulatePlan(plan, o);
  ASSERT_FALSE(report.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
  EXPECT_THAT(report.status().message(),
              AllOf(HasSubstr("deadlock"), HasSubstr("waits for transfer")));
}

TEST(SimulateTest, DoubleContributionFails) {
  Plan plan = DirectReduceScatter(3);
  Transfer extra = plan.ranks[1].channels[0][1];  // rank 1 -> rank 2, once more
  extra.signal = 7;
  Add(plan, extra);
  absl::StatusOr<SimulationReport> report = SimulatePlan(plan, Options(1));
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(),
              AllOf(HasSubstr("postcondition fails on rank 2"), HasSubstr("sum of")));
}

TEST(SimulateTest, AfterComputeSourceCountsAsProduced) {
  Plan plan = DirectAllGather(2);
  plan.ranks[0].initial.clear();  // rank 0's shard comes from the computation
  for (Transfer& t : plan.ranks[0].channels[0]) t.after_compute = true;
  plan.postcondition.erase(plan.postcondition.begin());  // rank 0's own shard: not initial now
  absl::StatusOr<SimulationReport> report = SimulatePlan(plan, Options(1));
  EXPECT_TRUE(report.ok()) << report.status();
}

TEST(SimulateTest, RefusesPlansAboveMaxElements) {
  SimulationOptions o = Options(1);
  o.max_elements = 10;
  absl::StatusOr<SimulationReport> report = SimulatePlan(DirectAllGather(4), o);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(report.status().message(), HasSubstr("max_elements"));
}

TEST(SimulateTest, StructuralErrorsAreRejectedBeforeRunning) {
  Plan plan = DirectAllGather(2);
  plan.ranks[0].channels[0][0].dst_region = Region::Slab({4, kCols}, 0, 3, 5);
  absl::StatusOr<SimulationReport> report = SimulatePlan(plan, Options(1));
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(report.status().message(), HasSubstr("outside buffer"));
}

}  // namespace
}  // namespace syncopate::plan
