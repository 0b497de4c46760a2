// Which reductions may run without atomics (plain_reductions.h): every ring hop into an input,
// whose writes the plan orders, and none of the direct ReduceScatter's, whose W reductions into
// one chunk nothing orders; in a hand-made plan, two reductions into one row
// become plain exactly when a dep orders them.
#include "jit/compiler/plain_reductions.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/jit/test_plans.h"

namespace syncopate::jit {
namespace {

// By transfer id: plain or not; empty when the plan does not lower.
std::vector<bool> Plain(const plan::Plan& plan, const KernelSpec& spec) {
  absl::StatusOr<LoweredSchedule> lw = Lower(plan, spec);
  EXPECT_TRUE(lw.ok()) << lw.status();
  std::vector<bool> plain;
  if (!lw.ok()) return plain;
  for (const LoweredTransfer& t : lw->transfers) plain.push_back(t.plain_reduce);
  EXPECT_EQ(plain, PlainReductions(plan.TransfersById(), *lw));
  return plain;
}

struct Counts {
  int reductions = 0;
  int plain = 0;
};

Counts CountTemplate(const std::string& name, int world, const std::string& produced) {
  const int64_t rows = int64_t{96} * world, cols = 16;
  const plan::Plan plan = testing::RowSplitPlan(name, world, rows, cols, 2, plan::DType::kF32);
  const std::vector<bool> plain = Plain(plan, testing::TinyCopySpec(rows, cols, 32, "", produced));
  Counts c;
  for (const plan::Transfer* t : plan.TransfersById()) {
    if (t->reduce == plan::ReduceOp::kNone) {
      EXPECT_FALSE(plain[t->id]) << "copy " << t->id << " marked plain";
      continue;
    }
    ++c.reductions;
    c.plain += plain[t->id] ? 1 : 0;
  }
  return c;
}

TEST(PlainReductionsTest, RingHopsArePlainAndDirectReductionsAtomic) {
  for (int world : {2, 3, 4}) {
    SCOPED_TRACE(world);
    // Out of place, each chunk's last hop and its owner's own contribution land in "output"
    // unordered (2 per chunk: 2 chunks per shard, W shards); every hop into an input is alone.
    const Counts ring = CountTemplate("reducescatter.ring", world, "input");
    EXPECT_EQ(ring.reductions, world * 2 * world);
    EXPECT_EQ(ring.plain, ring.reductions - 2 * 2 * world);
    const Counts rs_ag = CountTemplate("allreduce.rs_ag", world, "data");
    EXPECT_GT(rs_ag.reductions, 0);
    EXPECT_EQ(rs_ag.plain, rs_ag.reductions);
    // W reductions into each output chunk (the owner's own among them), unordered.
    const Counts direct = CountTemplate("reducescatter.direct", world, "input");
    EXPECT_GT(direct.reductions, 0);
    EXPECT_EQ(direct.plain, 0);
    // In place the owner's contribution is computed, not a transfer: at world 2 the one peer's
    // reduction is alone in its chunk; from world 3 on, W-1 of them meet there.
    const Counts ar = CountTemplate("allreduce.direct", world, "data");
    EXPECT_EQ(ar.plain, world == 2 ? ar.reductions : 0);
  }
}

// World 2, "data" [4, 8] f32: rank 0 (channel 0) and rank 1 (its channel 0) both sum their row 0
// into rank 1's row 1; a third reduction into rank 1's row 2 is alone.
plan::Plan TwoReductionsIntoOneRow(bool ordered) {
  plan::Plan p = testing::OneBufferPlan("custom.plain_reductions", 2, {4, 8});
  auto row = [](int r) { return plan::Region::Slab({4, 8}, 0, r, r + 1); };
  auto add = [&](int id, int rank, int dst_row) {
    plan::Transfer t;
    t.id = id;
    t.kind = rank == 1 ? plan::TransferKind::kLocalCopy : plan::TransferKind::kPush;
    t.rank = rank;
    t.peer = 1;
    t.signal = id;
    t.step = id;
    t.reduce = plan::ReduceOp::kSum;
    t.src_buffer = t.dst_buffer = "data";
    t.src_region = row(0);
    t.dst_region = row(dst_row);
    p.ranks[rank].channels[0].push_back(t);
    return &p.ranks[rank].channels[0].back();
  };
  add(0, 0, 1);
  plan::Transfer* second = add(1, 1, 1);
  if (ordered) second->deps = {0};
  add(2, 0, 2);
  return p;
}

TEST(PlainReductionsTest, ReductionsIntoOneRowArePlainOnlyWhenADepOrdersThem) {
  const KernelSpec spec = testing::TinyCopySpec(4, 8, 1, "", "");
  EXPECT_EQ(Plain(TwoReductionsIntoOneRow(false), spec), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(Plain(TwoReductionsIntoOneRow(true), spec), (std::vector<bool>{true, true, true}));
}

}  // namespace
}  // namespace syncopate::jit
