// MSCCL XML import: the hand-written algorithms in tests/data/msccl validate and simulate, their
// structure follows the documented mapping, and malformed input is rejected with an error that
// names the element and line. Also covers the small XML reader the importer uses.
#include "core/plan/msccl_import.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/plan/simulate.h"
#include "core/plan/validate.h"
#include "core/plan/xml_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::plan {
namespace {

using ::testing::HasSubstr;

std::string DataPath(const std::string& name) {
  return (std::filesystem::path(SYNCOPATE_SOURCE_DIR) / "tests" / "data" / "msccl" / name).string();
}

std::string ReadData(const std::string& name) {
  std::ifstream in(DataPath(name));
  EXPECT_TRUE(in.good()) << DataPath(name);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

absl::StatusOr<Plan> ImportFile(const std::string& name, Shape shape = {48, 8}) {
  return ImportMscclXml(ReadData(name), ImportOptions{std::move(shape), DType::kF32});
}

int Count(const Plan& plan, TransferKind kind, ReduceOp reduce) {
  int n = 0;
  for (const Transfer* t : plan.TransfersById()) n += t->kind == kind && t->reduce == reduce;
  return n;
}

class MscclFileTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MscclFileTest, ImportsValidatesAndSimulates) {
  for (Shape shape : {Shape{48, 8}, Shape{}}) {
    auto plan = ImportFile(GetParam(), shape);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(ValidatePlan(*plan).ok()) << ValidatePlan(*plan);
    for (uint64_t seed : {1, 2, 3}) {
      SimulationOptions options;
      options.seed = seed;
      auto report = SimulatePlan(*plan, options);
      EXPECT_TRUE(report.ok()) << "seed " << seed << ": " << report.status();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Files, MscclFileTest,
                         ::testing::Values("allgather_ring_4.xml", "allreduce_2.xml",
                                           "allgather_direct_3.xml", "reduce_scatter_ring_3.xml",
                                           "alltoall_3.xml"),
                         [](const auto& info) {
                           return info.param.substr(0, info.param.find('.'));
                         });

TEST(MscclImportTest, RingAllGatherInPlaceUsesDataBuffer) {
  auto plan = ImportFile("allgather_ring_4.xml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->name, "msccl.allgather_ring_4");
  EXPECT_EQ(plan->collective, CollectiveKind::kAllGather);
  EXPECT_EQ(plan->world_size, 4);
  ASSERT_EQ(plan->buffers.size(), 1u);
  EXPECT_EQ(plan->buffers[0].name, "data");
  EXPECT_EQ(plan->buffers[0].shape, (Shape{48, 8}));
  EXPECT_EQ(plan->buffers[0].dtype, DType::kF32);
  // 4 ranks x 3 sends, one channel (tb 0) each.
  EXPECT_EQ(plan->NumTransfers(), 12);
  EXPECT_EQ(Count(*plan, TransferKind::kPush, ReduceOp::kNone), 12);
  for (const RankPlan& rank : plan->ranks) ASSERT_EQ(rank.channels.size(), 1u);
  // Rank 1's own chunk is data rows [12, 24); its first send goes to rank 2.
  const Transfer& first = plan->ranks[1].channels[0][0];
  EXPECT_EQ(first.peer, 2);
  EXPECT_EQ(first.src_region, Region::Slab({48, 8}, 0, 12, 24));
  EXPECT_EQ(first.dst_region, Region::Slab({48, 8}, 0, 12, 24));
  EXPECT_EQ(plan->ranks[1].initial.at("data"), Region::Slab({48, 8}, 0, 12, 24));
  // Rank 1's second send (rcs) forwards chunk 0, which rank 0's first send delivered.
  const Transfer& forward = plan->ranks[1].channels[0][1];
  EXPECT_EQ(forward.src_region, Region::Slab({48, 8}, 0, 0, 12));
  const Transfer& delivery = plan->ranks[0].channels[0][0];
  EXPECT_THAT(forward.deps, ::testing::Contains(delivery.id));
  // Every rank expects every shard.
  EXPECT_EQ(plan->postcondition.size(), 16u);
}

TEST(MscclImportTest, AllReduceReducesIntoData) {
  auto plan = ImportFile("allreduce_2.xml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->collective, CollectiveKind::kAllReduce);
  ASSERT_EQ(plan->buffers.size(), 1u);
  EXPECT_EQ(plan->buffers[0].name, "data");
  EXPECT_EQ(Count(*plan, TransferKind::kPush, ReduceOp::kSum), 2);
  EXPECT_EQ(Count(*plan, TransferKind::kPush, ReduceOp::kNone), 2);
  ASSERT_EQ(plan->postcondition.size(), 2u);
  EXPECT_EQ(plan->postcondition[0].op, ReduceOp::kSum);
  EXPECT_EQ(plan->postcondition[0].sources.size(), 2u);
}

TEST(MscclImportTest, ReduceScatterOutOfPlaceCopiesReductionToOutput) {
  auto plan = ImportFile("reduce_scatter_ring_3.xml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->collective, CollectiveKind::kReduceScatter);
  ASSERT_NE(plan->FindBuffer("input"), nullptr);
  ASSERT_NE(plan->FindBuffer("output"), nullptr);
  EXPECT_EQ(plan->FindBuffer("output")->shape, (Shape{16, 8}));
  // s + rrs sends per rank; rrc's result moves to the output with a local copy.
  EXPECT_EQ(Count(*plan, TransferKind::kPush, ReduceOp::kSum), 6);
  EXPECT_EQ(Count(*plan, TransferKind::kLocalCopy, ReduceOp::kNone), 3);
}

TEST(MscclImportTest, DependenciesFromDepidAndNop) {
  auto plan = ImportFile("allgather_direct_3.xml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_NE(plan->FindBuffer("input"), nullptr);
  ASSERT_NE(plan->FindBuffer("output"), nullptr);
  for (const RankPlan& rank : plan->ranks) {
    ASSERT_EQ(rank.channels.size(), 3u);
    const Transfer& copy = rank.channels[0][0];
    EXPECT_EQ(copy.kind, TransferKind::kLocalCopy);
    // tb 1 sends after the copy (depid), tb 2 too (through its nop).
    EXPECT_EQ(rank.channels[1][0].deps, std::vector<int>{copy.id});
    EXPECT_EQ(rank.channels[2][0].deps, std::vector<int>{copy.id});
  }
}

TEST(MscclImportTest, AllToAllUsesSendRecvAndOneChannelPerThreadBlock) {
  auto plan = ImportFile("alltoall_3.xml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->collective, CollectiveKind::kAllToAll);
  ASSERT_NE(plan->FindBuffer("send"), nullptr);
  ASSERT_NE(plan->FindBuffer("recv"), nullptr);
  for (const RankPlan& rank : plan->ranks) EXPECT_EQ(rank.channels.size(), 5u);
}

TEST(MscclImportTest, SignalsAreUniquePerDestination) {
  auto plan = ImportFile("alltoall_3.xml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::set<std::pair<int, int>> seen;
  for (const Transfer* t : plan->TransfersById()) {
    EXPECT_GE(t->signal, 0);
    EXPECT_TRUE(seen.insert({t->dst_rank(), t->signal}).second) << "t" << t->id;
  }
}

TEST(MscclImportTest, ImportIsDeterministic) {
  auto a = ImportFile("allgather_ring_4.xml");
  auto b = ImportFile("allgather_ring_4.xml");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(PlanHash(*a), PlanHash(*b));
}

// ---- malformed input ----

TEST(MscclImportErrorTest, UnclosedElementNamesLine) {
  auto plan = ImportFile("malformed_unclosed.xml");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("line 13"));
  EXPECT_THAT(plan.status().message(), HasSubstr("</gpu> does not match <tb> opened at line 10"));
}

TEST(MscclImportErrorTest, UnknownStepTypeNamesElement) {
  auto plan = ImportFile("malformed_bad_step.xml");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(),
              HasSubstr("line 12: <gpu id=1> <tb id=0> <step s=1>: unknown step type \"recv\""));
}

TEST(MscclImportErrorTest, UnpairedSendNamesThreadBlocks) {
  auto plan = ImportFile("malformed_unpaired.xml");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("line 4: <gpu id=0> <tb id=0>"));
  EXPECT_THAT(plan.status().message(), HasSubstr("sends 2 chunks to gpu 1 on chan 0"));
  EXPECT_THAT(plan.status().message(), HasSubstr("receives 1"));
}

// A valid 2-rank allgather with one thing replaced.
std::string TwoRank(
    const std::string& gpu1_tb_attrs = R"(send="0" recv="0" chan="0")",
    const std::string& gpu1_step1 =
        R"(<step s="1" type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>)",
    const std::string& algo_attrs = R"(ngpus="2" coll="allgather" inplace="1")") {
  return R"(<algo name="t" nchannels="1" nchunksperloop="2" )" + algo_attrs + R"(>
  <gpu id="0" i_chunks="1" o_chunks="2" s_chunks="0">
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="o" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="1" o_chunks="2" s_chunks="0">
    <tb id="0" )" +
         gpu1_tb_attrs + R"(>
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      )" +
         gpu1_step1 + R"(
    </tb>
  </gpu>
</algo>
)";
}

absl::Status ImportText(const std::string& xml, Shape shape = {}) {
  return ImportMscclXml(xml, ImportOptions{std::move(shape), DType::kBF16}).status();
}

TEST(MscclImportErrorTest, BaselineIsValid) {
  auto plan = ImportMscclXml(TwoRank(), ImportOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(ValidatePlan(*plan).ok()) << ValidatePlan(*plan);
  EXPECT_TRUE(SimulatePlan(*plan, SimulationOptions{}).ok());
}

TEST(MscclImportErrorTest, Rejections) {
  struct Case {
    std::string xml;
    std::string expected;
  };
  const std::string step = R"(<step s="1" type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" )";
  const std::vector<Case> cases = {
      {"<nope/>", "line 1: <nope>: the root element must be <algo>"},
      {"<algo ngpus=\"2\">", "missing </algo>"},
      {"", "no root element"},
      {TwoRank(R"(send="0" recv="0" chan="0")", "", R"(coll="allgather" inplace="1")"),
       "<algo>: missing attribute ngpus"},
      {TwoRank(R"(send="0" recv="0" chan="0")", "", R"(ngpus="3" coll="allgather" inplace="1")"),
       "ngpus=3 but there is no <gpu id=2>"},
      {TwoRank(R"(send="0" recv="0" chan="0")", "", R"(ngpus="2" coll="broadcast")"),
       "unsupported coll=\"broadcast\""},
      {TwoRank(R"(send="0" recv="0" chan="0")", "", R"(ngpus="2" coll="allgather" redop="prod")"),
       "unsupported redop=\"prod\""},
      {TwoRank(R"(send="x" recv="0" chan="0")"),
       "line 9: <gpu id=1> <tb id=0>: attribute send=\"x\" is not an integer"},
      {TwoRank(R"(send="1" recv="0" chan="0")"), "cannot send to or receive from its own gpu"},
      {TwoRank(R"(send="0" recv="0" chan="3")"), "chan=3 but the algo has nchannels=1"},
      {TwoRank(R"(send="0" recv="-1" chan="0")"),
       "<gpu id=1> <tb id=0> <step s=1>: step type r receives, but the tb has no recv peer"},
      {TwoRank(R"(send="0" recv="0" chan="0")", step + R"(cnt="2" depid="-1" deps="-1"/>)"),
       "<step s=1>: receives cnt=2, but the matching send"},
      {TwoRank(R"(send="0" recv="0" chan="0")", step + R"(cnt="1" depid="0" deps="7"/>)"),
       "<step s=1>: depid=0 deps=7 names no step of this gpu"},
      {TwoRank(R"(send="0" recv="0" chan="0")", step + R"(cnt="1" depid="0" deps="1"/>)"),
       "depid/deps form a cycle"},
      {TwoRank(R"(send="0" recv="0" chan="0")", step + R"(cnt="1" depid="0"/>)"),
       "depid and deps must both be -1"},
      {TwoRank(R"(send="0" recv="0" chan="0")",
               R"(<step s="2" type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0"/>)"),
       "steps must be numbered 0, 1, ...: expected s=1"},
      {TwoRank(R"(send="0" recv="0" chan="0")",
               R"(<step s="1" type="r" srcbuf="q" srcoff="0" dstbuf="o" dstoff="0"/>)"),
       "attribute srcbuf=\"q\" is not a buffer"},
      {TwoRank(R"(send="0" recv="0" chan="0")",
               R"(<step s="1" type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="5"/>)"),
       "dstbuf=o dstoff=5 cnt=1 is past the end of the data buffer (2 chunks)"},
      {TwoRank(R"(send="0" recv="0" chan="0")", R"(<tb id="1"/>)"), "unexpected element <tb>"},
  };
  for (const Case& c : cases) {
    absl::Status status = ImportText(c.xml);
    EXPECT_FALSE(status.ok()) << c.expected;
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr(c.expected)) << c.xml;
  }
}

TEST(MscclImportErrorTest, ShapeMustDivideIntoChunks) {
  absl::Status status = ImportText(TwoRank(), {7, 4});
  EXPECT_THAT(status.message(), HasSubstr("shape[0] = 7 does not divide into the 2 chunks of the "
                                          "data buffer"));
  EXPECT_TRUE(ImportText(TwoRank(), {8, 4}).ok());
}

// ---- XML reader ----

TEST(XmlReaderTest, ParsesAttributesCommentsAndPositions) {
  auto root = ParseXml(
      "<?xml version=\"1.0\"?>\n<!-- c -->\n<a x='1' y=\"a&amp;b&lt;&#65;\">\n  text\n"
      "  <b/><!-- inner -->\n  <c k=\"v\"></c>\n</a>\n");
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->name, "a");
  EXPECT_EQ(root->line, 3);
  ASSERT_NE(root->Attribute("y"), nullptr);
  EXPECT_EQ(*root->Attribute("y"), "a&b<A");
  EXPECT_EQ(root->Attribute("z"), nullptr);
  ASSERT_EQ(root->children.size(), 2u);
  EXPECT_EQ(root->children[0].name, "b");
  EXPECT_EQ(root->children[0].line, 5);
  EXPECT_EQ(root->children[0].column, 3);
  EXPECT_EQ(root->children[1].line, 6);
  EXPECT_THAT(root->text, HasSubstr("text"));
}

TEST(XmlReaderTest, Errors) {
  EXPECT_THAT(ParseXml("<a x=1/>").status().message(), HasSubstr("value must be quoted"));
  EXPECT_THAT(ParseXml("<a x='1' x='2'/>").status().message(), HasSubstr("duplicate attribute x"));
  EXPECT_THAT(ParseXml("<a>\n<b>\n</a>").status().message(),
              HasSubstr("line 3, column 4: </a> does not match <b> opened at line 2"));
  EXPECT_THAT(ParseXml("<a/><b/>").status().message(), HasSubstr("content after the root element"));
  EXPECT_THAT(ParseXml("<a y='&bogus;'/>").status().message(), HasSubstr("unknown entity"));
  EXPECT_THAT(ParseXml("<!-- open").status().message(), HasSubstr("unterminated comment"));
  EXPECT_THAT(ParseXml("<!DOCTYPE a><a/>").status().message(), HasSubstr("not supported"));
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "<a>";
  EXPECT_THAT(ParseXml(deep).status().message(), HasSubstr("nested too deeply"));
}

}  // namespace
}  // namespace syncopate::plan
