// Integration: every plan template over 2 "nodes" x 2 ranks (4 processes on loopback), host
// buffers, several iterations with increasing epochs, data checked after each by the ranks
// themselves (ucx_rank_helper), over UCX tcp and shared memory. The two-level templates keep
// their inter-node traffic to the node leaders; the flat ones (rings, direct, all-to-all) are
// placed on the same node map, so their hops between ranks 1 and 2 (and 3 and 0) cross "nodes"
// and go over UCX as inter-node transfers, which is what a flat plan does on a real cluster.
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "core/plan/templates.h"
#include "gtest/gtest.h"
#include "tests/ucx/process_group.h"

namespace syncopate::ucx {
namespace {

using Param = std::tuple<std::string, std::string>;  // template, tls

class TwoLevelTest : public ::testing::TestWithParam<Param> {};

TEST_P(TwoLevelTest, AllRanksCompleteEveryIterationWithCorrectData) {
  const auto& [templ, tls] = GetParam();
  auto group = testing::ProcessGroup::Start(
      4, {"--rpn=2", "--template=" + templ, "--tls=" + tls, "--iters=4", "--rows=48",
          "--cols=96", "--chunks=2", "--timeout_ms=20000"});
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<testing::RankResult> results = (*group)->WaitAll();
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ":\n" << results[r].output;
    EXPECT_TRUE(results[r].Said("OK iters=4")) << results[r].output;
    EXPECT_TRUE(results[r].Said("TEARDOWN ok in_flight=0")) << results[r].output;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Templates, TwoLevelTest,
    ::testing::Combine(::testing::ValuesIn(plan::TemplateNames()),
                       ::testing::Values("tcp", "shm")),
    [](const auto& info) {
      std::string name = absl::StrCat(std::get<0>(info.param), "_", std::get<1>(info.param));
      for (char& c : name) {
        if (c == '.') c = '_';
      }
      return name;
    });

// Every template again with the plan's buffers staged (--staged): the executor runs on copies
// and stages them from and to where the buffers really live, as on a GPU with host-only UCX.
// The copies are poisoned each iteration, so a chunk that is not staged fails the check.
class StagedTwoLevelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(StagedTwoLevelTest, StagedBuffersHoldThePostconditionEveryIteration) {
  auto group = testing::ProcessGroup::Start(
      4, {"--rpn=2", "--template=" + GetParam(), "--tls=tcp", "--iters=3", "--rows=48",
          "--cols=96", "--chunks=2", "--timeout_ms=20000", "--staged"});
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<testing::RankResult> results = (*group)->WaitAll();
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ":\n" << results[r].output;
    EXPECT_TRUE(results[r].Said("OK iters=3")) << results[r].output;
  }
}

INSTANTIATE_TEST_SUITE_P(Templates, StagedTwoLevelTest, ::testing::ValuesIn(plan::TemplateNames()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '.') c = '_';
                           }
                           return name;
                         });

// The same plan with the fence ordering (no flush round trip per chunk).
TEST(TwoLevelFenceTest, AllReduceWithFenceOrdering) {
  auto group = testing::ProcessGroup::Start(
      4, {"--rpn=2", "--template=allreduce.two_level", "--tls=tcp", "--iters=3", "--fence",
          "--timeout_ms=20000"});
  ASSERT_TRUE(group.ok()) << group.status();
  for (const auto& r : (*group)->WaitAll()) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
}

}  // namespace
}  // namespace syncopate::ucx
