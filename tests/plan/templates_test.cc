// Collective templates: every template at world sizes 1..64 with random shapes, axes, dtypes and
// chunk counts is valid (ValidatePlan) and computes its collective (SimulatePlan); the documented
// buffer/chunk/signal/after_compute conventions hold; bad parameters give errors naming them.
#include "core/plan/templates.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/plan/simulate.h"
#include "core/plan/validate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/template_cases.h"

namespace syncopate::plan {
namespace {

using ::syncopate::plan::testing::Case;
using ::syncopate::plan::testing::Describe;
using ::syncopate::plan::testing::DrainError;
using ::syncopate::plan::testing::kWorldSizes;
using ::syncopate::plan::testing::RandomCase;
using ::testing::HasSubstr;

constexpr uint64_t kSeed = 20260114;

// Checks done here independently of ValidatePlan, for the conventions the compiler relies on.
void ExpectConventions(const Case& c, const Plan& plan) {
  const int w = c.params.world_size;
  std::map<int, std::set<int>> signals;  // destination rank -> signals
  const std::vector<const Transfer*> by_id = plan.TransfersById();
  for (const Transfer* t : by_id) {
    ASSERT_NE(t, nullptr);
    EXPECT_TRUE(signals[t->dst_rank()].insert(t->signal).second)
        << "signal " << t->signal << " repeated on rank " << t->dst_rank();
    for (int dep : t->deps) {
      const Transfer* d = by_id[dep];
      EXPECT_TRUE(d->rank == t->rank || d->dst_rank() == t->rank)
          << "transfer " << t->id << " on rank " << t->rank << " depends on unobservable " << dep;
    }
    EXPECT_EQ(t->src_region.NumElements(), t->dst_region.NumElements());
    EXPECT_FALSE(t->src_region.empty()) << "transfer " << t->id;
    EXPECT_GE(t->chunk, 0);
  }
  for (const RankPlan& rp : plan.ranks) {
    for (size_t ch = 0; ch < rp.channels.size(); ++ch) {
      for (const Transfer& t : rp.channels[ch]) EXPECT_EQ(t.channel, static_cast<int>(ch));
    }
  }
  if (w > 1 && c.name.rfind("allgather", 0) != 0 && c.name.rfind("alltoall", 0) != 0) {
    // Reductions: exactly the transfers that read a rank's untouched contribution are marked,
    // and those are exactly the ones that wait for nothing.
    for (const Transfer* t : by_id) {
      EXPECT_EQ(t->after_compute, t->deps.empty()) << "transfer " << t->id;
    }
  }
}

void BuildAndCheck(const Case& c) {
  SCOPED_TRACE(Describe(c));
  absl::StatusOr<Plan> plan = BuildTemplate(c.name, c.params);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->name, c.name);
  ExpectConventions(c, *plan);
  EXPECT_EQ(DrainError(*plan), "");
  absl::Status valid = ValidatePlan(*plan);
  ASSERT_TRUE(valid.ok()) << valid;
  SimulationOptions options;
  options.seed = c.seed;
  options.max_delay = std::chrono::microseconds(c.params.world_size >= 16 ? 0 : 20);
  absl::StatusOr<SimulationReport> report = SimulatePlan(*plan, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->transfers_executed, plan->NumTransfers());
}

class TemplateProperty : public ::testing::TestWithParam<std::string> {};

TEST_P(TemplateProperty, ValidAndSimulatesAtEveryWorldSize) {
  uint64_t seed = kSeed;
  for (int world : kWorldSizes) {
    const int cases = world >= 64 ? 1 : world >= 16 ? 2 : 4;
    for (int i = 0; i < cases; ++i) {
      BuildAndCheck(RandomCase(GetParam(), world, seed++ * 7919 + world));
      if (HasFatalFailure()) return;
    }
  }
}

TEST_P(TemplateProperty, Deterministic) {
  const Case c = RandomCase(GetParam(), 7, kSeed);
  SCOPED_TRACE(Describe(c));
  absl::StatusOr<Plan> a = BuildTemplate(c.name, c.params);
  absl::StatusOr<Plan> b = BuildTemplate(c.name, c.params);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(PlanHash(*a), PlanHash(*b));
}

INSTANTIATE_TEST_SUITE_P(AllTemplates, TemplateProperty, ::testing::ValuesIn(TemplateNames()),
                         ::syncopate::plan::testing::TemplateTestName());

using ::syncopate::plan::testing::Params;

TEST(TemplatesTest, NamesAreTheDocumentedSixteen) {
  EXPECT_THAT(TemplateNames(),
              ::testing::ElementsAre(
                  "allgather.push", "allgather.pull", "allgather.ring", "allgather.biring",
                  "allgather.two_level", "reducescatter.ring", "reducescatter.direct",
                  "reducescatter.direct_inplace", "reducescatter.two_level", "allreduce.rs_ag",
                  "allreduce.direct", "allreduce.direct_out", "allreduce.split",
                  "allreduce.two_level", "alltoall.uniform", "alltoall.variable"));
}

TEST(TemplatesTest, AllGatherShardsAndChunks) {
  // 10 rows over 3 ranks: shards 4, 3, 3; two chunks each.
  absl::StatusOr<Plan> plan = BuildTemplate("allgather.push", Params(3, {10, 2}, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->ranks[0].initial.at("data").ToString(), "[0:4,0:2)");
  EXPECT_EQ(plan->ranks[1].initial.at("data").ToString(), "[4:7,0:2)");
  EXPECT_EQ(plan->ranks[2].initial.at("data").ToString(), "[7:10,0:2)");
  std::map<int, std::string> chunk_region;
  for (const Transfer* t : plan->TransfersById()) {
    chunk_region[t->chunk] = t->src_region.ToString();
    EXPECT_EQ(t->src_rank(), t->chunk / 2) << "chunk = shard * chunks_per_shard + k";
    EXPECT_FALSE(t->after_compute);
  }
  EXPECT_EQ(chunk_region[0], "[0:2,0:2)");
  EXPECT_EQ(chunk_region[1], "[2:4,0:2)");
  EXPECT_EQ(chunk_region[5], "[9:10,0:2)");
  // Rank-swizzled: the first transfer of each rank goes to a different peer.
  std::set<int> first_peers;
  for (const RankPlan& rp : plan->ranks) first_peers.insert(rp.channels[0].front().peer);
  EXPECT_EQ(first_peers.size(), 3u);
}

TEST(TemplatesTest, AllGatherRingForwardsDependOnIncoming) {
  absl::StatusOr<Plan> plan = BuildTemplate("allgather.ring", Params(4, {8}, 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<const Transfer*> by_id = plan->TransfersById();
  for (const Transfer* t : by_id) {
    if (t->step == 0) {
      EXPECT_TRUE(t->deps.empty());
      EXPECT_EQ(t->src_rank(), t->chunk);
    } else {
      ASSERT_EQ(t->deps.size(), 1u);
      const Transfer* in = by_id[t->deps[0]];
      EXPECT_EQ(in->peer, t->rank);
      EXPECT_EQ(in->chunk, t->chunk);
      EXPECT_EQ(in->step, t->step - 1);
    }
  }
}

TEST(TemplatesTest, BiringUsesBothDirections) {
  absl::StatusOr<Plan> plan = BuildTemplate("allgather.biring", Params(4, {8}, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const Transfer* t : plan->TransfersById()) {
    const int dir = t->chunk % 2 == 0 ? 1 : 3;  // +1 or -1 mod 4
    EXPECT_EQ(t->peer, (t->rank + dir) % 4) << "chunk " << t->chunk;
    EXPECT_EQ(t->channel, t->chunk % 2);
  }
}

TEST(TemplatesTest, TwoLevelChannelOneIsInterNode) {
  for (const char* name :
       {"allgather.two_level", "reducescatter.two_level", "allreduce.two_level"}) {
    SCOPED_TRACE(name);
    TemplateParams p = Params(8, {16, 2}, 2);
    p.ranks_per_node = 4;
    absl::StatusOr<Plan> plan = BuildTemplate(name, p);
    ASSERT_TRUE(plan.ok()) << plan.status();
    int inter = 0;
    for (const Transfer* t : plan->TransfersById()) {
      const bool crosses = t->rank / 4 != t->peer / 4;
      EXPECT_EQ(crosses, t->channel % 2 == 1) << "transfer " << t->id;
      inter += crosses;
    }
    EXPECT_GT(inter, 0);
  }
}

TEST(TemplatesTest, ReduceScatterOutputIsLargestShard) {
  TemplateParams p = Params(3, {2, 10}, 1);
  p.axis = 1;
  absl::StatusOr<Plan> plan = BuildTemplate("reducescatter.direct", p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_NE(plan->FindBuffer("output"), nullptr);
  EXPECT_EQ(plan->FindBuffer("output")->shape, (Shape{2, 4}));
  ASSERT_EQ(plan->postcondition.size(), 3u);
  EXPECT_EQ(plan->postcondition[2].region.ToString(), "[0:2,0:3)");
  EXPECT_EQ(plan->postcondition[2].sources.size(), 3u);
  int local = 0;
  for (const Transfer* t : plan->TransfersById()) {
    EXPECT_EQ(t->reduce, ReduceOp::kSum);
    EXPECT_TRUE(t->after_compute);
    EXPECT_EQ(t->dst_buffer, "output");
    local += t->kind == TransferKind::kLocalCopy;
  }
  EXPECT_EQ(local, 3);
}

// One channel per round (rank q's reductions into q + d on channel d - 1; the own contribution on
// round 1's), so a rank's CTAs move the rounds at once, and each channel chunk-major: chunk k's
// transfers before chunk k + 1's, so an early chunk never queues behind a later chunk's, whose
// tiles are computed last (a fused kernel's comm CTAs run a channel in order).
TEST(TemplatesTest, ReduceScatterDirectPutsEachRoundOnItsChannelChunkMajor) {
  for (int world : {2, 3, 4}) {
    const int chunks = 4;
    absl::StatusOr<Plan> plan =
        BuildTemplate("reducescatter.direct", Params(world, {int64_t{world} * chunks * 2}, chunks));
    ASSERT_TRUE(plan.ok()) << plan.status();
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(plan->ranks[r].channels.size(), static_cast<size_t>(world - 1)) << "rank " << r;
      for (int c = 0; c < world - 1; ++c) {
        const std::vector<Transfer>& channel = plan->ranks[r].channels[c];
        // Channel 0 holds the own contribution and round 1's reduction of each chunk.
        const int per_chunk = c == 0 ? 2 : 1;
        ASSERT_EQ(channel.size(), static_cast<size_t>(per_chunk * chunks))
            << "world " << world << " rank " << r << " channel " << c;
        for (size_t i = 0; i < channel.size(); ++i) {
          // Global chunk ids are shard * chunks + k: chunk k of its shard.
          EXPECT_EQ(channel[i].chunk % chunks, static_cast<int>(i) / per_chunk)
              << "world " << world << " rank " << r << " channel " << c << " position " << i;
          if (channel[i].kind == TransferKind::kLocalCopy) continue;
          EXPECT_EQ(channel[i].peer, (r + c + 1) % world)
              << "world " << world << " rank " << r << " channel " << c << " position " << i;
        }
      }
      EXPECT_EQ(plan->ranks[r].channels[0][0].kind, TransferKind::kLocalCopy) << "rank " << r;
    }
  }
}

// The rings and the direct AllReduce, like the direct ReduceScatter, list each rank's channels
// chunk-major: chunk k's transfers (and, out of place, its own contribution) all come before any
// of chunk k + 1's. (Validity at world 1 and 2 is TemplateProperty's.)
TEST(TemplatesTest, RingsAndDirectAllReduceListEachChannelChunkMajor) {
  for (const char* name :
       {"reducescatter.ring", "allreduce.rs_ag", "allgather.ring", "allreduce.direct"}) {
    for (int world : {3, 4}) {
      const int chunks = 3;
      absl::StatusOr<Plan> plan =
          BuildTemplate(name, Params(world, {int64_t{world} * chunks * 2}, chunks));
      ASSERT_TRUE(plan.ok()) << name << ": " << plan.status();
      for (int r = 0; r < world; ++r) {
        for (const std::vector<Transfer>& channel : plan->ranks[r].channels) {
          for (size_t i = 1; i < channel.size(); ++i) {
            EXPECT_LE(channel[i - 1].chunk % chunks, channel[i].chunk % chunks)
                << name << " world " << world << " rank " << r << " position " << i;
          }
        }
      }
    }
  }
}

// allreduce.direct: round d's reductions on channel d - 1, then the owner's pushes of each reduced
// chunk on channel W - 1 + d - 1, each waiting for exactly the W - 1 reductions into that chunk,
// at steps after the chunk's reductions.
TEST(TemplatesTest, AllReduceDirectGathersEachChunkOnceItsReductionsLanded) {
  const int world = 4, chunks = 2;
  absl::StatusOr<Plan> plan = BuildTemplate("allreduce.direct", Params(world, {16}, chunks));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<const Transfer*> by_id = plan->TransfersById();
  int pushes = 0;
  for (const Transfer* t : by_id) {
    const int d = (t->peer - t->rank + world) % world;
    if (t->reduce != ReduceOp::kNone) {
      EXPECT_EQ(t->channel, d - 1) << "transfer " << t->id;
      EXPECT_TRUE(t->deps.empty());
      EXPECT_TRUE(t->after_compute);
      continue;
    }
    ++pushes;
    EXPECT_EQ(t->channel, world - 1 + d - 1) << "transfer " << t->id;
    EXPECT_FALSE(t->after_compute);
    EXPECT_EQ(t->chunk / chunks, t->rank) << "the owner pushes its own shard";
    ASSERT_EQ(t->deps.size(), static_cast<size_t>(world - 1)) << "transfer " << t->id;
    std::set<int> from;
    for (int dep : t->deps) {
      const Transfer* rs = by_id[dep];
      EXPECT_EQ(rs->chunk, t->chunk);
      EXPECT_EQ(rs->peer, t->rank);
      EXPECT_LT(rs->step, t->step);
      from.insert(rs->rank);
    }
    EXPECT_EQ(from.size(), static_cast<size_t>(world - 1));
  }
  EXPECT_EQ(pushes, world * chunks * (world - 1));
}

TEST(TemplatesTest, AllReduceGatherWaitsForReduction) {
  absl::StatusOr<Plan> plan = BuildTemplate("allreduce.rs_ag", Params(4, {8}, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<const Transfer*> by_id = plan->TransfersById();
  int owner_sends = 0;
  for (const Transfer* t : by_id) {
    // AG phase (channel 1, steps from W-1 = 3), chunk k's hops at 3 + 3k + s: s = 0 is the
    // first hop out of the owner.
    if (t->channel != 1 || (t->step - 3) % 3 != 0) continue;
    ++owner_sends;
    EXPECT_FALSE(t->after_compute);  // its source is the reduction, not the computation
    ASSERT_EQ(t->deps.size(), 1u);
    const Transfer* rs = by_id[t->deps[0]];
    EXPECT_EQ(rs->reduce, ReduceOp::kSum);
    EXPECT_EQ(rs->peer, t->rank);
    EXPECT_EQ(rs->dst_region, t->src_region);
    EXPECT_LT(rs->step, t->step);  // chunk-major on both channels: the reduction sorts first
  }
  EXPECT_EQ(owner_sends, 8);
}

// allreduce.direct_out at the world sizes and chunk counts the fused ops use, split too: valid,
// every rank's "data" and "out" hold the reduction, and the channels drain.
TEST(TemplatesTest, AllReduceDirectOutValidAtEveryWorldAndChunkCount) {
  uint64_t seed = kSeed;
  for (int world : {1, 2, 3, 4, 8}) {
    for (int chunks : {1, 2, 4}) {
      TemplateParams p = Params(world, {int64_t{world} * chunks * 2 + 1, 3}, chunks);
      BuildAndCheck(Case{"allreduce.direct_out", p, seed++});
      if (HasFatalFailure()) return;
      absl::StatusOr<Plan> plan = BuildTemplate("allreduce.direct_out", p);
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_EQ(plan->FindBuffer("out")->shape, p.shape);
      EXPECT_EQ(plan->FindBuffer("out")->dtype, p.dtype);
      absl::StatusOr<Plan> split = SplitPlan(*plan, 2);
      ASSERT_TRUE(split.ok()) << split.status();
      absl::Status valid = ValidatePlan(*split);
      EXPECT_TRUE(valid.ok()) << "world " << world << " chunks " << chunks << ": " << valid;
    }
  }
}

// No peer ever addresses "out": only the rank's own LOCAL_COPYs from "data" touch it, one per
// chunk of the whole tensor, so the runtime may bind it to any memory per launch.
TEST(TemplatesTest, AllReduceDirectOutTouchesOutOnlyByOwnLocalCopies) {
  for (int world : {1, 2, 3, 4, 8}) {
    const int chunks = 2;
    absl::StatusOr<Plan> plan =
        BuildTemplate("allreduce.direct_out", Params(world, {int64_t{world} * chunks * 2}, chunks));
    ASSERT_TRUE(plan.ok()) << plan.status();
    std::map<int, int> copies;  // rank -> copies into its "out"
    for (const Transfer* t : plan->TransfersById()) {
      if (t->src_buffer != "out" && t->dst_buffer != "out") continue;
      EXPECT_EQ(t->kind, TransferKind::kLocalCopy) << "transfer " << t->id;
      EXPECT_EQ(t->peer, t->rank) << "transfer " << t->id;
      EXPECT_EQ(t->src_buffer, "data") << "transfer " << t->id;
      EXPECT_EQ(t->dst_buffer, "out") << "transfer " << t->id;
      EXPECT_EQ(t->src_region, t->dst_region) << "transfer " << t->id;
      EXPECT_EQ(t->reduce, ReduceOp::kNone) << "transfer " << t->id;
      ++copies[t->rank];
    }
    for (int r = 0; r < world; ++r) EXPECT_EQ(copies[r], world * chunks) << "rank " << r;
    for (const RankPlan& rp : plan->ranks) EXPECT_EQ(rp.initial.count("out"), 0u);
  }
}

// The copies of rank r sit on channels after the gather's, one per source, chunk-major: r's own
// chunks on channel 2(W-1), round d's (pushed from r - d) on 2(W-1) + d, so no copy waits behind
// one of another source. Each waits for exactly what makes its chunk final on r: the W-1
// reductions into an own chunk, the owner's push into r for a peer's.
TEST(TemplatesTest, AllReduceDirectOutCopiesEachSourceChunkMajorAfterTheChunkIsFinal) {
  for (int world : {1, 2, 3, 4, 8}) {
    for (int chunks : {1, 3}) {
      absl::StatusOr<Plan> plan = BuildTemplate(
          "allreduce.direct_out", Params(world, {int64_t{world} * chunks * 2}, chunks));
      ASSERT_TRUE(plan.ok()) << plan.status();
      const std::vector<const Transfer*> by_id = plan->TransfersById();
      const int first_copy_channel = 2 * std::max(1, world - 1);
      for (int r = 0; r < world; ++r) {
        SCOPED_TRACE(absl::StrCat("world ", world, " chunks ", chunks, " rank ", r));
        ASSERT_EQ(plan->ranks[r].channels.size(), static_cast<size_t>(first_copy_channel + world));
        for (int c = 0; c < first_copy_channel; ++c) {
          for (const Transfer& t : plan->ranks[r].channels[c]) EXPECT_NE(t.dst_buffer, "out");
        }
        for (int d = 0; d < world; ++d) {
          const std::vector<Transfer>& channel = plan->ranks[r].channels[first_copy_channel + d];
          ASSERT_EQ(channel.size(), static_cast<size_t>(chunks)) << "round " << d;
          const int owner = (r - d + world) % world;
          for (int k = 0; k < chunks; ++k) {
            SCOPED_TRACE(absl::StrCat("round ", d, " chunk ", k));
            const Transfer& t = channel[k];
            EXPECT_EQ(t.dst_buffer, "out");
            EXPECT_EQ(t.chunk, owner * chunks + k);
            if (d == 0) {
              EXPECT_EQ(t.deps.size(), static_cast<size_t>(world - 1));
              EXPECT_EQ(t.after_compute, world == 1);
              std::set<int> from;
              for (int dep : t.deps) {
                const Transfer* rs = by_id[dep];
                EXPECT_EQ(rs->reduce, ReduceOp::kSum);
                EXPECT_EQ(rs->peer, r);
                EXPECT_EQ(rs->chunk, t.chunk);
                EXPECT_EQ(rs->dst_region, t.src_region);
                from.insert(rs->rank);
              }
              EXPECT_EQ(from.size(), static_cast<size_t>(world - 1));
            } else {
              EXPECT_FALSE(t.after_compute);
              ASSERT_EQ(t.deps.size(), 1u);
              const Transfer* push = by_id[t.deps[0]];
              EXPECT_EQ(push->kind, TransferKind::kPush);
              EXPECT_EQ(push->reduce, ReduceOp::kNone);
              EXPECT_EQ(push->rank, owner);
              EXPECT_EQ(push->peer, r);
              EXPECT_EQ(push->chunk, t.chunk);
              EXPECT_EQ(push->dst_buffer, "data");
              EXPECT_EQ(push->dst_region, t.src_region);
            }
          }
        }
      }
    }
  }
}

// The dependencies are what makes the copies correct: dropping any one copy's lets it read the
// chunk while a reduction or the gather still lands in it, a race the validator reports.
TEST(TemplatesTest, AllReduceDirectOutCopyWithoutItsDepsIsInvalid) {
  const int world = 3, chunks = 2;
  absl::StatusOr<Plan> plan =
      BuildTemplate("allreduce.direct_out", Params(world, {int64_t{world} * chunks * 2}, chunks));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(ValidatePlan(*plan).ok());
  for (int r = 0; r < world; ++r) {
    for (int c = 2 * (world - 1); c < 3 * world - 2; ++c) {
      for (size_t i = 0; i < plan->ranks[r].channels[c].size(); ++i) {
        Plan broken = *plan;
        broken.ranks[r].channels[c][i].deps.clear();
        const absl::Status valid = ValidatePlan(broken);
        EXPECT_THAT(valid.message(), HasSubstr("race"))
            << "rank " << r << " channel " << c << " copy " << i;
      }
    }
  }
}

TEST(TemplatesTest, AllReduceSplitStaggersSubCollectives) {
  TemplateParams p = Params(2, {8}, 1);
  p.sub_collectives = 2;
  absl::StatusOr<Plan> plan = BuildTemplate("allreduce.split", p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Sub-collective 1's RS (channel 0, step 1) shares a step with sub-collective 0's AG.
  std::set<std::pair<int, int>> channel_step;
  for (const Transfer* t : plan->TransfersById()) channel_step.insert({t->channel, t->step});
  EXPECT_TRUE(channel_step.count({0, 1}) && channel_step.count({1, 1}));
  EXPECT_TRUE(ValidatePlan(*plan).ok());
}

TEST(TemplatesTest, AllToAllVariableLayout) {
  TemplateParams p = Params(2, {6, 3}, 1);
  p.splits = {{1, 3}, {0, 2}};
  absl::StatusOr<Plan> plan = BuildTemplate("alltoall.variable", p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->FindBuffer("recv")->shape, (Shape{5, 3}));  // max column sum: 3 + 2
  std::vector<std::string> got;
  for (const Expectation& e : plan->postcondition) {
    got.push_back(absl::StrCat(e.rank, ":", e.region.ToString(), "<-", e.sources[0].rank, ":",
                               e.sources[0].region.ToString()));
  }
  EXPECT_THAT(
      got, ::testing::UnorderedElementsAre("0:[0:1,0:3)<-0:[0:1,0:3)", "1:[0:3,0:3)<-0:[1:4,0:3)",
                                           "1:[3:5,0:3)<-1:[0:2,0:3)"));
  EXPECT_TRUE(ValidatePlan(*plan).ok());
}

TEST(TemplatesTest, ProducedByComputeSetsAfterCompute) {
  TemplateParams p = Params(4, {8}, 1);
  p.produced_by_compute = true;
  absl::StatusOr<Plan> plan = BuildTemplate("allgather.ring", p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const Transfer* t : plan->TransfersById()) EXPECT_EQ(t->after_compute, t->step == 0);
}

// Bad parameters: the message names the parameter.
struct BadCase {
  std::string name;
  TemplateParams params;
  std::string message;
};

std::vector<BadCase> BadCases() {
  std::vector<BadCase> cases;
  auto add = [&](std::string name, TemplateParams p, std::string msg) {
    cases.push_back({std::move(name), std::move(p), std::move(msg)});
  };
  add("allgather.spiral", Params(2, {4}),
      "unknown template 'allgather.spiral'; valid names: "
      "allgather.push, allgather.pull");
  add("allgather.ring", Params(0, {4}), "world_size 0 out of range 1..64");
  add("allgather.ring", Params(65, {130}), "world_size 65");
  add("allgather.ring", Params(2, {}), "shape must have rank >= 1");
  add("allgather.ring", Params(2, {4, 0}), "shape[1] = 0");
  TemplateParams axis = Params(2, {4, 4});
  axis.axis = 2;
  add("reducescatter.ring", axis, "axis 2 out of range");
  axis.axis = -1;
  add("allgather.push", axis, "axis -1 out of range");
  add("allgather.push", Params(2, {4}, 0), "chunks_per_shard 0 must be >= 1");
  add("allgather.push", Params(3, {8}, 3),
      "chunks_per_shard 3 exceeds the smallest shard extent 2");
  add("reducescatter.direct", Params(4, {7}, 2), "chunks_per_shard 2 exceeds");
  TemplateParams rpn = Params(6, {12});
  rpn.ranks_per_node = 4;
  add("allgather.two_level", rpn, "ranks_per_node 4 must be >= 1 and divide world_size 6");
  rpn.ranks_per_node = 0;
  add("allreduce.two_level", rpn, "ranks_per_node 0");
  TemplateParams none = Params(2, {4});
  none.op = ReduceOp::kNone;
  add("reducescatter.ring", none, "op must be a reduction");
  add("allreduce.rs_ag", none, "op must be a reduction");
  TemplateParams subs = Params(2, {8});
  subs.sub_collectives = 0;
  add("allreduce.split", subs, "sub_collectives 0 must be >= 1");
  subs.sub_collectives = 3;
  subs.chunks_per_shard = 2;
  add("allreduce.split", subs, "of sub_collectives 3");
  add("alltoall.uniform", Params(3, {8}), "shape[axis] = 8 must be divisible by world_size 3");
  add("alltoall.uniform", Params(2, {4}, 3), "chunks_per_shard 3 exceeds the block extent 2");
  TemplateParams split = Params(2, {4});
  split.splits = {{1, 1}};
  add("alltoall.uniform", split, "splits must be empty for alltoall.uniform");
  add("alltoall.variable", split, "splits has 1 rows, want world_size x world_size = 2 x 2");
  split.splits = {{1, 1}, {1}};
  add("alltoall.variable", split, "splits[1] has 1 entries, want world_size 2");
  split.splits = {{1, 1}, {1, -1}};
  add("alltoall.variable", split, "splits[1][1] = -1 is negative");
  split.splits = {{1, 1}, {3, 2}};
  add("alltoall.variable", split, "splits[1] sums to 5, more than shape[axis] = 4");
  TemplateParams pull = Params(2, {4});
  pull.produced_by_compute = true;
  add("allgather.pull", pull, "produced_by_compute");
  return cases;
}

TEST(TemplatesTest, BadParamsNameTheParameter) {
  for (const BadCase& c : BadCases()) {
    SCOPED_TRACE(c.name + ": " + c.message);
    absl::StatusOr<Plan> plan = BuildTemplate(c.name, c.params);
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(plan.status().message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace syncopate::plan
