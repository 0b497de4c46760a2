// The copy-engine program built from template plans: copies land in the right rank's buffer and
// cover exactly the transfer's bytes, every peer write is guarded by the peer's "entered" word,
// signals go to the destination rank, reductions are refused; with a node map, transfers between
// nodes are left to the host proxy. No GPU (LABEL unit).
#include "runtime/cuda/copy_program.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/plan/templates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/template_plan.h"

namespace syncopate::cuda {
namespace {

using ::syncopate::testing::TemplatePlan;
using ::testing::HasSubstr;

constexpr uint64_t kSpan = 1ull << 32;
uint64_t Base(int rank) { return (static_cast<uint64_t>(rank) + 1) * kSpan; }

BufferAddressFn Addresses() {
  return [](const std::string& buffer, int rank) -> absl::StatusOr<uint64_t> {
    return Base(rank) + (buffer == "data" || buffer == "input" ? 0 : kSpan / 2);
  };
}

struct Case {
  std::string name;
  int world;
  int chunks;
  plan::Shape shape;
};

class AllGatherProgramTest : public ::testing::TestWithParam<Case> {};

TEST_P(AllGatherProgramTest, CopiesGuardsAndSignalsMatchThePlan) {
  const Case& c = GetParam();
  plan::TemplateParams tp;
  tp.world_size = c.world;
  tp.shape = c.shape;
  tp.dtype = plan::DType::kBF16;
  tp.chunks_per_shard = c.chunks;
  absl::StatusOr<plan::Plan> p = plan::BuildTemplate(c.name, tp);
  ASSERT_TRUE(p.ok()) << p.status();
  const std::vector<const plan::Transfer*> by_id = p->TransfersById();
  for (int r = 0; r < c.world; ++r) {
    absl::StatusOr<CopyProgram> prog = BuildCopyProgram(*p, r, Addresses());
    ASSERT_TRUE(prog.ok()) << prog.status();
    size_t expected_steps = 0;
    for (const auto& ch : p->ranks[r].channels) expected_steps += ch.size();
    ASSERT_EQ(prog->steps.size(), expected_steps);
    std::set<std::pair<int, int>> guarded;  // (channel, peer) seen so far
    for (const CopyStep& s : prog->steps) {
      const plan::Transfer& t = *by_id[s.transfer];
      EXPECT_EQ(t.rank, r);
      const int src = t.src_rank(), dst = t.dst_rank();
      uint64_t bytes = 0;
      for (const Copy2D& cp : s.copies) {
        EXPECT_GE(cp.src, Base(src));
        EXPECT_LT(cp.src + (cp.rows - 1) * cp.src_pitch + cp.row_bytes, Base(src) + kSpan);
        EXPECT_GE(cp.dst, Base(dst));
        EXPECT_LT(cp.dst + (cp.rows - 1) * cp.dst_pitch + cp.row_bytes, Base(dst) + kSpan);
        bytes += cp.row_bytes * cp.rows;
      }
      EXPECT_EQ(bytes, static_cast<uint64_t>(t.dst_region.NumElements()) * 2) << t.id;
      EXPECT_EQ(s.signal_rank, dst);
      EXPECT_EQ(s.signal, t.signal);
      // Before its first copy to / from a peer on a channel, a step waits for the peer's entry.
      if (t.peer != r && guarded.insert({s.channel, t.peer}).second) {
        EXPECT_THAT(s.waits, ::testing::Contains(WordWait{WaitKind::kEntered, r, t.peer}))
            << "transfer " << t.id;
      }
      // Dependencies delivered to this rank become waits on its own signal words.
      for (int d : t.deps) {
        const plan::Transfer& dep = *by_id[d];
        if (dep.rank != r && dep.dst_rank() == r) {
          EXPECT_THAT(s.waits, ::testing::Contains(WordWait{WaitKind::kSignal, r, dep.signal}));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Templates, AllGatherProgramTest,
    ::testing::Values(Case{"allgather.push", 2, 1, {8, 6}}, Case{"allgather.push", 3, 2, {10, 6}},
                      Case{"allgather.push", 4, 8, {37, 5}}, Case{"allgather.pull", 3, 3, {11, 4}},
                      Case{"allgather.ring", 4, 2, {16, 3}}, Case{"allgather.push", 3, 2, {7, 9, 5}}),
    [](const auto& info) {
      std::string n = absl::StrCat(info.param.name, "_w", info.param.world, "_c", info.param.chunks,
                                   "_r", info.param.shape.size());
      for (char& ch : n) if (ch == '.') ch = '_';
      return n;
    });

TEST(CopyProgramTest, PullProgramsTellTheSourceWhenDrained) {
  absl::StatusOr<plan::Plan> p = TemplatePlan("allgather.pull", 3, {9, 4});
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<CopyProgram> prog = BuildCopyProgram(*p, 1, Addresses());
  ASSERT_TRUE(prog.ok()) << prog.status();
  for (const CopyStep& s : prog->steps) EXPECT_GE(s.drained_rank, 0);
  EXPECT_THAT(prog->pulled_by, ::testing::ElementsAre(0, 2));
}

TEST(CopyProgramTest, ReductionsNeedAnotherBackend) {
  absl::StatusOr<plan::Plan> p = TemplatePlan("reducescatter.ring", 2, {8, 4});
  ASSERT_TRUE(p.ok()) << p.status();
  absl::Status s = BuildCopyProgram(*p, 0, Addresses()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(s.message(), HasSubstr("SM"));
}

TEST(CopyProgramTest, AfterComputeTransfersWaitForChunkReady) {
  absl::StatusOr<plan::Plan> p = TemplatePlan("allgather.push", 2, {8, 4});
  ASSERT_TRUE(p.ok()) << p.status();
  for (auto& ch : p->ranks[0].channels)
    for (plan::Transfer& t : ch) t.after_compute = true;
  absl::StatusOr<CopyProgram> prog =
      BuildCopyProgram(*p, 0, Addresses(), [](int t) -> absl::StatusOr<int> { return 40 + t; });
  ASSERT_TRUE(prog.ok()) << prog.status();
  for (const CopyStep& s : prog->steps) {
    EXPECT_THAT(s.waits, ::testing::Contains(WordWait{WaitKind::kChunkReady, 0, 40 + s.transfer}));
  }
}

TEST(CopyProgramTest, InterNodeTransfersAreLeftToTheProxy) {
  plan::TemplateParams tp;
  tp.world_size = 4;
  tp.ranks_per_node = 2;
  tp.shape = {16, 4};
  tp.chunks_per_shard = 2;
  tp.produced_by_compute = true;
  absl::StatusOr<plan::Plan> p = plan::BuildTemplate("allgather.two_level", tp);
  ASSERT_TRUE(p.ok()) << p.status();
  const std::vector<int> nodes = {0, 0, 1, 1};
  const std::vector<const plan::Transfer*> by_id = p->TransfersById();
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    absl::StatusOr<CopyProgram> prog = BuildCopyProgram(*p, r, Addresses(), {}, nodes);
    ASSERT_TRUE(prog.ok()) << prog.status();
    std::set<int> want, got;
    for (const auto& ch : p->ranks[r].channels) {
      for (const plan::Transfer& t : ch) {
        if (nodes[t.src_rank()] == nodes[t.dst_rank()]) want.insert(t.id);
      }
    }
    for (const CopyStep& s : prog->steps) {
      got.insert(s.transfer);
      for (const WordWait& w : s.waits) {
        // No word of the other node: neither its signals nor its "entered".
        if (w.kind == WaitKind::kPeerSignal) {
          EXPECT_EQ(nodes[w.rank], nodes[r]);
        }
        if (w.kind == WaitKind::kEntered) {
          EXPECT_EQ(nodes[w.index], nodes[r]);
        }
      }
      // Level-1 forwards wait for the inter-node arrival on this rank's own signal word.
      for (int d : by_id[s.transfer]->deps) {
        EXPECT_THAT(s.waits, ::testing::Contains(WordWait{WaitKind::kSignal, r, by_id[d]->signal}));
      }
    }
    EXPECT_EQ(got, want);
    // Per chunk: the push to the rank-mate and the forward of what came from the other node;
    // the push to the other node is the proxy's. Without a map it is a step too.
    EXPECT_EQ(prog->steps.size(), 2u * 2u);
    absl::StatusOr<CopyProgram> all = BuildCopyProgram(*p, r, Addresses());
    ASSERT_TRUE(all.ok()) << all.status();
    EXPECT_EQ(all->steps.size(), 3u * 2u);
  }
}

TEST(CopyProgramTest, NodeMapErrors) {
  absl::StatusOr<plan::Plan> p = TemplatePlan("allgather.ring", 4, {16, 4});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(BuildCopyProgram(*p, 0, Addresses(), {}, {0, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildCopyProgram(*p, 0, Addresses(), {}, {0, 0, -2, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Rank 1's ring forwards depend on hops 0 -> 1, which land on rank 1: fine even when they
  // cross nodes (the proxy sets rank 1's signal). A dependency landing on another node is not.
  ASSERT_TRUE(BuildCopyProgram(*p, 1, Addresses(), {}, {0, 1, 1, 1}).ok());
  plan::Plan bad = *p;
  plan::Transfer* fwd = nullptr;
  for (plan::Transfer& t : bad.ranks[0].channels[0]) {  // 0 -> 1 stays on node 0
    if (!t.deps.empty()) {
      fwd = &t;
      break;
    }
  }
  ASSERT_NE(fwd, nullptr);
  int to_rank3 = -1;
  for (const plan::Transfer* t : bad.TransfersById()) {
    if (t->dst_rank() == 3) to_rank3 = t->id;
  }
  ASSERT_GE(to_rank3, 0);
  fwd->deps = {to_rank3};
  absl::Status s = BuildCopyProgram(bad, 0, Addresses(), {}, {0, 0, 1, 1}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("transfer ", fwd->id,
                                                  " (rank 0 on node 0) depends on transfer ",
                                                  to_rank3)));
  // The proxy moves plain pushes only: an inter-node reduction is refused, not dropped.
  absl::StatusOr<plan::Plan> push = TemplatePlan("allgather.push", 4, {16, 4});
  ASSERT_TRUE(push.ok()) << push.status();
  for (plan::Transfer& t : push->ranks[0].channels[0]) {
    if (t.peer == 2) t.reduce = plan::ReduceOp::kSum;
  }
  s = BuildCopyProgram(*push, 0, Addresses(), {}, {0, 0, 1, 1}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(s.message(), HasSubstr("crosses from node 0 to node 1; the host proxy"));
}

TEST(CopyProgramTest, RankOutOfRange) {
  absl::StatusOr<plan::Plan> p = TemplatePlan("allgather.push", 2, {8, 4});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(BuildCopyProgram(*p, 2, Addresses()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace syncopate::cuda
