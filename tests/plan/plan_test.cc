// Plan model: names, buffers, id lookup, canonical encoding, hash, and the timeline rendering.
#include "core/plan/plan.h"

#include <functional>

#include "core/base/sha256.h"
#include "core/plan/timeline.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/plan/hand_plans.h"

namespace syncopate::plan {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace ::syncopate::plan::testing;  // NOLINT: test helpers

TEST(PlanTest, DTypes) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI32, DType::kI64,
                  DType::kI8, DType::kU8}) {
    absl::StatusOr<DType> parsed = ParseDType(DTypeName(d));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, d);
    EXPECT_GT(DTypeSize(d), 0);
  }
  EXPECT_EQ(DTypeSize(DType::kBF16), 2);
  EXPECT_EQ(std::string(DTypeName(DType::kBF16)), "bf16");
  absl::StatusOr<DType> bad = ParseDType("f128");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("f128"));
}

TEST(PlanTest, EnumNames) {
  EXPECT_EQ(std::string(TransferKindName(TransferKind::kLocalCopy)), "local_copy");
  EXPECT_EQ(std::string(ReduceOpName(ReduceOp::kMax)), "max");
  EXPECT_EQ(std::string(CollectiveKindName(CollectiveKind::kReduceScatter)), "reducescatter");
}

TEST(PlanTest, MakeBufferAndLookups) {
  BufferSpec b = MakeBuffer("x", DType::kF16, {2, 3, 4});
  EXPECT_EQ(b.strides, (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(b.NumElements(), 24);
  Plan plan = RingAllGather(3);
  EXPECT_EQ(plan.NumTransfers(), 6);
  ASSERT_NE(plan.FindBuffer("data"), nullptr);
  EXPECT_EQ(plan.FindBuffer("nope"), nullptr);
  std::vector<const Transfer*> by_id = plan.TransfersById();
  ASSERT_EQ(by_id.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(by_id[i]->id, i);
  Transfer pull;
  pull.kind = TransferKind::kPull;
  pull.rank = 1;
  pull.peer = 0;
  EXPECT_EQ(pull.src_rank(), 0);
  EXPECT_EQ(pull.dst_rank(), 1);
}

TEST(PlanTest, CanonicalEncodingIsVersionedAndDeterministic) {
  const Plan plan = DirectReduceScatter(3);
  const std::string enc = CanonicalEncoding(plan);
  EXPECT_THAT(enc, StartsWith("syncopate-plan v1\n"));
  EXPECT_THAT(enc, HasSubstr("buffer \"input\" dtype f32 shape 6,4 strides 4,1\n"));
  EXPECT_THAT(enc, HasSubstr("reduce sum"));
  EXPECT_EQ(enc, CanonicalEncoding(DirectReduceScatter(3)));
  EXPECT_EQ(PlanHash(plan), PlanHash(DirectReduceScatter(3)));
  EXPECT_EQ(PlanHash(plan).size(), 64u);
}

TEST(PlanTest, HashIsStableAcrossBuilds) {
  // Pinned: the hash is part of kernel-cache keys and plan agreement between machines. A change
  // here means the encoding changed: bump the version line and update the value.
  Plan plan;
  plan.name = "tiny";
  plan.world_size = 1;
  plan.buffers.push_back(MakeBuffer("a", DType::kF32, {2}));
  plan.ranks.resize(1);
  plan.ranks[0].initial["a"] = Region::Whole({2});
  EXPECT_EQ(CanonicalEncoding(plan),
            "syncopate-plan v1\nname \"tiny\"\ncollective custom\nworld_size 1\nbuffers 1\n"
            "buffer \"a\" dtype f32 shape 2 strides 1\nranks 1\nrank 0 channels 0 initial 1\n"
            "initial \"a\" [0:2)\npostcondition 0\nend\n");
  EXPECT_EQ(PlanHash(plan), Sha256Hex(CanonicalEncoding(plan)));
  EXPECT_EQ(PlanHash(plan), "d1a0bd629ab95097029358c43efec5d75b1d275dd26f134735c48bd4b852862f");
}

TEST(PlanTest, HashChangesWithEveryField) {
  const Plan base = RingAllGather(3);
  const std::string h = PlanHash(base);
  std::vector<std::pair<std::string, std::function<void(Plan&)>>> edits = {
      {"name", [](Plan& p) { p.name += "x"; }},
      {"collective", [](Plan& p) { p.collective = CollectiveKind::kCustom; }},
      {"world_size", [](Plan& p) { p.world_size = 4; }},
      {"buffer name", [](Plan& p) { p.buffers[0].name = "d"; }},
      {"dtype", [](Plan& p) { p.buffers[0].dtype = DType::kBF16; }},
      {"shape", [](Plan& p) { p.buffers[0].shape[1] = 5; }},
      {"strides", [](Plan& p) { p.buffers[0].strides[0] = 5; }},
      {"initial",
       [](Plan& p) {
         p.ranks[0].initial["data"] = Region::Whole({6, 4});
       }},
      {"kind", [](Plan& p) { p.ranks[0].channels[0][0].kind = TransferKind::kPull; }},
      {"rank", [](Plan& p) { p.ranks[0].channels[0][0].rank = 2; }},
      {"channel", [](Plan& p) { p.ranks[0].channels[0][0].channel = 1; }},
      {"peer", [](Plan& p) { p.ranks[0].channels[0][0].peer = 2; }},
      {"id", [](Plan& p) { p.ranks[0].channels[0][0].id = 9; }},
      {"src_buffer", [](Plan& p) { p.ranks[0].channels[0][0].src_buffer = "y"; }},
      {"src_region", [](Plan& p) { p.ranks[0].channels[0][0].src_region = Shard(3, 1); }},
      {"dst_buffer", [](Plan& p) { p.ranks[0].channels[0][0].dst_buffer = "y"; }},
      {"dst_region", [](Plan& p) { p.ranks[0].channels[0][0].dst_region = Shard(3, 1); }},
      {"chunk", [](Plan& p) { p.ranks[0].channels[0][0].chunk = 7; }},
      {"step", [](Plan& p) { p.ranks[0].channels[0][0].step = 7; }},
      {"reduce", [](Plan& p) { p.ranks[0].channels[0][0].reduce = ReduceOp::kSum; }},
      {"deps", [](Plan& p) { p.ranks[0].channels[0][1].deps.push_back(1); }},
      {"after_compute", [](Plan& p) { p.ranks[0].channels[0][0].after_compute = true; }},
      {"signal", [](Plan& p) { p.ranks[0].channels[0][0].signal = 7; }},
      {"channel order",
       [](Plan& p) { std::swap(p.ranks[0].channels[0][0], p.ranks[0].channels[0][1]); }},
      {"expect rank", [](Plan& p) { p.postcondition[0].rank = 2; }},
      {"expect buffer", [](Plan& p) { p.postcondition[0].buffer = "y"; }},
      {"expect region", [](Plan& p) { p.postcondition[0].region = Shard(3, 2); }},
      {"expect op", [](Plan& p) { p.postcondition[0].op = ReduceOp::kMax; }},
      {"source rank", [](Plan& p) { p.postcondition[0].sources[0].rank = 2; }},
      {"source buffer", [](Plan& p) { p.postcondition[0].sources[0].buffer = "y"; }},
      {"source region", [](Plan& p) { p.postcondition[0].sources[0].region = Shard(3, 2); }},
      {"extra source",
       [](Plan& p) {
         p.postcondition[0].sources.push_back({1, "data", {}});
       }},
  };
  for (auto& [what, edit] : edits) {
    Plan p = base;
    edit(p);
    EXPECT_NE(PlanHash(p), h) << what;
  }
}

TEST(PlanTest, EncodingEscapesNames) {
  Plan a = DirectAllGather(2);
  Plan b = a;
  a.name = "x\" y";
  b.name = "x\\\" y";
  EXPECT_NE(CanonicalEncoding(a), CanonicalEncoding(b));
  EXPECT_THAT(CanonicalEncoding(a), HasSubstr("name \"x\\\" y\"\n"));
}

TEST(TimelineTest, RendersStepsAndTransfers) {
  const Plan plan = RingAllGather(3);
  const std::string text = RenderTimeline(plan);
  EXPECT_THAT(text, StartsWith("plan allgather.hand_ring  collective allgather  world 3  hash " +
                               PlanHash(plan).substr(0, 12) + "\n"));
  EXPECT_THAT(text, HasSubstr("buffer data f32 [6,4]\n"));
  EXPECT_THAT(text, HasSubstr("initial r1 data[2:4,0:4)\n"));
  EXPECT_THAT(text, HasSubstr("step 0\n  t0 r0 ch0 push chunk 0 data[0:2,0:4) -> r1 "
                              "data[0:2,0:4) sig 0\n"));
  EXPECT_THAT(text, HasSubstr("step 1\n  t3 r0 ch0 push chunk 2 data[4:6,0:4) -> r1 "
                              "data[4:6,0:4) after t2 sig 2\n"));
  EXPECT_THAT(text, HasSubstr("postcondition 9 expectations\n"));
  EXPECT_EQ(text, RenderTimeline(RingAllGather(3)));
}

TEST(TimelineTest, PullReduceAndAbbreviation) {
  Plan plan = DirectReduceScatter(2);
  Transfer& t = plan.ranks[1].channels[0][1];
  t.kind = TransferKind::kPull;  // rank 1 pulls rank 0's input slab into its own output
  t.after_compute = true;
  const std::string text = RenderTimeline(plan);
  EXPECT_THAT(text, HasSubstr("t3 r1 ch0 pull chunk 0 r0 input[0:2,0:4) -> output[0:2,0:4) sum "
                              "after compute sig 1"));
  EXPECT_THAT(text, HasSubstr("local_copy"));
  Region many({Box{{0}, {1}}, Box{{2}, {3}}, Box{{4}, {5}}, Box{{6}, {7}}});
  plan.ranks[0].initial["input"] = many;
  EXPECT_THAT(RenderTimeline(plan), HasSubstr("input[0:1)+... (4 boxes, 4 elements)"));
}

}  // namespace
}  // namespace syncopate::plan
