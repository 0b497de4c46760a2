// plan::Plan <-> syncopate.v1.Plan: every template round-trips exactly (same plan, same hash,
// also through the binary wire form), template requests round-trip, and FromProto rejects
// structurally broken messages with an error naming the field path.
#include "core/plan_io/plan_proto.h"

#include <functional>
#include <string>

#include "core/plan/templates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/template_cases.h"
#include "tests/testing/template_plan.h"

namespace syncopate::plan_io {
namespace {

using ::syncopate::testing::TemplatePlan;
using ::testing::HasSubstr;

plan::Plan Template(const std::string& name, int world, uint64_t seed = 1) {
  auto built = plan::BuildTemplate(name, plan::testing::RandomCase(name, world, seed).params);
  EXPECT_TRUE(built.ok()) << name << ": " << built.status();
  return built.ok() ? *built : plan::Plan{};
}

class RoundTripTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTripTest, PlanSurvivesProtoAndWire) {
  for (int world : {1, 3, 4}) {
    for (uint64_t seed : {1, 2}) {
      plan::Plan plan = Template(GetParam(), world, seed);
      v1::Plan proto = ToProto(plan);
      EXPECT_EQ(proto.format_version(), kPlanFormatVersion);
      auto back = FromProto(proto);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_TRUE(*back == plan) << GetParam() << " world " << world;
      EXPECT_EQ(plan::PlanHash(*back), plan::PlanHash(plan));

      std::string wire;
      ASSERT_TRUE(proto.SerializeToString(&wire));
      v1::Plan parsed;
      ASSERT_TRUE(parsed.ParseFromString(wire));
      auto from_wire = FromProto(parsed);
      ASSERT_TRUE(from_wire.ok()) << from_wire.status();
      EXPECT_EQ(plan::PlanHash(*from_wire), plan::PlanHash(plan));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Templates, RoundTripTest, ::testing::ValuesIn(plan::TemplateNames()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '.' ? '_' : c;
                           return name;
                         });

TEST(PlanProtoTest, MatchingPlanHashIsAccepted) {
  plan::Plan plan = Template("allgather.ring", 3);
  v1::Plan proto = ToProto(plan);
  proto.set_plan_hash(plan::PlanHash(plan));
  EXPECT_TRUE(FromProto(proto).ok());
}

TEST(PlanProtoTest, TemplateRequestRoundTrip) {
  TemplateRequest request;
  request.name = "alltoall.variable";
  request.params.world_size = 2;
  request.params.shape = {8, 4};
  request.params.dtype = plan::DType::kF16;
  request.params.axis = 0;
  request.params.chunks_per_shard = 2;
  request.params.op = plan::ReduceOp::kMax;
  request.params.ranks_per_node = 1;
  request.params.sub_collectives = 3;
  request.params.splits = {{3, 1}, {2, 2}};
  request.split = 2;
  auto back = FromProto(ToProto(request));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->name, request.name);
  EXPECT_EQ(back->split, 2);
  const plan::TemplateParams& p = back->params;
  EXPECT_EQ(p.world_size, 2);
  EXPECT_EQ(p.shape, request.params.shape);
  EXPECT_EQ(p.dtype, plan::DType::kF16);
  EXPECT_EQ(p.chunks_per_shard, 2);
  EXPECT_EQ(p.op, plan::ReduceOp::kMax);
  EXPECT_EQ(p.ranks_per_node, 1);
  EXPECT_EQ(p.sub_collectives, 3);
  EXPECT_EQ(p.splits, request.params.splits);
}

TEST(PlanProtoTest, TemplateRequestDefaultsAndBuild) {
  v1::TemplateRequest proto;
  proto.set_template_name("allgather.ring");
  proto.set_world_size(4);
  proto.add_shape(16);
  proto.add_shape(8);
  proto.set_dtype(v1::DTYPE_BF16);
  auto request = FromProto(proto);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->params.chunks_per_shard, 1);
  EXPECT_EQ(request->params.sub_collectives, 1);
  EXPECT_EQ(request->params.op, plan::ReduceOp::kSum);
  auto plan = BuildTemplateRequest(*request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->name, "allgather.ring");

  proto.set_split(2);
  auto split = BuildTemplateRequest(*FromProto(proto));
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->NumTransfers(), 2 * plan->NumTransfers());
}

TEST(PlanProtoTest, TemplateRequestErrors) {
  auto error = [](const std::function<void(v1::TemplateRequest&)>& mutate) {
    v1::TemplateRequest proto;
    proto.set_template_name("allgather.ring");
    proto.set_world_size(4);
    proto.add_shape(16);
    proto.set_dtype(v1::DTYPE_BF16);
    mutate(proto);
    auto result = FromProto(proto);
    EXPECT_FALSE(result.ok());
    return std::string(result.status().message());
  };
  EXPECT_EQ(error([](auto& p) { p.clear_template_name(); }), "template_name: missing");
  EXPECT_EQ(error([](auto& p) { p.set_world_size(0); }), "world_size: must be >= 1, got 0");
  EXPECT_EQ(error([](auto& p) { p.clear_shape(); }), "shape: missing");
  EXPECT_EQ(error([](auto& p) { p.set_shape(0, -2); }), "shape[0]: negative extent -2");
  EXPECT_EQ(error([](auto& p) { p.clear_dtype(); }), "dtype: missing (DTYPE_UNSPECIFIED)");
  EXPECT_EQ(error([](auto& p) { p.set_chunks_per_shard(0); }),
            "chunks_per_shard: must be >= 1, got 0");
  EXPECT_EQ(error([](auto& p) { p.add_splits()->add_rows(-1); }),
            "splits[0].rows[0]: negative row count -1");
  EXPECT_EQ(error([](auto& p) { p.set_split(-3); }), "split: must be >= 0, got -3");
}

// FromProto errors: one mutation of a valid 3-rank ring allgather each, and the message expected.
struct ErrorCase {
  std::string label;
  std::function<void(v1::Plan&)> mutate;
  std::string message;
};

v1::Transfer& T(v1::Plan& p, int rank, int channel, int i) {
  return *p.mutable_ranks(rank)->mutable_channels(channel)->mutable_transfers(i);
}

TEST(PlanProtoTest, FromProtoErrorsNameTheField) {
  const std::vector<ErrorCase> cases = {
      {"box axes",
       [](v1::Plan& p) { T(p, 2, 0, 1).mutable_dst_region()->mutable_boxes(0)->add_hi(1); },
       "ranks[2].channels[0].transfers[1].dst_region.boxes[0]: lo has 2 axes, hi has 3"},
      {"missing id", [](v1::Plan& p) { T(p, 1, 0, 0).clear_id(); },
       "ranks[1].channels[0].transfers[0].id: missing"},
      {"negative id", [](v1::Plan& p) { T(p, 1, 0, 0).set_id(-4); },
       "ranks[1].channels[0].transfers[0].id: must be >= 0, got -4"},
      {"missing peer", [](v1::Plan& p) { T(p, 0, 0, 1).clear_peer(); },
       "ranks[0].channels[0].transfers[1].peer: missing (required for push)"},
      {"negative peer", [](v1::Plan& p) { T(p, 0, 0, 1).set_peer(-1); },
       "ranks[0].channels[0].transfers[1].peer: must be >= 0, got -1"},
      {"kind", [](v1::Plan& p) { T(p, 0, 0, 0).clear_kind(); },
       "ranks[0].channels[0].transfers[0].kind: missing (TRANSFER_KIND_UNSPECIFIED)"},
      {"unknown kind",
       [](v1::Plan& p) { T(p, 0, 0, 0).set_kind(static_cast<v1::TransferKind>(9)); },
       "ranks[0].channels[0].transfers[0].kind: unknown value 9"},
      {"src buffer", [](v1::Plan& p) { T(p, 0, 0, 0).clear_src_buffer(); },
       "ranks[0].channels[0].transfers[0].src_buffer: missing"},
      {"src region", [](v1::Plan& p) { T(p, 0, 0, 0).clear_src_region(); },
       "ranks[0].channels[0].transfers[0].src_region: missing"},
      {"negative lo",
       [](v1::Plan& p) { T(p, 0, 0, 0).mutable_src_region()->mutable_boxes(0)->set_lo(1, -2); },
       "ranks[0].channels[0].transfers[0].src_region.boxes[0]: lo[1] is negative (-2)"},
      {"hi below lo",
       [](v1::Plan& p) { T(p, 1, 0, 0).mutable_src_region()->mutable_boxes(0)->set_hi(0, 1); },
       "ranks[1].channels[0].transfers[0].src_region.boxes[0]: hi[0] = 1 is below lo[0] = 2"},
      {"negative dep", [](v1::Plan& p) { T(p, 0, 0, 1).set_deps(0, -1); },
       "ranks[0].channels[0].transfers[1].deps[0]: must be >= 0, got -1"},
      {"negative signal", [](v1::Plan& p) { T(p, 0, 0, 1).set_signal(-2); },
       "ranks[0].channels[0].transfers[1].signal: must be >= 0, got -2"},
      {"reduce op", [](v1::Plan& p) { T(p, 0, 0, 1).set_reduce(static_cast<v1::ReduceOp>(7)); },
       "ranks[0].channels[0].transfers[1].reduce: unknown reduce op value 7"},
      {"rank index", [](v1::Plan& p) { p.mutable_ranks(1)->set_rank(2); },
       "ranks[1].rank: is 2 but the entry is at index 1"},
      {"initial twice",
       [](v1::Plan& p) { *p.mutable_ranks(0)->add_initial() = p.ranks(0).initial(0); },
       "ranks[0].initial[1].buffer: \"data\" appears twice"},
      {"initial region",
       [](v1::Plan& p) { p.mutable_ranks(0)->mutable_initial(0)->clear_region(); },
       "ranks[0].initial[0].region: missing"},
      {"world size", [](v1::Plan& p) { p.set_world_size(0); }, "world_size: must be >= 1, got 0"},
      {"rank count", [](v1::Plan& p) { p.set_world_size(4); },
       "ranks: has 3 entries, world_size is 4"},
      {"collective", [](v1::Plan& p) { p.clear_collective(); },
       "collective: missing (COLLECTIVE_KIND_UNSPECIFIED; use COLLECTIVE_KIND_CUSTOM)"},
      {"version", [](v1::Plan& p) { p.set_format_version(2); },
       "format_version: 2 is newer than this build reads (1)"},
      {"buffer name", [](v1::Plan& p) { p.mutable_buffers(0)->clear_name(); },
       "buffers[0].name: missing"},
      {"buffer dtype", [](v1::Plan& p) { p.mutable_buffers(0)->clear_dtype(); },
       "buffers[0].dtype: missing (DTYPE_UNSPECIFIED)"},
      {"buffer shape", [](v1::Plan& p) { p.mutable_buffers(0)->set_shape(1, -1); },
       "buffers[0].shape[1]: negative extent -1"},
      {"buffer strides", [](v1::Plan& p) { p.mutable_buffers(0)->add_strides(1); },
       "buffers[0].strides: has 3 entries, shape has 2"},
      {"buffer twice", [](v1::Plan& p) { *p.add_buffers() = p.buffers(0); },
       "buffers[1].name: \"data\" appears twice"},
      {"expectation sources", [](v1::Plan& p) { p.mutable_postcondition(4)->clear_sources(); },
       "postcondition[4].sources: missing"},
      {"contribution buffer",
       [](v1::Plan& p) { p.mutable_postcondition(4)->mutable_sources(0)->clear_buffer(); },
       "postcondition[4].sources[0].buffer: missing"},
      {"expectation rank", [](v1::Plan& p) { p.mutable_postcondition(2)->set_rank(-1); },
       "postcondition[2].rank: must be >= 0, got -1"},
      {"hash", [](v1::Plan& p) { p.set_plan_hash("abc"); },
       "plan_hash: is abc but the plan hashes to "},
  };
  auto plan = TemplatePlan("allgather.ring", 3, {6, 4});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const v1::Plan good = ToProto(*plan);
  // The mutations above assume two transfers per rank on channel 0, the second with a dep.
  ASSERT_EQ(good.ranks(2).channels(0).transfers_size(), 2);
  ASSERT_EQ(good.ranks(0).channels(0).transfers(1).deps_size(), 1);
  for (const ErrorCase& c : cases) {
    v1::Plan proto = good;
    c.mutate(proto);
    auto result = FromProto(proto);
    ASSERT_FALSE(result.ok()) << c.label;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << c.label;
    EXPECT_THAT(result.status().message(), HasSubstr(c.message)) << c.label;
  }
}

TEST(PlanProtoTest, LocalCopyPeerDefaultsToRank) {
  plan::Plan plan = Template("reducescatter.ring", 3);
  v1::Plan proto = ToProto(plan);
  bool found = false;
  for (auto& rank : *proto.mutable_ranks()) {
    for (auto& channel : *rank.mutable_channels()) {
      for (auto& t : *channel.mutable_transfers()) {
        if (t.kind() == v1::TRANSFER_KIND_LOCAL_COPY) {
          t.clear_peer();
          found = true;
        }
      }
    }
  }
  auto back = FromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  if (found) {
    EXPECT_TRUE(*back == plan);
  }
}

}  // namespace
}  // namespace syncopate::plan_io
