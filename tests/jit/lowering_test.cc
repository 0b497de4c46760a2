// Lowering tables against a brute-force, element-by-element computation: wait sets, producer
// counts, landing guards, tile order and transfer programs, for AllGather + GEMM and
// GEMM + ReduceScatter over world sizes, chunk counts and tile sizes where chunks straddle tiles.
// With a node map: inter-node chunks leave the programs for the host proxy, what the proxy
// cannot carry is refused, and which templates lower on two nodes of two ranks.
#include "jit/compiler/lowering.h"

#include <array>
#include <map>
#include <set>
#include <tuple>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncopate/launch_abi.h"
#include "tests/jit/test_plans.h"

namespace syncopate::jit {
namespace {

using testing::AllGatherPlan;
using testing::ReduceScatterPlan;
using testing::RowSplitPlan;

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

// Every (source byte, destination byte) pair `segments` move, once each (a pair moved twice
// shows as a count of 2).
std::map<std::pair<int64_t, int64_t>, int> BytePairs(const std::vector<CopySegment>& segments) {
  std::map<std::pair<int64_t, int64_t>, int> pairs;
  for (const CopySegment& s : segments) {
    for (int64_t r = 0; r < s.rows; ++r) {
      for (int64_t b = 0; b < s.row_bytes; ++b) {
        ++pairs[{s.src_offset_bytes + r * s.src_pitch_bytes + b,
                 s.dst_offset_bytes + r * s.dst_pitch_bytes + b}];
      }
    }
  }
  return pairs;
}

// Whether another transfer depends on `t`, or one of its channel touches its elements (same rank
// and buffer; reductions with the same op commute): then its parts may not leave out of order.
bool DependedOnOrOrderedOnItsChannel(const plan::Plan& plan, const plan::Transfer& t) {
  for (const plan::Transfer* u : plan.TransfersById()) {
    if (std::find(u->deps.begin(), u->deps.end(), t.id) != u->deps.end()) return true;
  }
  auto touch = [](int rank_a, const std::string& buf_a, const plan::Region& a, int rank_b,
                  const std::string& buf_b, const plan::Region& b) {
    return rank_a == rank_b && buf_a == buf_b && a.Intersects(b);
  };
  for (const auto& channel : plan.ranks[t.rank].channels) {
    bool mine = false;
    for (const plan::Transfer& u : channel) mine |= u.id == t.id;
    if (!mine) continue;
    for (const plan::Transfer& u : channel) {
      if (u.id == t.id) continue;
      const bool commute = t.reduce != plan::ReduceOp::kNone && t.reduce == u.reduce;
      if (touch(t.dst_rank(), t.dst_buffer, t.dst_region, u.src_rank(), u.src_buffer,
                u.src_region) ||
          touch(t.src_rank(), t.src_buffer, t.src_region, u.dst_rank(), u.dst_buffer,
                u.dst_region) ||
          (!commute && touch(t.dst_rank(), t.dst_buffer, t.dst_region, u.dst_rank(), u.dst_buffer,
                             u.dst_region))) {
        return true;
      }
    }
  }
  return false;
}

// Whether chunk `t` of a push_tiles spec can move in tile parts, by element masks: one produced
// operand writes its source buffer, source and destination are single boxes of the same extents,
// and the producer tiles' footprints cut the source region into parts that cover it exactly once.
bool SplitsIntoTileParts(const plan::Plan& plan, const KernelSpec& spec, const plan::Transfer& t,
                         const std::set<int>& producers, int tiles_n) {
  const OperandSpec* producer = nullptr;
  for (const OperandSpec* o : spec.Operands()) {
    if (o->role != OperandRole::kProduced || o->buffer != t.src_buffer) continue;
    if (producer != nullptr) return false;
    producer = o;
  }
  if (producer == nullptr || t.src_region.boxes().size() != 1 || t.dst_region.boxes().size() != 1 ||
      t.src_region.boxes()[0].Extents() != t.dst_region.boxes()[0].Extents()) {
    return false;
  }
  const plan::BufferSpec& buf = *plan.FindBuffer(t.src_buffer);
  const std::vector<char> region = Mask(t.src_region, buf.strides, buf.NumElements());
  std::vector<int> times(region.size(), 0);
  for (int tile : producers) {
    const std::vector<char> fp =
        Mask(producer->Footprint(tile / tiles_n, tile % tiles_n), buf.strides, buf.NumElements());
    for (size_t i = 0; i < fp.size(); ++i) times[i] += fp[i] && region[i];
  }
  for (size_t i = 0; i < region.size(); ++i) {
    if (times[i] != (region[i] ? 1 : 0)) return false;
  }
  return true;
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
    bool rank_waits = false;
    for (const auto& w : want_waits) rank_waits |= !w.empty();
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
      const int64_t bytes =
          t->src_region.NumElements() * plan::DTypeSize(plan.FindBuffer(t->src_buffer)->dtype);
      const bool movable =
          !want.empty() && t->deps.empty() && t->rank == r && guard_of.count(t->id) == 0;
      const bool parts = movable && spec.push_tiles && !rank_waits &&
                         !DependedOnOrOrderedOnItsChannel(plan, *t) &&
                         SplitsIntoTileParts(plan, spec, *t, want, lw.tiles_n);
      EXPECT_EQ(c.tile_parts, parts) << "transfer " << t->id;
      EXPECT_EQ(c.direct, movable && !parts && bytes <= kMaxDirectMoveBytes);
      if (c.tile_parts) {
        // The parts move exactly the transfer's bytes, each once, in producer-tile order.
        ASSERT_EQ(c.part_segments.size(), c.producer_tiles.size());
        std::vector<CopySegment> all;
        for (const auto& part : c.part_segments) all.insert(all.end(), part.begin(), part.end());
        EXPECT_EQ(BytePairs(all), BytePairs(lw.segments[t->id])) << "transfer " << t->id;
      } else {
        EXPECT_TRUE(c.part_segments.empty());
      }
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
    // Transfer program: every transfer rank r executes, in channel order, except the chunks
    // tiles move (direct or in tile parts).
    const plan::RankPlan& rp = plan.ranks[r];
    ASSERT_EQ(rs.program.size(), rp.channels.size());
    for (size_t ch = 0; ch < rp.channels.size(); ++ch) {
      std::vector<int> want;
      for (const plan::Transfer& t : rp.channels[ch]) {
        bool by_tiles = false;
        for (const OutgoingChunk& c : rs.outgoing) {
          by_tiles |= c.transfer == t.id && (c.direct || c.tile_parts);
        }
        if (!by_tiles) want.push_back(t.id);
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
  // No operand produces the output buffer. The ring and direct plans reduce into it (the runtime
  // fills it with zeros first); direct_inplace reduces into the inputs and copies to it.
  const int out_slot = SlotOfBuffer(lw->slots, "output");
  ASSERT_GE(out_slot, 0);
  EXPECT_FALSE(lw->slots[out_slot].kernel_param);
  EXPECT_EQ(lw->slots[out_slot].needs_identity_fill, algo != "direct_inplace");
}

INSTANTIATE_TEST_SUITE_P(Matrix, GemmReduceScatterLoweringTest,
                         ::testing::Combine(::testing::Values("ring", "direct", "direct_inplace"),
                                            ::testing::Values(2, 3, 4, 8),
                                            ::testing::Values(1, 2, 3, 5, 8),
                                            ::testing::Values(16, 64), ::testing::Values(32, 64)));

// allreduce.direct_out over a 256 x 64 bf16 tensor, lowered against the ReduceScatter GEMM with C
// bound to the AllReduce's "data" (as the ops build it).
absl::StatusOr<LoweredSchedule> LowerAllReduceDirectOut(int world, int chunks) {
  const plan::Plan ar =
      RowSplitPlan("allreduce.direct_out", world, 256, 64, chunks, plan::DType::kBF16);
  KernelSpec spec = GemmSpecForReduceScatter(256, 64, 16, plan::DType::kBF16, 64, 64);
  for (KernelParam& param : spec.params) {
    if (auto* op = std::get_if<OperandSpec>(&param); op != nullptr && op->name == "C") {
      op->buffer = "data";
    }
  }
  return Lower(ar, spec);
}

// allreduce.direct_out's "out" is touched only by each rank's own local copies: rank-private,
// so a launch may point it at a caller's memory; "data", which peers push into, is not. The same
// holds for direct_inplace's "output" (only the owners' copies write it), and not for the
// direct ReduceScatter's, which peers reduce into.
TEST(LoweringTest, ABufferOnlyLocalCopiesTouchIsRankPrivate) {
  for (int world : {2, 4}) {
    SCOPED_TRACE(::testing::Message() << "world " << world);
    absl::StatusOr<LoweredSchedule> lw = LowerAllReduceDirectOut(world, 2);
    ASSERT_TRUE(lw.ok()) << lw.status();
    const int out = SlotOfBuffer(lw->slots, "out");
    ASSERT_GE(out, 0);
    EXPECT_TRUE(lw->slots[out].rank_private);
    EXPECT_TRUE(IsPerLaunchOperand(lw->slots[out]));
    EXPECT_TRUE(IsCopyProgramOperand(lw->slots[out]));
    absl::StatusOr<int> per_launch = PerLaunchOperandSlot(lw->slots, "out");
    ASSERT_TRUE(per_launch.ok()) << per_launch.status();
    EXPECT_EQ(*per_launch, out);
    const int data = SlotOfBuffer(lw->slots, "data");
    ASSERT_GE(data, 0);
    EXPECT_FALSE(lw->slots[data].rank_private);
    EXPECT_FALSE(PerLaunchOperandSlot(lw->slots, "C").ok());

    for (const std::string algo : {"direct", "direct_inplace"}) {
      const plan::Plan rs = ReduceScatterPlan(algo, world, 256, 64, 2);
      absl::StatusOr<LoweredSchedule> rs_lw =
          Lower(rs, GemmSpecForReduceScatter(256, 64, 16, plan::DType::kBF16, 64, 64));
      ASSERT_TRUE(rs_lw.ok()) << rs_lw.status();
      const int output = SlotOfBuffer(rs_lw->slots, "output");
      ASSERT_GE(output, 0);
      EXPECT_EQ(rs_lw->slots[output].rank_private, algo == "direct_inplace") << algo;
    }
  }
}

// What a launch may point elsewhere: the rank-private "out" on the SM backend, and not on the
// copy engine (its copy program keeps the bound address); never "data", nor a slot the kernel
// lacks. The error names the slot and the reason.
TEST(LoweringTest, PerLaunchPointersAreCheckedAgainstTheSlots) {
  absl::StatusOr<LoweredSchedule> lw = LowerAllReduceDirectOut(2, 1);
  ASSERT_TRUE(lw.ok()) << lw.status();
  int somewhere = 0;
  std::array<void*, kMaxOperands> pointers{};
  EXPECT_TRUE(CheckPerLaunchOperands(lw->slots, false, pointers).ok());
  pointers[SlotOfBuffer(lw->slots, "out")] = &somewhere;
  EXPECT_TRUE(CheckPerLaunchOperands(lw->slots, false, pointers).ok());
  absl::Status ce = CheckPerLaunchOperands(lw->slots, true, pointers);
  EXPECT_EQ(ce.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ce.message()), ::testing::HasSubstr("plan buffer \"out\""));
  EXPECT_THAT(std::string(ce.message()), ::testing::HasSubstr("needs the SM backend"));

  pointers = {};
  pointers[SlotOfBuffer(lw->slots, "data")] = &somewhere;
  absl::Status shared = CheckPerLaunchOperands(lw->slots, false, pointers);
  EXPECT_EQ(shared.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(shared.message()), ::testing::HasSubstr("is not local to this rank"));

  pointers = {};
  pointers[kMaxOperands - 1] = &somewhere;
  ASSERT_LT(static_cast<int>(lw->slots.size()), kMaxOperands);
  absl::Status missing = CheckPerLaunchOperands(lw->slots, false, pointers);
  EXPECT_THAT(std::string(missing.message()), ::testing::HasSubstr("no operand in this slot"));
}

// push_tiles: the direct ReduceScatter's chunks all move in tile parts (none guarded, the
// output's slabs single boxes), so no transfer program is left; the ring's hops that land on
// guarded "input" stay in the program; the in-place plan's chunks all land on guarded inputs or
// wait for reductions (deps). Tiles that straddle chunks (tile_m 64 over slabs of ~33 rows)
// give a part to each. The brute force decides every chunk.
class TilePartsLoweringTest : public ::testing::TestWithParam<Case> {};

TEST_P(TilePartsLoweringTest, MatchesBruteForce) {
  const auto& [algo, world, chunks, tile_m, tile_n] = GetParam();
  const int64_t m = 197, n = 40, k = 16;
  const plan::Plan plan = ReduceScatterPlan(algo, world, m, n, chunks);
  KernelSpec spec = GemmSpecForReduceScatter(m, n, k, plan::DType::kBF16, tile_m, tile_n);
  spec.push_tiles = true;
  auto lw = Lower(plan, spec);
  ASSERT_TRUE(lw.ok()) << lw.status();
  CheckAgainstBruteForce(plan, spec, *lw);
  bool any_parts = false;
  for (const RankSchedule& rs : lw->ranks) {
    for (const OutgoingChunk& c : rs.outgoing) {
      if (algo == "direct") EXPECT_TRUE(c.tile_parts) << "transfer " << c.transfer;
      EXPECT_FALSE(c.direct && c.tile_parts);
      any_parts |= c.tile_parts;
    }
    if (algo == "direct") {
      for (const auto& channel : rs.program) EXPECT_TRUE(channel.empty());
    }
  }
  EXPECT_EQ(any_parts, algo != "direct_inplace");
  // Plain reductions are proven for whole chunks: with parts, none is plain.
  if (any_parts) {
    for (const LoweredTransfer& t : lw->transfers) EXPECT_FALSE(t.plain_reduce) << t.id;
  }
}

INSTANTIATE_TEST_SUITE_P(Matrix, TilePartsLoweringTest,
                         ::testing::Combine(::testing::Values("ring", "direct", "direct_inplace"),
                                            ::testing::Values(2, 3, 4), ::testing::Values(1, 2, 3),
                                            ::testing::Values(16, 64), ::testing::Values(32)));

// The GPU tests' shapes (FusedTilePartsTest) do move in tile parts: a test there that passed
// with whole chunks would prove nothing.
TEST(LoweringTest, TheTilePartGpuCasesMoveInParts) {
  struct GpuCase {
    int world, chunks;
    int64_t m, n, k;
    bool wgmma;
    plan::DType dtype;
  };
  for (const GpuCase& c : {GpuCase{2, 2, 456, 1024, 264, true, plan::DType::kBF16},
                           GpuCase{2, 1, 456, 316, 264, true, plan::DType::kF16},
                           GpuCase{4, 2, 1032, 512, 128, true, plan::DType::kBF16},
                           GpuCase{3, 2, 390, 264, 64, false, plan::DType::kF16},
                           GpuCase{3, 1, 390, 264, 64, true, plan::DType::kBF16}}) {
    SCOPED_TRACE(::testing::Message() << "world " << c.world << " m " << c.m << " n " << c.n);
    const plan::Plan plan = ReduceScatterPlan("direct", c.world, c.m, c.n, c.chunks, c.dtype);
    KernelSpec spec = c.wgmma ? GemmWgmmaSpecForReduceScatter(c.m, c.n, c.k, c.dtype)
                              : GemmSpecForReduceScatter(c.m, c.n, c.k, c.dtype);
    spec.push_tiles = true;
    auto lw = Lower(plan, spec);
    ASSERT_TRUE(lw.ok()) << lw.status();
    for (const RankSchedule& rs : lw->ranks) {
      for (const OutgoingChunk& ch : rs.outgoing) EXPECT_TRUE(ch.tile_parts) << ch.transfer;
    }
  }
}

// Without push_tiles nothing moves in tile parts (the brute force above checks every table).
TEST(LoweringTest, TilePartsOnlyWhenTheSpecAsks) {
  const plan::Plan plan = ReduceScatterPlan("direct", 2, 1024, 1024, 1);
  KernelSpec spec = GemmSpecForReduceScatter(1024, 1024, 64, plan::DType::kBF16, 128, 128);
  auto off = Lower(plan, spec);
  ASSERT_TRUE(off.ok()) << off.status();
  spec.push_tiles = true;
  auto on = Lower(plan, spec);
  ASSERT_TRUE(on.ok()) << on.status();
  for (int r = 0; r < 2; ++r) {
    for (const OutgoingChunk& c : off->ranks[r].outgoing) EXPECT_FALSE(c.tile_parts);
    for (const OutgoingChunk& c : on->ranks[r].outgoing) {
      EXPECT_TRUE(c.tile_parts);
      // 1024 x 1024 in 128 x 128 tiles: each 512-row slab is 4 x 8 tiles, one segment of 128
      // rows of 256 bytes each.
      ASSERT_EQ(c.producer_tiles.size(), 32u);
      for (const auto& part : c.part_segments) {
        ASSERT_EQ(part.size(), 1u);
        EXPECT_EQ(part[0].rows, 128);
        EXPECT_EQ(part[0].row_bytes, 256);
        EXPECT_EQ(part[0].src_pitch_bytes, 2048);
      }
    }
  }
  EXPECT_GT(off->max_program_channels, 0);
  EXPECT_EQ(on->max_program_channels, 0);  // DefaultCommCtas then launches one comm CTA
}

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
  // Direct ReduceScatter reduces into "output" only: nothing guarded, every push direct (its
  // 1 KiB chunks are far below kMaxDirectMoveBytes), so no transfer program.
  const plan::Plan direct = ReduceScatterPlan("direct", 4, 64, 32, 1);
  auto dl = Lower(direct, spec);
  ASSERT_TRUE(dl.ok()) << dl.status();
  for (const RankSchedule& rs : dl->ranks) {
    EXPECT_TRUE(rs.guards.empty());
    for (const OutgoingChunk& c : rs.outgoing) EXPECT_TRUE(c.direct);
    for (const auto& channel : rs.program) EXPECT_TRUE(channel.empty());
  }
}

// A chunk above kMaxDirectMoveBytes is not moved by its last producer tile (one CTA: ~18 GB/s)
// but by the transfer program, which splits each step over the comm CTAs.
TEST(LoweringTest, LargeChunksGoToTheTransferProgram) {
  // 4 ranks, 1024 x 1024 bf16: every chunk is 256 rows = 512 KiB.
  const plan::Plan plan = ReduceScatterPlan("direct", 4, 1024, 1024, 1);
  const KernelSpec spec = GemmSpecForReduceScatter(1024, 1024, 64, plan::DType::kBF16, 128, 128);
  auto lw = Lower(plan, spec);
  ASSERT_TRUE(lw.ok()) << lw.status();
  for (const RankSchedule& rs : lw->ranks) {
    ASSERT_FALSE(rs.outgoing.empty());
    std::set<int> in_program;
    for (const auto& channel : rs.program) {
      for (const ProgramStep& step : channel) in_program.insert(step.transfer);
    }
    for (const OutgoingChunk& c : rs.outgoing) {
      EXPECT_FALSE(c.direct) << "rank " << rs.rank << " transfer " << c.transfer;
      EXPECT_EQ(in_program.count(c.transfer), 1u)
          << "rank " << rs.rank << " transfer " << c.transfer;
    }
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

// ---- node maps ----

using ::testing::HasSubstr;

const std::vector<int> kTwoByTwo = {0, 0, 1, 1};

plan::Plan TemplatePlan(const std::string& name, plan::TemplateParams p) {
  auto plan = plan::BuildTemplate(name, p);
  EXPECT_TRUE(plan.ok()) << name << ": " << plan.status();
  return plan.ok() ? *plan : plan::Plan{};
}

plan::TemplateParams TwoLevelParams(plan::Shape shape, int chunks) {
  plan::TemplateParams p;
  p.world_size = 4;
  p.ranks_per_node = 2;
  p.shape = std::move(shape);
  p.chunks_per_shard = chunks;
  return p;
}

// A row-tiled spec over the plan's 2-D buffers: `consumed` / `produced` (either may be empty)
// bound by name, footprint `tile_rows` rows of tile m, clipped to each buffer.
KernelSpec RowSpec(const plan::Plan& plan, const std::string& consumed, const std::string& produced,
                   int64_t tile_rows) {
  KernelSpec s;
  s.name = "rows";
  s.entry = "rows";
  s.problem_n = 1;
  s.tile_m = tile_rows;
  s.tile_n = 1;
  s.block_threads = 128;
  for (const auto& [name, role] :
       {std::pair{consumed, OperandRole::kConsumed}, std::pair{produced, OperandRole::kProduced}}) {
    if (name.empty()) continue;
    const plan::BufferSpec* buf = plan.FindBuffer(name);
    EXPECT_NE(buf, nullptr) << name;
    if (buf == nullptr) continue;
    OperandSpec op;
    op.name = role == OperandRole::kConsumed ? "X" : "Y";
    op.dtype = buf->dtype;
    op.role = role;
    op.buffer = name;
    op.shape = buf->shape;
    op.footprint.push_back(AxisFootprint{AffineExpr{tile_rows, 0, 0}, tile_rows});
    for (size_t d = 1; d < buf->shape.size(); ++d) op.footprint.push_back(AxisFootprint{});
    s.problem_m = std::max(s.problem_m, buf->shape[0]);
    s.params.push_back(std::move(op));
  }
  return s;
}

bool CrossesNodes(const plan::Transfer& t, const std::vector<int>& nodes) {
  return nodes[t.src_rank()] != nodes[t.dst_rank()];
}

// What every schedule lowered with `nodes` must satisfy: programs hold exactly the intra-node
// transfers of their rank (minus direct chunks), every step's deps land on its node, proxied
// lists the inter-node ones in channel order, none of them is direct, and the wait sets are those
// of the plan without a map.
void CheckNodeSplit(const plan::Plan& plan, const KernelSpec& spec, const std::vector<int>& nodes,
                    const LoweredSchedule& lw) {
  auto single = Lower(plan, spec);
  ASSERT_TRUE(single.ok()) << single.status();
  const auto by_id = plan.TransfersById();
  EXPECT_EQ(lw.nodes, nodes);
  for (const plan::Transfer* t : by_id) {
    EXPECT_EQ(lw.transfers[t->id].inter_node, CrossesNodes(*t, nodes)) << "transfer " << t->id;
  }
  for (const RankSchedule& rs : lw.ranks) {
    const int r = rs.rank;
    SCOPED_TRACE("rank " + std::to_string(r));
    std::set<int> direct;
    for (const OutgoingChunk& c : rs.outgoing) {
      if (c.direct) direct.insert(c.transfer);
      EXPECT_FALSE(c.direct && CrossesNodes(*by_id[c.transfer], nodes)) << c.transfer;
    }
    std::vector<int> want_proxied;
    for (size_t ch = 0; ch < plan.ranks[r].channels.size(); ++ch) {
      std::vector<int> want_steps;
      for (const plan::Transfer& t : plan.ranks[r].channels[ch]) {
        if (CrossesNodes(t, nodes)) {
          want_proxied.push_back(t.id);
        } else if (direct.count(t.id) == 0) {
          want_steps.push_back(t.id);
        }
      }
      std::vector<int> got_steps;
      for (const ProgramStep& step : rs.program[ch]) {
        got_steps.push_back(step.transfer);
        for (int d : step.deps) {
          EXPECT_EQ(nodes[by_id[d]->dst_rank()], nodes[r]) << "step " << step.transfer;
        }
      }
      EXPECT_EQ(got_steps, want_steps) << "channel " << ch;
    }
    EXPECT_EQ(rs.proxied, want_proxied);
    EXPECT_EQ(rs.waits, single->ranks[r].waits);
  }
}

TEST(NodeMapLoweringTest, TwoLevelAllGatherLeavesInterNodeChunksToTheProxy) {
  const plan::Plan plan = TemplatePlan("allgather.two_level", TwoLevelParams({64, 8}, 2));
  const KernelSpec spec = GemmSpecForAllGather(64, 32, 8, plan::DType::kBF16, 16, 32);
  auto lw = Lower(plan, spec, kTwoByTwo);
  ASSERT_TRUE(lw.ok()) << lw.status();
  CheckNodeSplit(plan, spec, kTwoByTwo, *lw);
  const auto by_id = plan.TransfersById();
  for (const RankSchedule& rs : lw->ranks) {
    // Each rank sends its 2 chunks to its counterpart on the other node, on channel 1, which the
    // proxy takes over entirely.
    ASSERT_EQ(rs.proxied.size(), 2u) << "rank " << rs.rank;
    for (int id : rs.proxied) {
      EXPECT_EQ(by_id[id]->rank, rs.rank);
      EXPECT_EQ(by_id[id]->peer, (rs.rank + 2) % 4);
    }
    EXPECT_TRUE(rs.program[1].empty());
    // Tiles still wait on what arrives from the other node (the proxy sets the signal).
    std::set<int> waited;
    for (const auto& w : rs.waits) {
      for (const TileWait& tw : w) waited.insert(tw.transfer);
    }
    for (const plan::Transfer* t : by_id) {
      if (t->dst_rank() == rs.rank && lw->transfers[t->id].inter_node) {
        EXPECT_EQ(waited.count(t->id), 1u) << "transfer " << t->id;
      }
    }
  }
  EXPECT_EQ(lw->max_program_channels, 1);

  // Without a map the same plan lowers as before: every transfer in a program, nothing proxied.
  auto single = Lower(plan, spec);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(single->nodes, std::vector<int>(4, 0));
  CheckAgainstBruteForce(plan, spec, *single);
  for (const RankSchedule& rs : single->ranks) {
    EXPECT_TRUE(rs.proxied.empty());
    EXPECT_FALSE(rs.program[1].empty());
  }
  for (const LoweredTransfer& t : single->transfers) EXPECT_FALSE(t.inter_node);
  EXPECT_EQ(single->max_program_channels, 2);
}

TEST(NodeMapLoweringTest, ComputedInterNodeChunksArePublishedNotMoved) {
  // MoE dispatch: tiles produce "send", every block goes out after compute. Intra-node blocks
  // stay direct (moved by their last producer); inter-node ones are outgoing chunks the kernel
  // only publishes (chunk_ready), for the proxy.
  plan::TemplateParams p = TwoLevelParams({16, 4}, 1);
  p.dtype = plan::DType::kF32;
  p.produced_by_compute = true;
  const plan::Plan plan = TemplatePlan("alltoall.uniform", p);
  const KernelSpec spec = RowSpec(plan, "recv", "send", 2);
  auto lw = Lower(plan, spec, kTwoByTwo);
  ASSERT_TRUE(lw.ok()) << lw.status();
  CheckNodeSplit(plan, spec, kTwoByTwo, *lw);
  for (const RankSchedule& rs : lw->ranks) {
    int inter = 0;
    for (const OutgoingChunk& c : rs.outgoing) {
      const bool crosses = lw->transfers[c.transfer].inter_node;
      EXPECT_GT(c.producers, 0);
      EXPECT_EQ(c.direct, !crosses) << "transfer " << c.transfer;
      inter += crosses ? 1 : 0;
    }
    EXPECT_EQ(inter, 2) << "rank " << rs.rank;
    EXPECT_EQ(rs.proxied.size(), 2u);
  }
  auto single = Lower(plan, spec);
  ASSERT_TRUE(single.ok()) << single.status();
  for (const RankSchedule& rs : single->ranks) {
    for (const OutgoingChunk& c : rs.outgoing) EXPECT_TRUE(c.direct) << c.transfer;
  }
}

TEST(NodeMapLoweringTest, InterNodeReductionsAreUnimplemented) {
  const plan::Plan plan = TemplatePlan("reducescatter.two_level", TwoLevelParams({64, 32}, 1));
  const KernelSpec spec = GemmSpecForReduceScatter(64, 32, 8, plan::DType::kBF16, 16, 32);
  ASSERT_TRUE(Lower(plan, spec).ok());
  absl::Status s = Lower(plan, spec, kTwoByTwo).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(s.message(), HasSubstr("plan \"reducescatter.two_level\": inter-node transfer "));
  EXPECT_THAT(s.message(), HasSubstr("reduces (sum)"));
  EXPECT_THAT(s.message(), HasSubstr("on node 1"));
  EXPECT_THAT(s.message(), HasSubstr("host proxy, which supports plain PUSH copies only"));
}

TEST(NodeMapLoweringTest, InterNodePullsAreUnimplemented) {
  plan::TemplateParams p = TwoLevelParams({16, 4}, 1);
  const plan::Plan plan = TemplatePlan("allgather.pull", p);
  absl::Status s =
      Lower(plan, GemmSpecForAllGather(16, 32, 4, plan::DType::kBF16, 4, 32), kTwoByTwo).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(s.message(), HasSubstr("is a pull, not a push"));
}

TEST(NodeMapLoweringTest, GuardedInterNodeLandingIsUnimplemented) {
  // Tiles write all of "data", so what arrives there lands on computed data and needs a guard
  // word on the destination: the proxy on the other node cannot wait for it.
  plan::TemplateParams p = TwoLevelParams({16, 4}, 1);
  p.dtype = plan::DType::kF32;
  p.produced_by_compute = true;
  const plan::Plan plan = TemplatePlan("allgather.two_level", p);
  const KernelSpec spec = testing::TinyCopySpec(16, 4, 4, "", "data");
  ASSERT_TRUE(Lower(plan, spec).ok());
  absl::Status s = Lower(plan, spec, kTwoByTwo).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(s.message(), HasSubstr("(it would need a landing guard)"));
  EXPECT_THAT(s.message(), HasSubstr("host proxy"));
}

// World 4, "data" [4, 4] f32, one channel per rank; rank r starts with row r.
plan::Plan CustomPlan(std::vector<plan::Transfer> transfers) {
  plan::Plan p = testing::OneBufferPlan("custom.cross_node", 4, {4, 4});
  for (plan::Transfer& t : transfers) {
    t.src_buffer = t.dst_buffer = "data";
    t.src_region = t.dst_region = plan::Region::Slab({4, 4}, 0, t.src_rank(), t.src_rank() + 1);
    p.ranks[t.rank].channels[0].push_back(t);
  }
  return p;
}

plan::Transfer Push(int id, int from, int to, int signal, std::vector<int> deps = {}) {
  plan::Transfer t;
  t.id = id;
  t.rank = from;
  t.peer = to;
  t.signal = signal;
  t.deps = std::move(deps);
  return t;
}

TEST(NodeMapLoweringTest, StepDependingOnAnotherNodeIsUnimplemented) {
  // Transfer 1 (node 0) waits for transfer 0, which lands on rank 3 on node 1.
  const plan::Plan plan = CustomPlan({Push(0, 2, 3, 0), Push(1, 0, 1, 0, {0})});
  const KernelSpec spec = testing::TinyCopySpec(4, 4, 1, "data", "");
  ASSERT_TRUE(Lower(plan, spec).ok());
  absl::Status s = Lower(plan, spec, kTwoByTwo).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(s.message(), HasSubstr("transfer 1 (rank 0 on node 0, channel 0) depends on "
                                     "transfer 0 (push, rank 2 on node 1 -> rank 3 on node 1)"));
  EXPECT_THAT(s.message(), HasSubstr("cannot observe a signal set on another node"));
}

TEST(NodeMapLoweringTest, InterNodeDepsTheProxyCanObserve) {
  const KernelSpec spec = testing::TinyCopySpec(4, 4, 1, "data", "");
  // 0 -> 1 lands on the proxy's node; 1 -> 2 crosses after it; 2 -> 0 crosses after an
  // inter-node transfer (seen over UCX); 2 -> 3 is an intra-node forward of an arrival.
  const plan::Plan ok = CustomPlan(
      {Push(0, 0, 1, 0), Push(1, 1, 2, 0, {0}), Push(2, 2, 0, 0, {1}), Push(3, 2, 3, 0, {1})});
  auto lw = Lower(ok, spec, kTwoByTwo);
  ASSERT_TRUE(lw.ok()) << lw.status();
  CheckNodeSplit(ok, spec, kTwoByTwo, *lw);
  EXPECT_EQ(lw->ranks[1].proxied, std::vector<int>{1});
  EXPECT_EQ(lw->ranks[2].proxied, std::vector<int>{2});
  ASSERT_EQ(lw->ranks[2].program[0].size(), 1u);
  EXPECT_EQ(lw->ranks[2].program[0][0].transfer, 3);

  // 0 -> 2 would wait for 2 -> 3, an intra-node signal of the other node.
  const plan::Plan bad = CustomPlan({Push(0, 2, 3, 0), Push(1, 0, 2, 0, {0})});
  absl::Status s = Lower(bad, spec, kTwoByTwo).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(s.message(), HasSubstr("inter-node transfer 1 (push, rank 0 on node 0 -> rank 2 on "
                                     "node 1) depends on transfer 0"));
}

TEST(NodeMapLoweringTest, MalformedNodeMapsAreInvalid) {
  const plan::Plan plan = AllGatherPlan("ring", 4, 64, 8, 1);
  const KernelSpec spec = GemmSpecForAllGather(64, 32, 8, plan::DType::kBF16, 16, 32);
  absl::Status s = Lower(plan, spec, {0, 0, 1}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("node map has 3 entries for world size 4"));
  s = Lower(plan, spec, {0, 0, -1, 1}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("node map gives rank 2 node -1"));
  // One node, whatever its id, is the single-node schedule.
  auto one = Lower(plan, spec, {3, 3, 3, 3});
  ASSERT_TRUE(one.ok()) << one.status();
  for (const RankSchedule& rs : one->ranks) EXPECT_TRUE(rs.proxied.empty());
}

// Every template on 2 nodes x 2 ranks, against a kernel consuming / producing its buffers:
// either it lowers with the node split intact, or the proxy cannot carry it (Unimplemented).
// The expected split is spelled out so that a template changing sides is noticed.
TEST(NodeMapLoweringTest, EveryTemplateOnTwoNodes) {
  const std::set<std::string> lowers = {"allgather.push",   "allgather.ring",
                                        "allgather.biring", "allgather.two_level",
                                        "alltoall.uniform", "alltoall.variable"};
  const std::set<std::string> refused = {
      "allgather.pull",          "reducescatter.ring",  "reducescatter.direct",
      "reducescatter.two_level", "allreduce.rs_ag",     "allreduce.direct",
      "allreduce.split",         "allreduce.two_level", "reducescatter.direct_inplace",
      "allreduce.direct_out"};
  std::set<std::string> got_lowers, got_refused;
  for (const std::string& name : plan::TemplateNames()) {
    SCOPED_TRACE(name);
    plan::TemplateParams p = TwoLevelParams({16, 4}, 2);
    p.dtype = plan::DType::kF32;
    p.sub_collectives = 2;
    std::string consumed, produced;
    if (name.rfind("allgather.", 0) == 0) {
      consumed = "data";
    } else if (name.rfind("reducescatter.", 0) == 0) {
      produced = "input";
    } else if (name.rfind("allreduce.", 0) == 0) {
      produced = "data";
    } else {
      p.produced_by_compute = true;
      consumed = "recv";
      produced = "send";
      if (name == "alltoall.variable") {
        p.splits.assign(4, std::vector<int64_t>(4));
        for (int s = 0; s < 4; ++s) {
          for (int d = 0; d < 4; ++d) p.splits[s][d] = 2 + (s + d) % 2;
        }
      }
    }
    const plan::Plan plan = TemplatePlan(name, p);
    const KernelSpec spec = RowSpec(plan, consumed, produced, 2);
    ASSERT_TRUE(Lower(plan, spec).ok());
    auto lw = Lower(plan, spec, kTwoByTwo);
    if (lw.ok()) {
      got_lowers.insert(name);
      CheckNodeSplit(plan, spec, kTwoByTwo, *lw);
      size_t proxied = 0;
      for (const RankSchedule& rs : lw->ranks) proxied += rs.proxied.size();
      EXPECT_GT(proxied, 0u);
    } else {
      got_refused.insert(name);
      EXPECT_EQ(lw.status().code(), absl::StatusCode::kUnimplemented) << lw.status();
      EXPECT_THAT(lw.status().message(), HasSubstr("transfer "));
    }
  }
  EXPECT_EQ(got_lowers, lowers);
  EXPECT_EQ(got_refused, refused);
}

}  // namespace
}  // namespace syncopate::jit
