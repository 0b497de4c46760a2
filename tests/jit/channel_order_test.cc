// Which transfer-program steps wait for their channel's previous step (channel_order.h): none in
// the templates, whose steps on one channel never touch each other's bytes, and exactly the step
// that reads what an earlier one wrote in a hand-made plan that relies on channel order.
#include "jit/compiler/channel_order.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/jit/test_plans.h"

namespace syncopate::jit {
namespace {

std::vector<std::vector<bool>> Marks(const plan::Plan& plan, const KernelSpec& spec) {
  absl::StatusOr<LoweredSchedule> lw = Lower(plan, spec);
  EXPECT_TRUE(lw.ok()) << lw.status();
  std::vector<std::vector<bool>> marks;
  if (!lw.ok()) return marks;
  for (const RankSchedule& rs : lw->ranks) {
    for (const std::vector<ProgramStep>& channel : rs.program) {
      marks.push_back(StepsAfterPrevious(*lw, channel));
    }
  }
  return marks;
}

TEST(ChannelOrderTest, TemplateStepsNeverWaitForTheirChannel) {
  struct Case {
    std::string name;
    int world;
    std::string consumed, produced;
  };
  const std::vector<Case> cases = {{"allgather.push", 4, "data", ""},
                                   {"allgather.ring", 3, "data", ""},
                                   {"allgather.biring", 4, "data", ""},
                                   {"reducescatter.direct", 4, "", "input"},
                                   {"reducescatter.ring", 3, "", "input"},
                                   {"allreduce.rs_ag", 4, "", "data"},
                                   {"allreduce.direct", 4, "", "data"},
                                   {"allreduce.split", 3, "", "data"},
                                   {"reducescatter.direct_inplace", 4, "", "input"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    // Chunks of 256 KB or more: above jit::kMaxDirectMoveBytes, so they stay in the program.
    const int64_t rows = 3072, cols = 256;
    const plan::Plan plan =
        testing::RowSplitPlan(c.name, c.world, rows, cols, 2, plan::DType::kF32);
    const KernelSpec spec = testing::TinyCopySpec(rows, cols, 64, c.consumed, c.produced);
    int steps = 0;
    for (const std::vector<bool>& channel : Marks(plan, spec)) {
      for (bool after : channel) EXPECT_FALSE(after);
      steps += static_cast<int>(channel.size());
    }
    EXPECT_GT(steps, 0) << "some steps must be in the transfer program";
  }
}

// World 2, "data" [4, 8] f32, rank 0's one channel: copy row 0 to row 1 locally, push row 2 to
// rank 1 (independent), then push row 1 (what the copy wrote: needs channel order), then copy
// row 3 over row 0 (overwrites what the first copy read: needs it too).
TEST(ChannelOrderTest, StepsTouchingWhatAnEarlierStepWroteOrReadAreMarked) {
  plan::Plan p = testing::OneBufferPlan("custom.channel_order", 2, {4, 8});
  auto row = [](int r) { return plan::Region::Slab({4, 8}, 0, r, r + 1); };
  auto add = [&](int id, plan::TransferKind kind, int peer, int src_row, int dst_row) {
    plan::Transfer t;
    t.id = id;
    t.kind = kind;
    t.rank = 0;
    t.peer = peer;
    t.signal = id;
    t.step = id;
    t.src_buffer = t.dst_buffer = "data";
    t.src_region = row(src_row);
    t.dst_region = row(dst_row);
    p.ranks[0].channels[0].push_back(t);
  };
  add(0, plan::TransferKind::kLocalCopy, 0, 0, 1);
  add(1, plan::TransferKind::kPush, 1, 2, 2);
  add(2, plan::TransferKind::kPush, 1, 1, 1);
  add(3, plan::TransferKind::kLocalCopy, 0, 3, 0);
  const std::vector<std::vector<bool>> marks = Marks(p, testing::TinyCopySpec(4, 8, 1, "", ""));
  ASSERT_FALSE(marks.empty());
  EXPECT_EQ(marks[0], (std::vector<bool>{false, false, true, true}));
}

}  // namespace
}  // namespace syncopate::jit
