// Generated source: byte-for-byte golden files for small cases (regenerate with
// SYNCOPATE_UPDATE_GOLDEN=1), determinism, and the launch metadata the runtime relies on.
#include "jit/compiler/codegen.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "jit/compiler/embedded_headers.h"
#include "tests/jit/test_plans.h"

namespace syncopate::jit {
namespace {

using testing::AllGatherPlan;
using testing::ReduceScatterPlan;

void CheckGolden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(SYNCOPATE_GOLDEN_DIR) + "/" + name;
  const char* update = std::getenv("SYNCOPATE_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << actual;
    GTEST_SKIP() << "wrote " << path;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << "missing golden file " << path
                         << "; run with SYNCOPATE_UPDATE_GOLDEN=1 to create it";
  std::stringstream expected;
  expected << in.rdbuf();
  if (expected.str() != actual) {
    // Point at the first differing line.
    std::istringstream a(actual), e(expected.str());
    std::string la, le;
    int line = 1;
    while (std::getline(a, la) && std::getline(e, le) && la == le) ++line;
    FAIL() << name << " differs from the golden file at line " << line << ":\n  golden: " << le
           << "\n  actual: " << la
           << "\nIf the change is intended, rerun with SYNCOPATE_UPDATE_GOLDEN=1 and review the diff.";
  }
}

TEST(CodegenGoldenTest, AllGatherPushTinyCopy) {
  const plan::Plan plan = AllGatherPlan("push", 2, 8, 4, 1, plan::DType::kF32);
  auto k = GenerateFusedKernel(plan, testing::TinyCopySpec(8, 4, 3, "data", ""), testing::kTinyKernel,
                               {"tiny_copy.cuh"});
  ASSERT_TRUE(k.ok()) << k.status();
  CheckGolden("allgather_push_tiny_copy.cu.golden", k->source);
}

TEST(CodegenGoldenTest, ReduceScatterRingTinyCopy) {
  const plan::Plan plan = ReduceScatterPlan("ring", 3, 12, 4, 1, plan::DType::kF32);
  auto k = GenerateFusedKernel(plan, testing::TinyCopySpec(12, 4, 4, "", "input"),
                               testing::kTinyKernel, {"tiny_copy.cuh"});
  ASSERT_TRUE(k.ok()) << k.status();
  CheckGolden("reducescatter_ring_tiny_copy.cu.golden", k->source);
}

TEST(CodegenGoldenTest, LocalTinyCopy) {
  auto k = GenerateLocalKernel(testing::TinyCopySpec(8, 4, 3, "", ""), testing::kTinyKernel,
                               {"tiny_copy.cuh"});
  ASSERT_TRUE(k.ok()) << k.status();
  CheckGolden("local_tiny_copy.cu.golden", k->source);
}

TEST(CodegenTest, Deterministic) {
  const std::string gemm(*ExampleKernelSource("gemm_mma.cuh"));
  for (const char* algo : {"ring", "push", "biring"}) {
    const plan::Plan a = AllGatherPlan(algo, 4, 1000, 64, 3);
    const plan::Plan b = AllGatherPlan(algo, 4, 1000, 64, 3);  // built independently
    const KernelSpec spec = GemmSpecForAllGather(1000, 200, 64, plan::DType::kBF16, 64, 64);
    auto ka = GenerateFusedKernel(a, spec, gemm);
    auto kb = GenerateFusedKernel(b, spec, gemm);
    ASSERT_TRUE(ka.ok() && kb.ok());
    EXPECT_EQ(ka->source, kb->source);
    EXPECT_EQ(ka->entry_symbol, kb->entry_symbol);
  }
  // A different plan or spec gives a different entry symbol.
  const KernelSpec spec = GemmSpecForAllGather(1000, 200, 64, plan::DType::kBF16, 64, 64);
  auto ring = GenerateFusedKernel(AllGatherPlan("ring", 4, 1000, 64, 3), spec, gemm);
  auto push = GenerateFusedKernel(AllGatherPlan("push", 4, 1000, 64, 3), spec, gemm);
  ASSERT_TRUE(ring.ok() && push.ok());
  EXPECT_NE(ring->entry_symbol, push->entry_symbol);
  auto local = GenerateLocalKernel(spec, gemm);
  ASSERT_TRUE(local.ok());
  EXPECT_NE(local->entry_symbol, ring->entry_symbol);
  EXPECT_EQ(local->entry_symbol.rfind("syncopate_local_gemm_mma_", 0), 0u);
  EXPECT_EQ(ring->entry_symbol.rfind("syncopate_fused_gemm_mma_", 0), 0u);
}

TEST(CodegenTest, SourceShape) {
  const plan::Plan plan = AllGatherPlan("ring", 2, 256, 64, 1);
  const KernelSpec spec = GemmSpecForAllGather(256, 128, 64, plan::DType::kBF16);
  auto k = GenerateFusedKernel(plan, spec, "// kernel text\n", {"gemm_mma.cuh"});
  ASSERT_TRUE(k.ok()) << k.status();
  const std::string& s = k->source;
  EXPECT_NE(s.find(plan::PlanHash(plan)), std::string::npos);
  EXPECT_NE(s.find("#include <syncopate/device.cuh>"), std::string::npos);
  EXPECT_NE(s.find("#include <cuda_bf16.h>"), std::string::npos);
  EXPECT_NE(s.find("// kernel text\n"), std::string::npos);
  EXPECT_NE(s.find("extern \"C\" __global__ void __launch_bounds__(256)\n" + k->entry_symbol +
                   "(syncopate::FusedLaunchArgs args) {"),
            std::string::npos);
  EXPECT_NE(s.find("syncopate_examples::gemm_mma<Schedule, __nv_bfloat16, 128, 128>("),
            std::string::npos);
  EXPECT_NE(s.find("static_cast<__nv_bfloat16*>(args.operands[0])  /* A */"), std::string::npos);
  EXPECT_NE(s.find("static_cast<int>(256)  /* M */"), std::string::npos);
  // The device headers travel as NVRTC headers.
  for (const char* h : {"syncopate/device.cuh", "syncopate/launch_abi.h",
                        "syncopate/impl/schedule.cuh", "syncopate/impl/comm.cuh"}) {
    EXPECT_EQ(k->headers.count(h), 1u) << h;
  }
}

TEST(CodegenTest, MetadataForGemmReduceScatter) {
  const plan::Plan plan = ReduceScatterPlan("ring", 4, 512, 256, 2);
  const KernelSpec spec = GemmSpecForReduceScatter(512, 256, 64, plan::DType::kBF16);
  auto lw = Lower(plan, spec);
  ASSERT_TRUE(lw.ok()) << lw.status();
  auto k = GenerateFusedKernel(*lw, spec, "");
  ASSERT_TRUE(k.ok()) << k.status();
  const LaunchMetadata& md = k->metadata;
  EXPECT_TRUE(md.fused);
  EXPECT_EQ(md.block_dim, 256);
  EXPECT_EQ(md.dynamic_smem_bytes, 61440);
  EXPECT_EQ(md.tiles_m, 4);
  EXPECT_EQ(md.tiles_n, 2);
  EXPECT_EQ(md.num_tiles, 8);
  EXPECT_EQ(md.world_size, 4);
  EXPECT_EQ(md.num_plan_signals, lw->plan_signals);
  EXPECT_EQ(md.num_signals, lw->max_signals);
  EXPECT_GT(md.num_signals, md.num_plan_signals);  // landing guards follow the plan's signals
  EXPECT_EQ(md.num_outgoing_chunks, lw->max_outgoing);
  ASSERT_EQ(md.outgoing_transfers.size(), 4u);
  ASSERT_EQ(md.landing_guards.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(md.outgoing_transfers[r].size(),
              lw->ranks[r].outgoing.size() + lw->ranks[r].guards.size());
    EXPECT_EQ(md.landing_guards[r].size(), lw->ranks[r].guards.size());
  }
  EXPECT_GE(md.suggested_comm_ctas, 1);
  // A, B, C from the spec, then the plan-only "output" slot.
  ASSERT_EQ(md.operands.size(), 4u);
  EXPECT_EQ(md.operands[2].buffer, "input");
  EXPECT_EQ(md.operands[3].name, "output");
  EXPECT_FALSE(md.operands[3].kernel_param);
  EXPECT_TRUE(md.operands[3].needs_identity_fill);
  EXPECT_EQ(md.operands[3].bytes, 128 * 256 * 2);
  EXPECT_EQ(md.plan_hash, plan::PlanHash(plan));
}

// Tile parts (KernelSpec::push_tiles): chunk kind 3, each tile's part as a row range of
// kSegments after the transfers' own rows, and the Tables members TilePartsOf looks for; a
// schedule without parts emits none of it (its source is what it always was), and the two get
// different entry symbols.
TEST(CodegenTest, TilePartsTables) {
  const plan::Plan plan = ReduceScatterPlan("direct", 2, 64, 32, 1);
  KernelSpec spec = GemmSpecForReduceScatter(64, 32, 16, plan::DType::kBF16, 16, 32);
  auto whole = GenerateFusedKernel(plan, spec, "");
  ASSERT_TRUE(whole.ok()) << whole.status();
  spec.push_tiles = true;
  auto lw = Lower(plan, spec);
  ASSERT_TRUE(lw.ok()) << lw.status();
  auto parts = GenerateFusedKernel(*lw, spec, "");
  ASSERT_TRUE(parts.ok()) << parts.status();
  for (const char* member : {"kTileParts", "kTileOutSegs", "tile_out_segs()"}) {
    EXPECT_EQ(whole->source.find(member), std::string::npos) << member;
    EXPECT_NE(parts->source.find(member), std::string::npos) << member;
  }
  EXPECT_NE(parts->source.find("static constexpr bool kTileParts = true;"), std::string::npos);
  // 64-byte rows of bf16 summed: a kernel may move the parts from its staged tile.
  EXPECT_NE(parts->source.find("static constexpr bool kTilePartsVec16 = true;"), std::string::npos);
  EXPECT_NE(whole->entry_symbol, parts->entry_symbol);
  // 4 tiles of 16 rows per rank, 2 ranks' slabs of 32 rows: each tile writes one chunk (its
  // rank's push or own contribution), whose part is the tile's 16 rows of 64 bytes.
  size_t transfer_rows = 0;
  for (const auto& s : lw->segments) transfer_rows += s.size();
  std::string want = "    // rank 0 tile 0: its part of transfer";
  EXPECT_NE(parts->source.find(want), std::string::npos);
  for (const RankSchedule& rs : lw->ranks) {
    for (const OutgoingChunk& c : rs.outgoing) {
      EXPECT_TRUE(c.tile_parts);
      EXPECT_EQ(c.producers, 2);
    }
  }
  // Rank 0's first entry: rows [transfer_rows, transfer_rows + 1) of kSegments.
  EXPECT_NE(parts->source.find(absl::StrCat("kTileOutSegs[", 2 * 2 * 4, "] = {\n    ",
                                            transfer_rows, ", ", transfer_rows + 1, ",")),
            std::string::npos)
      << parts->source.substr(parts->source.find("kTileOutSegs["), 200);
  // kind 3 in every outgoing chunk row (its last field).
  EXPECT_NE(parts->source.find(", 3 tile parts)}"), std::string::npos);
  EXPECT_EQ(parts->metadata.suggested_comm_ctas, 0);  // no program step on any rank
  // The local kernel does not depend on the fused schedule's choice.
  auto local_parts = GenerateLocalKernel(spec, "");
  spec.push_tiles = false;
  auto local = GenerateLocalKernel(spec, "");
  ASSERT_TRUE(local_parts.ok() && local.ok());
  EXPECT_EQ(local_parts->entry_symbol, local->entry_symbol);
  EXPECT_EQ(local_parts->source, local->source);
}

// Sums of f32 have no 16-byte vector atomic: those parts move as they always did, never from a
// kernel's staged tile.
TEST(CodegenTest, TilePartsOfF32SumsAreNotVec16) {
  const plan::Plan plan = ReduceScatterPlan("direct", 2, 64, 32, 1, plan::DType::kF32);
  KernelSpec spec = GemmSpecForReduceScatter(64, 32, 16, plan::DType::kF32, 16, 32);
  spec.push_tiles = true;
  auto parts = GenerateFusedKernel(plan, spec, "");
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_NE(parts->source.find("static constexpr bool kTileParts = true;"), std::string::npos);
  EXPECT_NE(parts->source.find("static constexpr bool kTilePartsVec16 = false;"),
            std::string::npos);
}
TEST(CodegenTest, NodeMapsNeverShareASymbol) {
  plan::TemplateParams p;
  p.world_size = 4;
  p.ranks_per_node = 2;
  p.shape = {256, 64};
  auto plan = plan::BuildTemplate("allgather.two_level", p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const KernelSpec spec = GemmSpecForAllGather(256, 128, 64, plan::DType::kBF16, 64, 64);
  auto generate = [&](std::vector<int> nodes) {
    CodegenOptions o;
    o.nodes = std::move(nodes);
    auto k = GenerateFusedKernel(*plan, spec, "// kernel text\n", o);
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() ? *k : GeneratedKernel{};
  };
  const GeneratedKernel none = generate({});
  const GeneratedKernel one = generate({0, 0, 0, 0});
  const GeneratedKernel two = generate({0, 0, 1, 1});
  const GeneratedKernel swapped = generate({1, 1, 0, 0});
  // One node is the single-node kernel, byte for byte (and so the same cache key).
  EXPECT_EQ(none.source, one.source);
  EXPECT_EQ(none.entry_symbol, one.entry_symbol);
  EXPECT_EQ(none.source.find("nodes:"), std::string::npos);
  EXPECT_NE(two.source, none.source);
  EXPECT_NE(two.entry_symbol, none.entry_symbol);
  EXPECT_NE(two.entry_symbol, swapped.entry_symbol);
  EXPECT_NE(two.source.find("// nodes:   0 0 1 1 (node of each rank;"), std::string::npos);
  // The proxy's channel has no comm CTA any more.
  EXPECT_EQ(none.metadata.suggested_comm_ctas, 2);
  EXPECT_EQ(two.metadata.suggested_comm_ctas, 1);

  // From a lowered schedule the map is the schedule's; options may repeat it, not contradict it.
  auto lw = Lower(*plan, spec, {0, 0, 1, 1});
  ASSERT_TRUE(lw.ok()) << lw.status();
  auto from_lowered = GenerateFusedKernel(*lw, spec, "// kernel text\n");
  ASSERT_TRUE(from_lowered.ok()) << from_lowered.status();
  EXPECT_EQ(from_lowered->source, two.source);
  CodegenOptions other;
  other.nodes = {0, 1, 0, 1};
  auto contradicted = GenerateFusedKernel(*lw, spec, "// kernel text\n", other);
  EXPECT_EQ(contradicted.status().code(), absl::StatusCode::kInvalidArgument)
      << contradicted.status();

  // What the proxy cannot carry fails the plan overload.
  auto rs = plan::BuildTemplate("reducescatter.two_level", p);
  ASSERT_TRUE(rs.ok()) << rs.status();
  CodegenOptions o;
  o.nodes = {0, 0, 1, 1};
  auto k = GenerateFusedKernel(
      *rs, GemmSpecForReduceScatter(256, 64, 64, plan::DType::kBF16, 64, 64), "", o);
  EXPECT_EQ(k.status().code(), absl::StatusCode::kUnimplemented) << k.status();
}

TEST(CodegenTest, TooManySlotsIsAnError) {
  KernelSpec spec = testing::TinyCopySpec(12, 4, 4, "", "input");
  for (int i = 0; i < 7; ++i) {
    OperandSpec extra;
    extra.name = "E" + std::to_string(i);
    extra.dtype = plan::DType::kF32;
    extra.shape = {4};
    extra.footprint = {AxisFootprint{}};
    spec.params.push_back(extra);
  }
  auto k = GenerateFusedKernel(ReduceScatterPlan("ring", 3, 12, 4, 1, plan::DType::kF32), spec, "");
  EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace syncopate::jit
