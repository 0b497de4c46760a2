// Integration: faults across UCX. A 4-rank two-level group (2 nodes x 2 ranks, one process per
// rank) runs until a victim rank is killed mid-transfer (SIGKILL), stalled past the deadline
// (SIGSTOP) or drops its connections (SIGUSR1 -> force-close of every endpoint). Every survivor
// must fail with an error (naming a rank; at least one names the victim), release its
// resources (teardown finishes, nothing in flight), and a new group must form afterwards.
// Plus a seeded chaos test: random faults over a fixed number of rounds, seed printed.
//
// Nothing here asserts on timing; the only clock is ProcessGroup's hang guard.
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <iostream>
#include <random>
#include <string>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/ucx/process_group.h"

namespace syncopate::ucx {
namespace {

enum class Fault { kNone, kKill, kStop, kDrop };
const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kNone: return "none";
    case Fault::kKill: return "kill";
    case Fault::kStop: return "stop";
    case Fault::kDrop: return "drop";
  }
  return "?";
}

constexpr int kWorld = 4;

std::vector<std::string> GroupArgs(const std::string& templ, const std::string& tls, int iters) {
  return {"--rpn=2", "--template=" + templ, "--tls=" + tls, absl::StrCat("--iters=", iters),
          "--rows=128", "--cols=512", "--chunks=2", "--timeout_ms=3000"};
}

// Runs one group with `fault` injected into `victim` once it starts iteration `trigger`, and
// checks the outcome. `context` labels failures (chaos seed and round).
void RunGroup(const std::string& templ, const std::string& tls, Fault fault, int victim,
              int trigger, const std::string& context) {
  SCOPED_TRACE(absl::StrCat(context, " template=", templ, " tls=", tls,
                            " fault=", FaultName(fault), " victim=", victim,
                            " trigger=", trigger));
  const int iters = fault == Fault::kNone ? 3 : 0;  // 0: run until an error
  auto group = testing::ProcessGroup::Start(kWorld, GroupArgs(templ, tls, iters));
  ASSERT_TRUE(group.ok()) << group.status();
  testing::ProcessGroup& g = **group;
  if (fault != Fault::kNone) {
    ASSERT_TRUE(g.WaitForLine(victim, absl::StrCat("ITER ", trigger), absl::Seconds(60)))
        << g.Output(victim);
    g.Signal(victim, fault == Fault::kKill ? SIGKILL : fault == Fault::kStop ? SIGSTOP : SIGUSR1);
    // Survivors report and tear down while the victim is still stopped (if stalled).
    for (int r = 0; r < kWorld; ++r) {
      if (r != victim) {
        EXPECT_TRUE(g.WaitForLine(r, "TEARDOWN", absl::Seconds(90))) << "rank " << r << " hung:\n"
                                                                    << g.Output(r);
      }
    }
    if (fault == Fault::kStop) {
      g.Signal(victim, SIGKILL);
      g.Signal(victim, SIGCONT);
    }
  }
  std::vector<testing::RankResult> results = g.WaitAll();
  if (fault == Fault::kNone) {
    for (int r = 0; r < kWorld; ++r) {
      EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ":\n" << results[r].output;
      EXPECT_TRUE(results[r].Said("TEARDOWN ok in_flight=0")) << results[r].output;
    }
    return;
  }
  const std::string victim_name = absl::StrCat("rank ", victim, " (");
  bool someone_named_victim = false;
  for (int r = 0; r < kWorld; ++r) {
    if (r == victim) continue;
    const testing::RankResult& res = results[r];
    EXPECT_EQ(res.exit_code, 1) << "rank " << r << ":\n" << res.output;
    std::string error = res.Line("ERROR ");
    std::cout << "  rank " << r << ": " << error << "\n  rank " << r << ": "
              << res.Line("TEARDOWN ") << std::endl;
    EXPECT_FALSE(error.empty()) << res.output;
    EXPECT_TRUE(absl::StrContains(error, "rank ")) << error;
    // Named by the transport or the executor ("rank 3 (vm pid 812) failed: ..."), or, when the
    // fault lands after the survivors have all their data and they wait in the end-of-iteration
    // barrier, by the bootstrap ("rank 3 left the bootstrap group").
    someone_named_victim |=
        absl::StrContains(error, victim_name) ||
        absl::StrContains(error, absl::StrCat("rank(s) ", victim)) ||
        absl::StrContains(error, absl::StrCat("rank ", victim, " left the bootstrap group"));
    // Resources released: teardown returned (bounded even when a close could not finish) and
    // no operation is left in flight.
    EXPECT_TRUE(absl::StrContains(res.Line("TEARDOWN "), "in_flight=0")) << res.output;
  }
  EXPECT_TRUE(someone_named_victim) << "no survivor named " << victim_name << ":\n"
                                    << results[(victim + 1) % kWorld].output;
}

// A healthy group forms and runs after a failed one (new processes, new hub, same machine).
void ExpectNewGroupForms(const std::string& tls) {
  RunGroup("allgather.two_level", tls, Fault::kNone, 0, 0, "new group after fault");
}

using FaultParam = std::tuple<Fault, std::string>;
class FaultTest : public ::testing::TestWithParam<FaultParam> {};

TEST_P(FaultTest, SurvivorsNameThePeerReleaseAndRegroup) {
  const auto& [fault, tls] = GetParam();
  RunGroup("allreduce.two_level", tls, fault, /*victim=*/3, /*trigger=*/3, "fault matrix");
  ExpectNewGroupForms(tls);
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, FaultTest,
    ::testing::Combine(::testing::Values(Fault::kKill, Fault::kStop, Fault::kDrop),
                       ::testing::Values("tcp", "shm")),
    [](const auto& info) {
      return absl::StrCat(FaultName(std::get<0>(info.param)), "_", std::get<1>(info.param));
    });

TEST(ChaosTest, RandomFaultsOverFixedRounds) {
  uint64_t seed = std::random_device{}();
  if (const char* env = std::getenv("SYNCOPATE_CHAOS_SEED"); env != nullptr) {
    ASSERT_TRUE(absl::SimpleAtoi(env, &seed)) << "SYNCOPATE_CHAOS_SEED=" << env;
  }
  std::cout << "chaos seed: " << seed << " (rerun with SYNCOPATE_CHAOS_SEED=" << seed << ")"
            << std::endl;
  ::testing::Test::RecordProperty("chaos_seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::vector<std::string> templates = {"allgather.two_level", "reducescatter.two_level",
                                              "allreduce.two_level"};
  const std::vector<std::string> tls = {"tcp", "shm"};
  const std::vector<Fault> faults = {Fault::kNone, Fault::kKill, Fault::kStop, Fault::kDrop};
  constexpr int kRounds = 6;
  for (int round = 0; round < kRounds; ++round) {
    const std::string& t = templates[rng() % templates.size()];
    const std::string& l = tls[rng() % tls.size()];
    Fault f = faults[rng() % faults.size()];
    int victim = static_cast<int>(rng() % kWorld);
    int trigger = 1 + static_cast<int>(rng() % 3);
    std::cout << "chaos round " << round << ": " << t << " over " << l << ", fault "
              << FaultName(f) << " on rank " << victim << " at iteration " << trigger
              << std::endl;
    RunGroup(t, l, f, victim, trigger, absl::StrCat("chaos seed ", seed, " round ", round));
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace syncopate::ucx
