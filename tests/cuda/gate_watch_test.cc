// GateWatch (gate_watch.h): Sync()'s description of a failed copy-engine launch says how many of
// this rank's gates its kernel had released before the wait expired, naming the held ones, and
// ignores gate words read after a timeout was recorded or the host aborted (an abort releases
// every gate). No GPU (LABEL unit).
#include "runtime/cuda/gate_watch.h"

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::cuda {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

WatchedGates Gates(std::vector<WatchedGate> gates) {
  return std::make_shared<const std::vector<WatchedGate>>(std::move(gates));
}

class GateWatchTest : public ::testing::Test {
 protected:
  GateWatchTest() : words_(std::make_unique<HostWords>()) {}
  HostWords& words() { return *words_; }
  const volatile HostWords& seen() { return *words_; }
  std::unique_ptr<HostWords> words_;
  GateWatch watch_;
};

TEST_F(GateWatchTest, NothingArmedDescribesNothing) {
  watch_.Observe(seen());
  EXPECT_EQ(watch_.Describe(5), "");
  watch_.Arm(nullptr);
  EXPECT_EQ(watch_.Describe(5), "");
  watch_.Arm(Gates({}));
  EXPECT_EQ(watch_.Describe(5), "");
}

TEST_F(GateWatchTest, NamesTheGatesStillHeldForTheFailedLaunch) {
  watch_.Arm(Gates({{0, 10, 1}, {3, 11, 2}, {7, 12, 3}}));
  words().gates[0] = 5;
  words().gates[3] = 4;  // still at the previous launch
  words().gates[7] = 6;  // a later launch already released it
  watch_.Observe(seen());
  const std::string d = watch_.Describe(5);
  EXPECT_THAT(d, AllOf(HasSubstr("released 2 of 3"), HasSubstr("transfer 11 to rank 2"),
                       Not(HasSubstr("transfer 10")), Not(HasSubstr("transfer 12"))));
}

TEST_F(GateWatchTest, AllReleasedPointsAwayFromThePeers) {
  watch_.Arm(Gates({{1, 4, 0}, {2, 5, 3}}));
  words().gates[1] = words().gates[2] = 9;
  watch_.Observe(seen());
  EXPECT_THAT(watch_.Describe(9), AllOf(HasSubstr("released all 2"), HasSubstr("queued behind")));
}

TEST_F(GateWatchTest, GatesReadAfterATimeoutOrAnAbortAreIgnored) {
  watch_.Arm(Gates({{0, 10, 1}}));
  words().gates[0] = 4;
  watch_.Observe(seen());
  // The kernel recorded its timeout and released every gate: not the gates' own doing.
  words().record.timed_out = 1;
  words().gates[0] = 5;
  watch_.Observe(seen());
  EXPECT_THAT(watch_.Describe(5), HasSubstr("released 0 of 1"));
  words().record.timed_out = 0;
  words().abort_flag = 1;
  watch_.Observe(seen());
  EXPECT_THAT(watch_.Describe(5), HasSubstr("released 0 of 1"));
}

TEST_F(GateWatchTest, NeverSampledSaysSo) {
  watch_.Arm(Gates({{0, 10, 1}}));
  EXPECT_THAT(watch_.Describe(1), HasSubstr("not sampled"));
  EXPECT_THAT(watch_.Describe(1), HasSubstr("nothing is known of its copies"));
  words().record.timed_out = 1;
  watch_.Observe(seen());
  EXPECT_THAT(watch_.Describe(1), HasSubstr("not sampled"));
}

TEST_F(GateWatchTest, ArmingAgainForgetsTheOldSample) {
  watch_.Arm(Gates({{0, 10, 1}}));
  words().gates[0] = 3;
  watch_.Observe(seen());
  watch_.Arm(Gates({{2, 20, 0}}));
  EXPECT_THAT(watch_.Describe(3), HasSubstr("not sampled"));
}

}  // namespace
}  // namespace syncopate::cuda
