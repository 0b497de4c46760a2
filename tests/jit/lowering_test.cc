// Lowering tables against a brute-force, element-by-element computation: wait sets, producer
// counts, landing guards, tile order and transfer programs, for AllGather + GEMM and
// GEMM + ReduceScatter over world sizes, chunk counts and tile sizes where chunks straddle tiles.
#include "jit/compiler/lowering.h"

#include <set>
#include <tuple>

#include "gtest/gtest.h"
#include "tests/jit/test_plans.h"

namespace syncopate::jit {
namespace {

using testing::AllGatherPlan;
using testing::ReduceScatterPlan;

// Element membership of `region` in a buffer with `strides` and `size` elements.
std::vector<char> Mask(const plan::Region& region, const std::vector<int64_t>& strides,
                       int64_t size) {
  std::vector<char> m(size, 0);
  for (int64_t o : region.Offsets(strides)) m[o] = 1;
  return m;
}

bool Overlap(const std::vector<char>& a, const std::vector<char>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] && b[i]) return true;
  }
  return false;
}

// Checks every table of `lw` for `plan` x `spec` by brute force.
void CheckAgainstBruteForce(const plan::Plan& plan, const KernelSpec& spec,
                            const LoweredSchedule& lw) {
  const auto by_id = plan.TransfersById();
  ASSERT_EQ(lw.num_tiles, spec.num_tiles());
  ASSERT_EQ(static_cast<int>(lw.ranks.size()), plan.world_size);

  // Per-tile footprint masks and per-transfer region masks.
  struct Op {
    const OperandSpec* spec;
    const plan::BufferSpec* buf;
    std::vector<std::vector<char>> tiles;
  };
  std::vector<Op> ops;
  for (const OperandSpec* o : spec.Operands()) {
    if (o->role == OperandRole::kLocal) continue;
    Op op{o, plan.FindBuffer(o->buffer), {}};
    ASSERT_NE(op.buf, nullptr);
    for (int t = 0; t < lw.num_tiles; ++t) {
      op.tiles.push_back(Mask(o->Footprint(t / lw.tiles_n, t % lw.tiles_n), op.buf->strides,
                              op.buf->NumElements()));
    }
    ops.push_back(std::move(op));
  }
  auto tiles_touching = [&](OperandRole role, const std::string& buffer, const plan::Region& region) {
    std::set<int> tiles;
    for (const Op& op : ops) {
      if (op.spec->role != role || op.buf->name != buffer) continue;
      const auto m = Mask(region, op.buf->strides, op.buf->NumElements());
      for (int t = 0; t < lw.num_tiles; ++t) {
        if (Overlap(op.tiles[t], m)) tiles.insert(t);
      }
    }
    return tiles;
  };

  std::map<int, GuardRef> guard_of;
  for (const RankSchedule& rs : lw.ranks) {
    for (const LandingGuard& g : rs.guards) guard_of[g.transfer] = GuardRef{rs.rank, g.signal};
  }

  for (const RankSchedule& rs : lw.ranks) {
    const int r = rs.rank;
    SCOPED_TRACE("rank " + std::to_string(r));
    // Wait sets.
    std::vector<std::set<int>> want_waits(lw.num_tiles);
    std::vector<int> want_guard_tiles;
    for (const plan::Transfer* t : by_id) {
      if (t->dst_rank() != r) continue;
      for (int tile : tiles_touching(OperandRole::kConsumed, t->dst_buffer, t->dst_region)) {
        want_waits[tile].insert(t->id);
      }
    }
    for (int tile = 0; tile < lw.num_tiles; ++tile) {
      std::set<int> got;
      for (const TileWait& w : rs.waits[tile]) {
        got.insert(w.transfer);
        EXPECT_EQ(w.signal, by_id[w.transfer]->signal);
        EXPECT_EQ(w.peer, by_id[w.transfer]->src_rank());
      }
      EXPECT_EQ(got.size(), rs.waits[tile].size()) << "duplicate waits, tile " << tile;
      EXPECT_EQ(got, want_waits[tile]) << "tile " << tile;
      EXPECT_EQ(rs.tile_wave[tile] == 0, got.empty()) << "tile " << tile;
    }
    // Outgoing chunks: producer tiles exactly those writing into the source region.
    std::vector<std::set<int>> want_tile_chunks(lw.num_tiles);
    int expected_chunks = 0;
    for (const plan::Transfer* t : by_id) {
      if (!t->after_compute || t->src_rank() != r) continue;
      ASSERT_LT(expected_chunks, static_cast<int>(rs.outgoing.size()));
      const OutgoingChunk& c = rs.outgoing[expected_chunks];
      EXPECT_EQ(c.transfer, t->id);
      const std::set<int> want = tiles_touching(OperandRole::kProduced, t->src_buffer, t->src_region);
      EXPECT_EQ(std::set<int>(c.producer_tiles.begin(), c.producer_tiles.end()), want)
          << "transfer " << t->id;
      EXPECT_EQ(c.producers, static_cast<int>(want.size()));
      EXPECT_EQ(c.direct, !want.empty() && t->deps.empty() && t->rank == r &&
                              guard_of.count(t->id) == 0);
      for (int tile : want) want_tile_chunks[tile].insert(expected_chunks);
      ++expected_chunks;
    }
    EXPECT_EQ(expected_chunks, static_cast<int>(rs.outgoing.size()));
    // Landing guards: incoming transfers onto data this rank's tiles write.
    int g = 0;
    for (const plan::Transfer* t : by_id) {
      if (t->dst_rank() != r) continue;
      const std::set<int> want = tiles_touching(OperandRole::kProduced, t->dst_buffer, t->dst_region);
      if (want.empty()) continue;
      ASSERT_LT(g, static_cast<int>(rs.guards.size()));
      EXPECT_EQ(rs.guards[g].transfer, t->id);
      EXPECT_EQ(std::set<int>(rs.guards[g].producer_tiles.begin(), rs.guards[g].producer_tiles.end()),
                want);
      EXPECT_EQ(rs.guards[g].signal, lw.plan_signals + g);
      for (int tile : want) want_tile_chunks[tile].insert(static_cast<int>(rs.outgoing.size()) + g);
      ++g;
    }
    EXPECT_EQ(g, static_cast<int>(rs.guards.size()));
    for (int tile = 0; tile < lw.num_tiles; ++tile) {
      EXPECT_EQ(std::set<int>(rs.tile_outgoing[tile].begin(), rs.tile_outgoing[tile].end()),
                want_tile_chunks[tile])
          << "tile " << tile;
    }
    // Tile order: a permutation, waves non-decreasing, swizzle order kept inside equal keys.
    std::vector<int> sorted = rs.tile_order;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < lw.num_tiles; ++i) ASSERT_EQ(sorted[i], i);
    std::vector<int> swizzle_pos(lw.num_tiles);
    for (int i = 0; i < lw.num_tiles; ++i) {
      swizzle_pos[SwizzledTile(i, lw.tiles_m, lw.tiles_n, spec.group_m)] = i;
    }
    for (int i = 1; i < lw.num_tiles; ++i) {
      const int a = rs.tile_order[i - 1], b = rs.tile_order[i];
      EXPECT_LE(rs.tile_wave[a], rs.tile_wave[b]) << "position " << i;
      if (rs.tile_wave[a] == rs.tile_wave[b] && want_tile_chunks[a].empty() &&
          want_tile_chunks[b].empty()) {
        EXPECT_LT(swizzle_pos[a], swizzle_pos[b]) << "position " << i;
      }
    }
    // Transfer program: every transfer rank r executes, in channel order, except direct chunks.
    const plan::RankPlan& rp = plan.ranks[r];
    ASSERT_EQ(rs.program.size(), rp.channels.size());
    for (size_t ch = 0; ch < rp.channels.size(); ++ch) {
      std::vector<int> want;
      for (const plan::Transfer& t : rp.channels[ch]) {
        bool direct = false;
        for (const OutgoingChunk& c : rs.outgoing) direct |= c.transfer == t.id && c.direct;
        if (!direct) want.push_back(t.id);
      }
      std::vector<int> got;
      for (const ProgramStep& s : rs.program[ch]) {
        got.push_back(s.transfer);
        EXPECT_EQ(s.deps, by_id[s.transfer]->deps);
        const bool guarded = guard_of.count(s.transfer) != 0;
        EXPECT_EQ(s.guards.size(), guarded ? 1u : 0u);
      }
      EXPECT_EQ(got, want) << "channel " << ch;
    }
  }
}

// (algorithm, world size, chunks per shard, tile_m, tile_n)
using Case = std::tuple<std::string, int, int, int, int>;

class AllGatherGemmLoweringTest : public ::testing::TestWithParam<Case> {};

TEST_P(AllGatherGemmLoweringTest, MatchesBruteForce) {
  const auto& [algo, world, chunks, tile_m, tile_n] = GetParam();
  const int64_t m = 203, n = 70, k = 8;  // no shape is a multiple of a tile
  const plan::Plan plan = AllGatherPlan(algo, world, m, k, chunks);
  const KernelSpec spec = GemmSpecForAllGather(m, n, k, plan::DType::kBF16, tile_m, tile_n);
  auto lw = Lower(plan, spec);
  ASSERT_TRUE(lw.ok()) << lw.status();
  CheckAgainstBruteForce(plan, spec, *lw);
  // Consumers only: nothing outgoing, no guards; every non-local tile waits.
  for (const RankSchedule& rs : lw->ranks) {
    EXPECT_TRUE(rs.outgoing.empty());
    EXPECT_TRUE(rs.guards.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, AllGatherGemmLoweringTest,
    ::testing::Combine(::testing::Values("push", "ring", "biring", "pull"),
                       ::testing::Values(2, 3, 4, 8), ::testing::Values(1, 2, 3, 5, 8),
                       ::testing::Values(16, 32), ::testing::Values(32)));

class GemmReduceScatterLoweringTest : public ::testing::TestWithParam<Case> {};

TEST_P(GemmReduceScatterLoweringTest, MatchesBruteForce) {
  const auto& [algo, world, chunks, tile_m, tile_n] = GetParam();
  const int64_t m = 197, n = 40, k = 16;
  const plan::Plan plan = ReduceScatterPlan(algo, world, m, n, chunks);
  const KernelSpec spec = GemmSpecForReduceScatter(m, n, k, plan::DType::kBF16, tile_m, tile_n);
  auto lw = Lower(plan, spec);
  ASSERT_TRUE(lw.ok()) << lw.status();
  CheckAgainstBruteForce(plan, spec, *lw);
  for (const RankSchedule& rs : lw->ranks) {
    for (const auto& w : rs.waits) EXPECT_TRUE(w.empty());  // a producer waits for nothing
    EXPECT_FALSE(rs.outgoing.empty());
  }
  // The output buffer receives reductions and no operand produces it.
  const int out_slot = SlotOfBuffer(lw->slots, "output");
  ASSERT_GE(out_slot, 0);
  EXPECT_FALSE(lw->slots[out_slot].kernel_param);
  EXPECT_TRUE(lw->slots[out_slot].needs_identity_fill);
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, GemmReduceScatterLoweringTest,
    ::testing::Combine(::testing::Values("ring", "direct"), ::testing::Values(2, 3, 4, 8),
                       ::testing::Values(1, 2, 3, 5, 8), ::testing::Values(16, 64),
                       ::testing::Values(32, 64)));

TEST(LoweringTest, SmallAllGatherExactTables) {
  // Two ranks, 8 rows, one chunk per shard, tiles of 2 rows straddle nothing; 3 rows straddle.
  const plan::Plan plan = AllGatherPlan("push", 2, 8, 4, 1, plan::DType::kF32);
  KernelSpec spec = testing::TinyCopySpec(8, 4, 3, "data", "");
  auto lw = Lower(plan, spec);
  ASSERT_TRUE(lw.ok()) << lw.status();
  ASSERT_EQ(lw->num_tiles, 3);  // rows [0,3) [3,6) [6,8)
  const auto by_id = plan.TransfersById();
  // Rank 0 holds rows [0, 4): tile 0 is local, tile 1 straddles and waits, tile 2 waits.
  const RankSchedule& r0 = lw->ranks[0];
  EXPECT_TRUE(r0.waits[0].empty());
  ASSERT_EQ(r0.waits[1].size(), 1u);
  ASSERT_EQ(r0.waits[2].size(), 1u);
  EXPECT_EQ(r0.waits[1][0].peer, 1);
  EXPECT_EQ(r0.tile_order, (std::vector<int>{0, 1, 2}));
  // Rank 1 holds rows [4, 8): tile 2 is local and runs first.
  const RankSchedule& r1 = lw->ranks[1];
  EXPECT_TRUE(r1.waits[2].empty());
  EXPECT_EQ(r1.waits[0].size(), 1u);
  EXPECT_EQ(r1.tile_order, (std::vector<int>{2, 0, 1}));
  // Slots: X (kernel operand), Y (kernel operand); "data" is bound, no plan-only slot.
  ASSERT_EQ(lw->slots.size(), 2u);
  EXPECT_EQ(lw->max_outgoing, 0);
  EXPECT_EQ(lw->max_program_channels, 1);
}

TEST(LoweringTest, RingWavesFollowArrivalSteps) {
  // In a ring AllGather chunk j reaches rank r after (r - j) mod W hops: tiles over it form wave
  // (r - j) mod W, and the local shard comes first.
  const int world = 4;
  const plan::Plan plan = AllGatherPlan("ring", world, 64, 8, 1);
  const KernelSpec spec = GemmSpecForAllGather(64, 32, 8, plan::DType::kBF16, 16, 32);
  auto lw = Lower(plan, spec);
  ASSERT_TRUE(lw.ok()) << lw.status();
  for (const RankSchedule& rs : lw->ranks) {
    for (int tile = 0; tile < 4; ++tile) {  // tile m covers shard m exactly
      EXPECT_EQ(rs.tile_wave[tile], ((rs.rank - tile) % world + world) % world)
          << "rank " << rs.rank << " tile " << tile;
    }
    EXPECT_EQ(rs.tile_order[0], rs.rank);
  }
}

TEST(LoweringTest, ReduceScatterRingGuardsAndDirectChunks) {
  const plan::Plan plan = ReduceScatterPlan("ring", 4, 64, 32, 1);
  const KernelSpec spec = GemmSpecForReduceScatter(64, 32, 8, plan::DType::kBF16, 16, 32);
  auto lw = Lower(plan, spec);
  ASSERT_TRUE(lw.ok()) << lw.status();
  for (const RankSchedule& rs : lw->ranks) {
    // Hops into "input" land on data the receiver computes: guarded, so hop 0 is not moved by
    // its last producer but by the transfer program once the guard is up. The own contribution
    // (a local reduce into "output", which no tile writes) stays direct.
    EXPECT_FALSE(rs.guards.empty());
    for (const OutgoingChunk& c : rs.outgoing) {
      EXPECT_EQ(c.direct, plan.TransfersById()[c.transfer]->kind == plan::TransferKind::kLocalCopy)
          << "transfer " << c.transfer;
    }
    EXPECT_EQ(rs.num_signals, lw->plan_signals + static_cast<int>(rs.guards.size()));
  }
  // Direct ReduceScatter reduces into "output" only: nothing guarded, every push direct.
  const plan::Plan direct = ReduceScatterPlan("direct", 4, 64, 32, 1);
  auto dl = Lower(direct, spec);
  ASSERT_TRUE(dl.ok()) << dl.status();
  for (const RankSchedule& rs : dl->ranks) {
    EXPECT_TRUE(rs.guards.empty());
    for (const OutgoingChunk& c : rs.outgoing) EXPECT_TRUE(c.direct);
  }
}

TEST(LoweringTest, ErrorsAreSpecific) {
  const plan::Plan plan = AllGatherPlan("ring", 2, 64, 8, 1);
  KernelSpec spec = GemmSpecForAllGather(64, 32, 16, plan::DType::kBF16, 16, 32);
  auto lw = Lower(plan, spec);
  EXPECT_EQ(lw.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(lw.status().message().find("operand A (consumed, plan buffer \"data\"): dim 1 is 16 "
                                       "in the spec but 8 in the plan"),
            std::string::npos)
      << lw.status();
}

}  // namespace
}  // namespace syncopate::jit
