// Fitting two-level templates to where the ranks run (node names from Join).
#include "server/node_layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace syncopate::server {
namespace {

using ::testing::HasSubstr;

v1::Proposal TwoLevel(int world, int rpn) {
  v1::Proposal p;
  p.set_kernel_hash("k");
  v1::TemplateRequest* t = p.mutable_template_request();
  t->set_template_name("allgather.two_level");
  t->set_world_size(world);
  t->add_shape(64);
  t->add_shape(32);
  t->set_dtype(v1::DTYPE_BF16);
  t->set_ranks_per_node(rpn);
  return p;
}

TEST(NodeLayoutTest, ContiguousEqualNodesGiveTheirSize) {
  auto rpn = ContiguousRanksPerNode({"a", "a", "b", "b", "c", "c"});
  ASSERT_TRUE(rpn.ok()) << rpn.status();
  EXPECT_EQ(**rpn, 2);
  EXPECT_EQ(**ContiguousRanksPerNode({"a", "a", "a"}), 3);
  EXPECT_EQ(**ContiguousRanksPerNode({"a", "b", "c"}), 1);
}

TEST(NodeLayoutTest, UnknownPlacementIsNotChecked) {
  auto rpn = ContiguousRanksPerNode({"a", "", "b", "b"});
  ASSERT_TRUE(rpn.ok());
  EXPECT_FALSE(rpn->has_value());
}

TEST(NodeLayoutTest, UnequalOrInterleavedNodesAreNamed) {
  EXPECT_THAT(ContiguousRanksPerNode({"a", "a", "b", "c"}).status().message(),
              HasSubstr("node 'a' holds 2 ranks but node 'b' holds 1 (ranks 2..2)"));
  EXPECT_THAT(ContiguousRanksPerNode({"a", "b", "a", "b"}).status().message(),
              HasSubstr("node 'a' holds ranks 0 and 2 but not the ranks between"));
  EXPECT_THAT(ContiguousRanksPerNode({"a", "a", "b"}).status().message(),
              HasSubstr("node 'b' holds 1"));
}

TEST(NodeLayoutTest, DerivesRanksPerNodeForTwoLevelTemplates) {
  auto fitted = FitProposalToNodes(TwoLevel(4, 0), {"n0", "n0", "n1", "n1"});
  ASSERT_TRUE(fitted.ok()) << fitted.status();
  EXPECT_EQ(fitted->template_request().ranks_per_node(), 2);
  auto kept = FitProposalToNodes(TwoLevel(4, 2), {"n0", "n0", "n1", "n1"});
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->template_request().ranks_per_node(), 2);
}

TEST(NodeLayoutTest, ContradictingRanksPerNodeNamesARank) {
  auto too_many = FitProposalToNodes(TwoLevel(4, 4), {"n0", "n0", "n1", "n1"});
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(too_many.status().message(),
              HasSubstr("ranks_per_node: 4 puts rank 2 on rank 0's node, but rank 2 joined from "
                        "node 'n1'"));
  auto too_few = FitProposalToNodes(TwoLevel(4, 1), {"n0", "n0", "n1", "n1"});
  EXPECT_THAT(too_few.status().message(),
              HasSubstr("puts rank 1 on another node than rank 0, but rank 1 joined from node 'n0'"));
  auto interleaved = FitProposalToNodes(TwoLevel(4, 2), {"n0", "n1", "n0", "n1"});
  EXPECT_THAT(interleaved.status().message(),
              HasSubstr("'allgather.two_level' does not fit where the ranks run"));
}

TEST(NodeLayoutTest, OtherProposalsPassUnchanged) {
  v1::Proposal ring = TwoLevel(4, 0);
  ring.mutable_template_request()->set_template_name("allgather.ring");
  auto fitted = FitProposalToNodes(ring, {"n0", "n1", "n0", "n1"});
  ASSERT_TRUE(fitted.ok());
  EXPECT_EQ(fitted->template_request().ranks_per_node(), 0);
}

}  // namespace
}  // namespace syncopate::server
