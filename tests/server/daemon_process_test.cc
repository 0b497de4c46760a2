// Integration: real syncopated processes on loopback (3 daemons, 8 rank processes across them),
// rendezvous and agreement across daemons, and the fault matrix: a rank process or a daemon
// killed mid-rendezvous and mid-agreement -> the others get an error naming it, and a new group
// with the same job id forms afterwards. Deadlines here are generous bounds, never measurements.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "syncopate/client.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/test_kernels.h"

namespace syncopate::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int kWorld = 8;
// Ranks 0-2 on daemon 0 (the leader), 3-5 on daemon 1, 6-7 on daemon 2.
int DaemonOf(int rank) { return rank < 3 ? 0 : rank < 6 ? 1 : 2; }

class ThreeDaemons : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int d = 0; d < 3; ++d) StartDaemon(d);
  }

  void StartDaemon(int d) {
    daemons_[d] = std::make_unique<DaemonProcess>(
        SYNCOPATED_PATH, dir_, "node" + std::to_string(d) + "_" + std::to_string(generation_++),
        std::vector<std::string>{"--cache_dir=" + dir_.Path("cache" + std::to_string(d))});
    ASSERT_TRUE(daemons_[d]->ok()) << daemons_[d]->Log();
  }

  std::string Leader() const { return daemons_[0]->address(); }

  std::unique_ptr<Subprocess> StartRank(const std::string& job, int rank,
                                        std::vector<std::string> extra = {}) {
    const int d = DaemonOf(rank);
    std::vector<std::string> args = {"--socket=" + daemons_[d]->socket(), "--job=" + job,
                                     "--world=" + std::to_string(kWorld),
                                     "--rank=" + std::to_string(rank), "--leader=" + Leader(),
                                     "--node=node" + std::to_string(d), "--timeout_ms=60000"};
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<Subprocess>(
        RANK_PATH, args, dir_.Path(job + "_rank" + std::to_string(rank) + "_" +
                                   std::to_string(generation_++) + ".out"));
  }

  // Polls the leader's stats until `pred` holds (bounded).
  template <class Pred>
  bool WaitForLeader(Pred pred) {
    auto client = Client::Connect(daemons_[0]->socket());
    if (!client.ok()) return false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      auto stats = client->Stats();
      if (stats.ok() && pred(*stats)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // Runs a full group of 8 ranks for `job`; expects every rank to succeed.
  void ExpectGroupForms(const std::string& job, std::vector<std::string> extra = {}) {
    std::vector<std::unique_ptr<Subprocess>> ranks;
    for (int r = 0; r < kWorld; ++r) ranks.push_back(StartRank(job, r, extra));
    std::set<std::string> groups, hashes;
    for (int r = 0; r < kWorld; ++r) {
      ASSERT_EQ(ranks[r]->Wait(), 0) << "rank " << r << ": " << ranks[r]->Output();
      const std::string out = ranks[r]->Output();
      groups.insert(Field(out, "group="));
      hashes.insert(Field(out, "plan_hash="));
    }
    EXPECT_EQ(groups.size(), 1u);
    EXPECT_EQ(hashes.size(), 1u);
    EXPECT_EQ(hashes.begin()->size(), 64u);
  }

  static std::string Field(const std::string& out, const std::string& key) {
    const size_t at = out.find(key);
    if (at == std::string::npos) return "";
    const size_t end = out.find_first_of(" \n", at);
    return out.substr(at + key.size(), end - at - key.size());
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> daemons_[3];
  int generation_ = 0;
};

TEST_F(ThreeDaemons, EightRanksFormOneGroupAndAgree) {
  ExpectGroupForms("train-1", {"--rounds=3"});
  // A second job right after, and the same job id again (a restarted job).
  ExpectGroupForms("train-2");
  ExpectGroupForms("train-1");
}

TEST_F(ThreeDaemons, OneCompilePerNode) {
  ExpectGroupForms("compile-job", {"--steps=join,agree,compile",
                                   std::string("--source=") + kTestKernelSource,
                                   std::string("--spec=") + kTestKernelSpec});
  for (int d = 0; d < 3; ++d) {
    auto client = Client::Connect(daemons_[d]->socket());
    ASSERT_TRUE(client.ok());
    auto stats = client->Stats();
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    EXPECT_EQ(stats->compiles, d == 2 ? 2u : 3u) << "daemon " << d;
    EXPECT_EQ(stats->nvrtc_compiles, 1u) << "daemon " << d;
    EXPECT_EQ(stats->compile_cache_hits, stats->compiles - 1) << "daemon " << d;
  }
}

TEST_F(ThreeDaemons, RankKilledMidRendezvousIsNamed) {
  const std::string job = "kill-rank-join";
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < kWorld - 1; ++r) ranks.push_back(StartRank(job, r));  // rank 7 never comes
  ASSERT_TRUE(WaitForLeader([](const DaemonStats& s) { return s.pending_joins == 7; }));
  ranks[4]->Kill();  // a client of daemon 1
  for (int r = 0; r < kWorld - 1; ++r) {
    if (r == 4) continue;
    ASSERT_EQ(ranks[r]->Wait(), 1) << ranks[r]->Output();
    EXPECT_THAT(ranks[r]->Output(),
                AllOf(HasSubstr("JOIN ERROR code=ABORTED"), HasSubstr("rank 4 (node node1"),
                      HasSubstr("left job 'kill-rank-join'")));
  }
  ExpectGroupForms(job);
}

TEST_F(ThreeDaemons, DaemonKilledMidRendezvousIsNamed) {
  const std::string job = "kill-daemon-join";
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < kWorld - 1; ++r) ranks.push_back(StartRank(job, r));  // rank 6 on daemon 2
  ASSERT_TRUE(WaitForLeader([](const DaemonStats& s) { return s.pending_joins == 7; }));
  daemons_[2]->process().Kill();
  for (int r = 0; r < 6; ++r) {
    ASSERT_EQ(ranks[r]->Wait(), 1) << ranks[r]->Output();
    EXPECT_THAT(ranks[r]->Output(), AllOf(HasSubstr("JOIN ERROR code=ABORTED"),
                                          HasSubstr("rank 6 (node node2, via daemon node2")));
  }
  ASSERT_EQ(ranks[6]->Wait(), 1);
  EXPECT_THAT(ranks[6]->Output(), HasSubstr("JOIN ERROR code=UNAVAILABLE"));
  StartDaemon(2);
  ExpectGroupForms(job);
}

TEST_F(ThreeDaemons, RankKilledInsideAgreeIsNamed) {
  const std::string job = "kill-rank-agree";
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < kWorld; ++r) {
    // Rank 7 holds back its proposal, so the others stay inside Agree.
    ranks.push_back(StartRank(job, r, {r == 7 ? "--sleep_before_agree_ms=600000"
                                              : "--sleep_before_agree_ms=0"}));
  }
  ASSERT_TRUE(WaitForLeader([](const DaemonStats& s) { return s.pending_agreements == 7; }));
  ranks[3]->Kill();
  for (int r = 0; r < 7; ++r) {
    if (r == 3) continue;
    ASSERT_EQ(ranks[r]->Wait(), 1) << ranks[r]->Output();
    EXPECT_THAT(ranks[r]->Output(),
                AllOf(HasSubstr("AGREE ERROR code=ABORTED"), HasSubstr("rank 3 (node node1"),
                      HasSubstr("vanished during plan agreement")));
  }
  ranks[7]->Kill();
  ExpectGroupForms(job);
}

TEST_F(ThreeDaemons, RankThatNeverProposesIsNamedAtTheDeadline) {
  const std::string job = "silent-rank";
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.push_back(StartRank(job, r, {"--timeout_ms=4000", r == 5 ? "--sleep_before_agree_ms=600000"
                                                                   : "--sleep_before_agree_ms=0"}));
  }
  ASSERT_TRUE(WaitForLeader([](const DaemonStats& s) { return s.pending_agreements == 7; }));
  ranks[5]->Kill();  // dies between Join and Agree: no call of its own to cancel
  for (int r = 0; r < kWorld; ++r) {
    if (r == 5) continue;
    ASSERT_EQ(ranks[r]->Wait(), 1) << ranks[r]->Output();
    EXPECT_THAT(ranks[r]->Output(), AllOf(HasSubstr("AGREE ERROR code=DEADLINE_EXCEEDED"),
                                          HasSubstr("ranks [5] did not propose")));
  }
  ExpectGroupForms(job);
}

TEST_F(ThreeDaemons, DaemonKilledMidAgreementIsNamed) {
  const std::string job = "kill-daemon-agree";
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.push_back(StartRank(job, r, {r == 7 ? "--sleep_before_agree_ms=600000"
                                              : "--sleep_before_agree_ms=0"}));
  }
  ASSERT_TRUE(WaitForLeader([](const DaemonStats& s) { return s.pending_agreements == 7; }));
  daemons_[2]->process().Kill();  // serves rank 6 (inside Agree) and rank 7
  for (int r = 0; r < 6; ++r) {
    ASSERT_EQ(ranks[r]->Wait(), 1) << ranks[r]->Output();
    EXPECT_THAT(ranks[r]->Output(),
                AllOf(HasSubstr("AGREE ERROR code=ABORTED"),
                      HasSubstr("rank 6 (node node2, via daemon node2")));
  }
  ranks[7]->Kill();
  StartDaemon(2);
  ExpectGroupForms(job);
}

TEST_F(ThreeDaemons, LeaderKilledMidAgreementIsNamed) {
  const std::string job = "kill-leader";
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.push_back(StartRank(job, r, {r == 0 ? "--sleep_before_agree_ms=600000"
                                              : "--sleep_before_agree_ms=0"}));
  }
  ASSERT_TRUE(WaitForLeader([](const DaemonStats& s) { return s.pending_agreements == 7; }));
  const std::string leader = Leader();
  daemons_[0]->process().Kill();
  for (int r = 3; r < kWorld; ++r) {
    ASSERT_EQ(ranks[r]->Wait(), 1) << ranks[r]->Output();
    EXPECT_THAT(ranks[r]->Output(), AllOf(HasSubstr("AGREE ERROR code=UNAVAILABLE"),
                                          HasSubstr("leader daemon at " + leader)));
  }
  for (int r = 1; r < 3; ++r) {  // clients of the dead leader daemon itself
    ASSERT_EQ(ranks[r]->Wait(), 1) << ranks[r]->Output();
    EXPECT_THAT(ranks[r]->Output(), HasSubstr("AGREE ERROR code=UNAVAILABLE"));
  }
  ranks[0]->Kill();
  StartDaemon(0);
  ExpectGroupForms(job);
}

TEST_F(ThreeDaemons, FrozenDaemonIsDetectedByKeepalive) {
  // Daemon 2 stops answering anything (SIGSTOP: its sockets stay open, so only the leader's
  // keepalive pings can tell). Restart the leader with a short peer timeout for this test.
  daemons_[0] = std::make_unique<DaemonProcess>(SYNCOPATED_PATH, dir_, "node0_keepalive",
                                                std::vector<std::string>{"--peer_timeout_ms=1000"});
  ASSERT_TRUE(daemons_[0]->ok()) << daemons_[0]->Log();
  const std::string job = "frozen-daemon";
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < kWorld - 1; ++r) ranks.push_back(StartRank(job, r));
  ASSERT_TRUE(WaitForLeader([](const DaemonStats& s) { return s.pending_joins == 7; }));
  daemons_[2]->process().Signal(SIGSTOP);
  for (int r = 0; r < 6; ++r) {
    ASSERT_EQ(ranks[r]->Wait(), 1) << ranks[r]->Output();
    EXPECT_THAT(ranks[r]->Output(), AllOf(HasSubstr("JOIN ERROR code=ABORTED"),
                                          HasSubstr("rank 6 (node node2, via daemon node2")));
  }
  daemons_[2]->process().Kill();
  ranks[6]->Kill();
  StartDaemon(2);
  ExpectGroupForms(job);
}

TEST_F(ThreeDaemons, SigtermDrainsWaitersAndExitsZero) {
  std::vector<std::unique_ptr<Subprocess>> ranks;
  ranks.push_back(StartRank("drain", 0));
  ASSERT_TRUE(WaitForLeader([](const DaemonStats& s) { return s.pending_joins == 1; }));
  daemons_[0]->process().Signal(SIGTERM);
  ASSERT_EQ(daemons_[0]->process().Wait(), 0) << daemons_[0]->Log();
  ASSERT_EQ(ranks[0]->Wait(), 1);
  EXPECT_THAT(ranks[0]->Output(), AllOf(HasSubstr("JOIN ERROR code=UNAVAILABLE"),
                                        HasSubstr("is shutting down")));
  EXPECT_THAT(daemons_[0]->Log(), HasSubstr("event=stopped"));
}

}  // namespace
}  // namespace syncopate::testing
