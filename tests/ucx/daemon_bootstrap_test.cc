// Integration: the UCX bootstrap carried by the daemons' control plane. Two real syncopated
// processes on loopback (daemon 0 leads, daemon 1 forwards to it) and four ucx_rank_helper
// processes, two per daemon, each joining through its own daemon; each builds a DaemonBootstrap,
// connects its UcxTransport with it and runs allgather.two_level (2 ranks per node) with the
// PlanExecutor, checking the data itself. Deadlines are generous bounds, never measurements.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "syncopate/client.h"
#include "tests/testing/subprocess.h"

namespace syncopate::testing {
namespace {

constexpr int kWorld = 4;
constexpr int kRanksPerNode = 2;

std::string LineStartingWith(const std::string& out, const std::string& prefix) {
  size_t at = 0;
  while (at < out.size()) {
    size_t end = out.find('\n', at);
    if (end == std::string::npos) end = out.size();
    if (out.compare(at, prefix.size(), prefix) == 0) return out.substr(at, end - at);
    at = end + 1;
  }
  return "";
}

TEST(DaemonBootstrapTest, TwoLevelAllGatherOverTwoDaemons) {
  TempDir dir;
  DaemonProcess leader(SYNCOPATED_PATH, dir, "node0", {"--cache_dir=" + dir.Path("cache0")});
  ASSERT_TRUE(leader.ok()) << leader.Log();
  DaemonProcess follower(SYNCOPATED_PATH, dir, "node1", {"--cache_dir=" + dir.Path("cache1")});
  ASSERT_TRUE(follower.ok()) << follower.Log();

  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < kWorld; ++r) {
    const DaemonProcess& daemon = r / kRanksPerNode == 0 ? leader : follower;
    ranks.push_back(std::make_unique<Subprocess>(
        UCX_RANK_HELPER_PATH,
        std::vector<std::string>{
            "--bootstrap=daemon", "--daemon=" + daemon.socket(), "--leader=" + leader.address(),
            "--job=ucx-boot", "--rank=" + std::to_string(r), "--world=" + std::to_string(kWorld),
            "--rpn=" + std::to_string(kRanksPerNode), "--template=allgather.two_level",
            "--tls=tcp", "--iters=2", "--rows=48", "--cols=96", "--chunks=2",
            "--timeout_ms=20000"},
        dir.Path("rank" + std::to_string(r) + ".out")));
    ASSERT_TRUE(ranks.back()->started());
  }
  std::set<std::string> groups;
  for (int r = 0; r < kWorld; ++r) {
    const std::optional<int> code = ranks[r]->Wait(std::chrono::seconds(120));
    const std::string out = ranks[r]->Output();
    ASSERT_TRUE(code.has_value()) << "rank " << r << " hung:\n" << out;
    EXPECT_EQ(*code, 0) << "rank " << r << ":\n" << out << "\nleader log tail:\n"
                        << leader.Log().substr(leader.Log().size() > 4000
                                                   ? leader.Log().size() - 4000
                                                   : 0);
    EXPECT_NE(LineStartingWith(out, "OK iters=2"), "") << out;
    // The plan was agreed without ranks_per_node and the node map came from the group.
    EXPECT_EQ(LineStartingWith(out, "NODES "), "NODES 0,0,1,1") << out;
    EXPECT_NE(LineStartingWith(out, "TEARDOWN ok in_flight=0"), "") << out;
    groups.insert(LineStartingWith(out, "GROUP "));
  }
  EXPECT_EQ(groups.size(), 1u) << "every rank is in the same group";

  // The bootstrap really went through the control plane: the follower forwarded its ranks'
  // Join and Exchange calls to the leader.
  auto client = Client::Connect(follower.socket());
  ASSERT_TRUE(client.ok());
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  // Per rank: Join, Connect's AllGather, a barrier per iteration (2) and the final barrier.
  EXPECT_GE(stats->forwarded_calls, 2u * (1 + 1 + 2 + 1));
}

// A rank process killed while it waits in a bootstrap exchange: its forwarded call is cancelled,
// the leader breaks the group, and the other ranks' exchanges fail ABORTED naming it.
TEST(DaemonBootstrapTest, RankKilledMidExchangeIsNamed) {
  TempDir dir;
  DaemonProcess leader(SYNCOPATED_PATH, dir, "node0", {"--cache_dir=" + dir.Path("cache0")});
  ASSERT_TRUE(leader.ok()) << leader.Log();
  DaemonProcess follower(SYNCOPATED_PATH, dir, "node1", {"--cache_dir=" + dir.Path("cache1")});
  ASSERT_TRUE(follower.ok()) << follower.Log();
  auto client = Client::Connect(leader.socket());
  ASSERT_TRUE(client.ok());

  // Rank 3 is a helper process behind the follower; ranks 0-2 are threads of this test.
  Subprocess victim(UCX_RANK_HELPER_PATH,
                    {"--bootstrap=daemon", "--daemon=" + follower.socket(),
                     "--leader=" + leader.address(), "--job=ucx-kill", "--rank=3",
                     "--world=4", "--rpn=2", "--tls=tcp", "--timeout_ms=60000"},
                    dir.Path("rank3.out"));
  ASSERT_TRUE(victim.started());
  std::vector<std::future<Result<Group>>> joins;
  for (int r = 0; r < 3; ++r) {
    joins.push_back(std::async(std::launch::async, [&, r] {
      JoinOptions options;
      options.job_id = "ucx-kill";
      options.world_size = 4;
      options.rank = r;
      options.node_name = "node" + std::to_string(r / 2);
      options.leader_address = leader.address();
      options.timeout = std::chrono::seconds(60);
      return client->Join(options);
    }));
  }
  std::vector<Group> groups;
  for (auto& join : joins) {
    Result<Group> group = join.get();
    ASSERT_TRUE(group.ok()) << group.status().ToString();
    groups.push_back(*group);
  }
  // The helper agrees on its default plan before its UCX bootstrap: propose the same.
  std::vector<std::future<Result<AgreedPlan>>> agreements;
  for (int r = 0; r < 3; ++r) {
    agreements.push_back(std::async(std::launch::async, [&, r] {
      Proposal proposal;
      proposal.kernel_hash = "ucx-rank-helper";
      TemplateSpec spec;
      spec.name = "allgather.two_level";
      spec.shape = {32, 256};
      spec.dtype = "f32";
      spec.chunks_per_shard = 2;
      proposal.template_spec = spec;
      return client->Agree(groups[r], proposal, std::chrono::seconds(60));
    }));
  }
  for (auto& agreement : agreements) {
    Result<AgreedPlan> agreed = agreement.get();
    ASSERT_TRUE(agreed.ok()) << agreed.status().ToString() << "\n" << victim.Output();
  }
  // Wait until the victim's Connect is waiting in its exchange at the leader, then kill it.
  auto waiting = [&](uint64_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      auto stats = client->Stats();
      if (stats.ok() && stats->pending_agreements == n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  };
  ASSERT_TRUE(waiting(1)) << victim.Output();
  victim.Kill();
  ASSERT_TRUE(waiting(0));
  auto result = client->Exchange(groups[0], "ucx.bootstrap.0.allgather", "x",
                                 std::chrono::seconds(10));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kAborted) << result.status().ToString();
  EXPECT_NE(result.status().message().find("rank 3"), std::string::npos)
      << result.status().ToString();
  EXPECT_NE(result.status().message().find("vanished during exchange"), std::string::npos)
      << result.status().ToString();
}

}  // namespace
}  // namespace syncopate::testing
