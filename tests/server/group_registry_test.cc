// The leader's group registry on its own (no gRPC): forming, duplicates, deadlines naming missing
// ranks, a vanished waiter naming its rank, agreement rounds, supersession and shutdown.
#include "server/group_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>

namespace syncopate::server {
namespace {

using ::testing::HasSubstr;

MemberInfo Member(int rank) { return MemberInfo{rank, "node" + std::to_string(rank), "sm_90", "d"}; }

absl::Time Far() { return absl::Now() + absl::Seconds(60); }

struct JoinResult {
  std::promise<absl::StatusOr<GroupInfo>> promise;
  std::future<absl::StatusOr<GroupInfo>> future = promise.get_future();
  GroupRegistry::JoinDone Done() {
    return [this](absl::StatusOr<GroupInfo> r) { promise.set_value(std::move(r)); };
  }
};

struct AgreeResultPromise {
  std::promise<absl::StatusOr<AgreeOutcome>> promise;
  std::future<absl::StatusOr<AgreeOutcome>> future = promise.get_future();
  GroupRegistry::AgreeDone Done() {
    return [this](absl::StatusOr<AgreeOutcome> r) { promise.set_value(std::move(r)); };
  }
};

v1::Proposal Template(int world, int64_t cols = 32) {
  v1::Proposal p;
  p.set_kernel_hash("k");
  v1::TemplateRequest* t = p.mutable_template_request();
  t->set_template_name("allgather.ring");
  t->set_world_size(world);
  t->add_shape(64);
  t->add_shape(cols);
  t->set_dtype(v1::DTYPE_BF16);
  return p;
}

std::string FormGroup(GroupRegistry& registry, const std::string& job, int world) {
  std::vector<std::unique_ptr<JoinResult>> results;
  for (int r = 0; r < world; ++r) {
    results.push_back(std::make_unique<JoinResult>());
    registry.Join(job, world, Member(r), Far(), results.back()->Done());
  }
  std::string id;
  for (auto& r : results) {
    auto group = r->future.get();
    EXPECT_TRUE(group.ok()) << group.status();
    if (group.ok()) id = group->group_id;
  }
  return id;
}

TEST(GroupRegistryTest, FormsWhenAllArrive) {
  GroupRegistry registry({});
  JoinResult a, b, c;
  registry.Join("j", 3, Member(2), Far(), c.Done());
  registry.Join("j", 3, Member(0), Far(), a.Done());
  EXPECT_EQ(registry.Stats().pending_joins, 2u);
  registry.Join("j", 3, Member(1), Far(), b.Done());
  auto group = a.future.get();
  ASSERT_TRUE(group.ok());
  EXPECT_EQ(group->members.size(), 3u);
  EXPECT_EQ(group->members[1].node_name, "node1");
  EXPECT_EQ(b.future.get()->group_id, group->group_id);
  EXPECT_EQ(c.future.get()->group_id, group->group_id);
  EXPECT_EQ(registry.Stats().groups_formed, 1u);
}

TEST(GroupRegistryTest, DuplicateAndMismatchFailOnlyTheCaller) {
  GroupRegistry registry({});
  JoinResult a, dup, mismatch, b;
  registry.Join("j", 2, Member(0), Far(), a.Done());
  registry.Join("j", 2, Member(0), Far(), dup.Done());
  registry.Join("j", 3, Member(1), Far(), mismatch.Done());
  EXPECT_THAT(dup.future.get().status().message(), HasSubstr("rank: 0 already joined job 'j'"));
  EXPECT_THAT(mismatch.future.get().status().message(),
              HasSubstr("world_size: 3 from rank 1 (node node1, via daemon d) does not match "
                        "the world size 2 of job 'j' set by rank 0"));
  registry.Join("j", 2, Member(1), Far(), b.Done());
  EXPECT_TRUE(a.future.get().ok());
  EXPECT_TRUE(b.future.get().ok());
}

TEST(GroupRegistryTest, DeadlineNamesMissingRanksAndJobCanRetry) {
  GroupRegistry registry({});
  JoinResult a, b;
  registry.Join("j", 4, Member(0), Far(), a.Done());
  registry.Join("j", 4, Member(2), absl::Now() + absl::Milliseconds(50), b.Done());
  for (auto* r : {&a, &b}) {
    auto status = r->future.get().status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(status.message(), HasSubstr("missing ranks [1, 3] of world size 4"));
  }
  EXPECT_FALSE(FormGroup(registry, "j", 2).empty());
}

TEST(GroupRegistryTest, VanishedWaiterIsNamed) {
  GroupRegistry registry({});
  JoinResult a, b;
  registry.Join("j", 3, Member(0), Far(), a.Done());
  auto id = registry.Join("j", 3, Member(1), Far(), b.Done());
  registry.Cancel(id, "client gone");
  EXPECT_EQ(b.future.get().status().code(), absl::StatusCode::kCancelled);
  auto status = a.future.get().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(status.message(), HasSubstr("rank 1 (node node1, via daemon d) left job 'j'"));
  registry.Cancel(id, "again");  // no-op
}

TEST(GroupRegistryTest, AgreementRoundsAndFailures) {
  GroupRegistry registry({});
  const std::string group = FormGroup(registry, "j", 2);
  for (int round = 0; round < 2; ++round) {
    AgreeResultPromise a, b;
    registry.Agree(group, 0, Template(2), Far(), a.Done());
    registry.Agree(group, 1, Template(2), Far(), b.Done());
    auto ra = a.future.get();
    auto rb = b.future.get();
    ASSERT_TRUE(ra.ok()) << ra.status();
    ASSERT_TRUE(rb.ok());
    EXPECT_EQ(ra->round, static_cast<uint64_t>(round));
    EXPECT_EQ(ra->result->plan_hash, rb->result->plan_hash);
    EXPECT_EQ(ra->result->plan.plan_hash(), ra->result->plan_hash);
  }
  // Divergence fails the round only.
  AgreeResultPromise c, d;
  registry.Agree(group, 0, Template(2), Far(), c.Done());
  registry.Agree(group, 1, Template(2, 48), Far(), d.Done());
  EXPECT_EQ(c.future.get().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(d.future.get().status().message(), HasSubstr("ranks [1] diverge from rank 0"));
  // Wrong world size in a proposal: the caller only.
  AgreeResultPromise e;
  registry.Agree(group, 0, Template(3), Far(), e.Done());
  EXPECT_THAT(e.future.get().status().message(),
              HasSubstr("proposal.template_request.world_size: 3 does not match"));
  // A vanished proposer breaks the group; late callers learn why.
  AgreeResultPromise f, g, late;
  auto id = registry.Agree(group, 0, Template(2), Far(), f.Done());
  registry.Cancel(id, "client gone");
  EXPECT_EQ(f.future.get().status().code(), absl::StatusCode::kCancelled);
  registry.Agree(group, 1, Template(2), Far(), late.Done());
  EXPECT_THAT(late.future.get().status().message(),
              HasSubstr("rank 0 (node node0, via daemon d) vanished during plan agreement"));
}

// Ranks 0-1 join from node "a", 2-3 from "b": a two-level template without ranks_per_node gets 2
// (the same plan as asking for 2), and asking for 4 is refused naming a misplaced rank.
TEST(GroupRegistryTest, TwoLevelTemplatesFollowTheNodesRanksJoinedFrom) {
  GroupRegistry registry({});
  std::vector<std::unique_ptr<JoinResult>> joins;
  for (int r = 0; r < 4; ++r) {
    joins.push_back(std::make_unique<JoinResult>());
    registry.Join("two", 4, MemberInfo{r, r < 2 ? "a" : "b", "sm_90", "d"}, Far(),
                  joins.back()->Done());
  }
  std::string group;
  for (auto& j : joins) group = j->future.get()->group_id;
  auto agree_all = [&](int rpn) {
    v1::Proposal p = Template(4);
    p.mutable_template_request()->set_template_name("allgather.two_level");
    p.mutable_template_request()->set_ranks_per_node(rpn);
    std::vector<std::unique_ptr<AgreeResultPromise>> waits;
    for (int r = 0; r < 4; ++r) {
      waits.push_back(std::make_unique<AgreeResultPromise>());
      registry.Agree(group, r, p, Far(), waits.back()->Done());
    }
    std::vector<absl::StatusOr<AgreeOutcome>> outcomes;
    for (auto& w : waits) outcomes.push_back(w->future.get());
    return outcomes;
  };
  auto derived = agree_all(0);
  ASSERT_TRUE(derived[0].ok()) << derived[0].status();
  auto explicit_two = agree_all(2);
  ASSERT_TRUE(explicit_two[3].ok()) << explicit_two[3].status();
  EXPECT_EQ(derived[0]->result->plan_hash, explicit_two[3]->result->plan_hash);
  auto wrong = agree_all(4);
  EXPECT_EQ(wrong[1].status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(wrong[1].status().message(),
              HasSubstr("ranks_per_node: 4 puts rank 2 on rank 0's node, but rank 2 joined from "
                        "node 'b'"));
}

TEST(GroupRegistryTest, AgreementDeadlineNamesSilentRanks) {
  GroupRegistry registry({});
  const std::string group = FormGroup(registry, "j", 3);
  AgreeResultPromise a;
  registry.Agree(group, 1, Template(3), absl::Now() + absl::Milliseconds(50), a.Done());
  auto status = a.future.get().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(status.message(), HasSubstr("ranks [0, 2] did not propose"));
}

TEST(GroupRegistryTest, NewJoinSupersedesFormedGroup) {
  GroupRegistry registry({});
  const std::string old_group = FormGroup(registry, "j", 1);
  AgreeResultPromise pending;
  const std::string group2 = FormGroup(registry, "j", 2);
  EXPECT_NE(old_group, group2);
  registry.Agree(old_group, 0, Template(1), Far(), pending.Done());
  EXPECT_THAT(pending.future.get().status().message(), HasSubstr("was superseded"));
}

TEST(GroupRegistryTest, ShutdownFailsWaitersAndRejects) {
  GroupRegistry registry({});
  JoinResult a, b;
  registry.Join("j", 2, Member(0), Far(), a.Done());
  registry.Shutdown("daemon x is shutting down");
  EXPECT_EQ(a.future.get().status().code(), absl::StatusCode::kUnavailable);
  registry.Join("j", 2, Member(1), Far(), b.Done());
  EXPECT_THAT(b.future.get().status().message(), HasSubstr("shutting down"));
}

// Jobs that finish leave formed, idle groups behind (there is no "leave" call); at max_groups the
// one idle longest makes room, so fresh job ids never lock the registry.
TEST(GroupRegistryTest, IdleGroupsMakeRoomAtMaxGroups) {
  GroupRegistry::Options options;
  options.max_groups = 4;
  GroupRegistry registry(options);
  const std::string first = FormGroup(registry, "solo-0", 1);
  for (int i = 1; i < 40; ++i) {
    EXPECT_FALSE(FormGroup(registry, "solo-" + std::to_string(i), 1).empty()) << i;
  }
  AgreeResultPromise late;
  registry.Agree(first, 0, Template(1), Far(), late.Done());
  auto result = late.future.get();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(result.status().message(), HasSubstr("evicted"));
  EXPECT_THAT(result.status().message(), HasSubstr("max_groups (4)"));
  EXPECT_GE(registry.Stats().groups_evicted, 36u);
}

TEST(GroupRegistryTest, GroupsInUseAreNotEvicted) {
  GroupRegistry::Options options;
  options.max_groups = 2;
  GroupRegistry registry(options);
  // One group with a round in flight (rank 1 has not proposed), one still forming.
  const std::string busy = FormGroup(registry, "busy", 2);
  AgreeResultPromise waiting;
  registry.Agree(busy, 0, Template(2), Far(), waiting.Done());
  JoinResult forming;
  registry.Join("forming", 2, Member(0), Far(), forming.Done());
  JoinResult rejected;
  registry.Join("new", 1, Member(0), Far(), rejected.Done());
  auto status = rejected.future.get().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("each forming or with a call in flight"));
  EXPECT_EQ(waiting.future.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  registry.Shutdown("test over");
}

// Idle groups expire on the registry's own timer, with no new Join to trigger a sweep.
TEST(GroupRegistryTest, IdleGroupsExpireWithoutNewTraffic) {
  GroupRegistry::Options options;
  options.group_idle_ttl = absl::Milliseconds(50);
  GroupRegistry registry(options);
  const std::string id = FormGroup(registry, "idle", 1);
  EXPECT_EQ(registry.Stats().groups_live, 1u);
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (registry.Stats().groups_live != 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(registry.Stats().groups_live, 0u);
  EXPECT_EQ(registry.Stats().groups_expired, 1u);
  AgreeResultPromise late;
  registry.Agree(id, 0, Template(1), Far(), late.Done());
  EXPECT_THAT(late.future.get().status().message(), HasSubstr("idle longer than group_idle_ttl"));
}

}  // namespace
}  // namespace syncopate::server
