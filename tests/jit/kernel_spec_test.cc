// Kernel specs: text format round trip, validation errors, and mismatches against a plan named
// by operand and dimension.
#include "jit/compiler/kernel_spec.h"

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "tests/jit/test_plans.h"

namespace syncopate::jit {
namespace {

void ExpectError(const absl::Status& s, absl::StatusCode code, const std::string& fragment) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_NE(s.message().find(fragment), std::string::npos)
      << "message \"" << s.message() << "\" lacks \"" << fragment << "\"";
}

TEST(KernelSpecTest, FactoriesAreValidAndRoundTrip) {
  for (const KernelSpec& spec :
       {GemmSpecForAllGather(4096, 4096, 4096, plan::DType::kBF16),
        GemmSpecForReduceScatter(1000, 300, 64, plan::DType::kF16, 64, 64),
        RmsNormSpecForAllGather(128, 512, plan::DType::kF32)}) {
    ASSERT_TRUE(ValidateKernelSpec(spec).ok()) << ValidateKernelSpec(spec);
    const std::string text = FormatKernelSpec(spec);
    auto parsed = ParseKernelSpec(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
    EXPECT_EQ(*parsed, spec) << text;
    EXPECT_EQ(FormatKernelSpec(*parsed), text);
  }
}

// A kernel that is not a template formats as "template_args = " and must read back as one (the
// daemon parses what CompileRequestFor formats; it once read an empty argument and refused).
TEST(KernelSpecTest, NonTemplateKernelRoundTrips) {
  KernelSpec spec = GemmSpecForAllGather(256, 128, 64, plan::DType::kBF16);
  spec.template_args.clear();
  auto parsed = ParseKernelSpec(FormatKernelSpec(spec));
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << FormatKernelSpec(spec);
  EXPECT_TRUE(parsed->template_args.empty());
  EXPECT_EQ(*parsed, spec);
}

TEST(KernelSpecTest, ParsesTextFormat) {
  auto spec = ParseKernelSpec(R"(
# AllGather + GEMM
name = ag
entry = ns::gemm
template_args = __nv_bfloat16, 128, 64
problem_m = 1000      # not a multiple of the tile
problem_n = 300
tile_m = 128
tile_n = 64
group_m = 4
block_threads = 256
dynamic_smem_bytes = 1024
operand = A bf16 consumed data 1000x64 128*m:128 *
operand = B bf16 local - 300x64 64*n:64 *
operand = C bf16 local - 1000x300 128*m:128 64*n+0:64
scalar = M i32 1000
scalar = eps f32 1e-5
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->tiles_m(), 8);
  EXPECT_EQ(spec->tiles_n(), 5);
  const auto ops = spec->Operands();
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0]->role, OperandRole::kConsumed);
  EXPECT_EQ(ops[0]->buffer, "data");
  EXPECT_TRUE(ops[1]->buffer.empty());
  EXPECT_EQ(ops[2]->footprint[1].begin, (AffineExpr{0, 64, 0}));
  // Footprints clip to the shape: the last tile row holds 1000 - 7 * 128 = 104 rows.
  EXPECT_EQ(ops[0]->Footprint(7, 0).ToString(), "[896:1000,0:64)");
  EXPECT_EQ(ops[2]->Footprint(7, 4).ToString(), "[896:1000,256:300)");
}

// push_tiles: written only when set, so every spec without it formats (and hashes) as it did
// before the key existed; a value other than true/false is an error naming the key.
TEST(KernelSpecTest, PushTilesRoundTripsAndIsWrittenOnlyWhenSet) {
  KernelSpec spec = GemmSpecForReduceScatter(256, 256, 64, plan::DType::kBF16);
  EXPECT_EQ(FormatKernelSpec(spec).find("push_tiles"), std::string::npos);
  spec.push_tiles = true;
  const std::string text = FormatKernelSpec(spec);
  EXPECT_NE(text.find("push_tiles = true\n"), std::string::npos) << text;
  auto parsed = ParseKernelSpec(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->push_tiles);
  EXPECT_EQ(*parsed, spec);
  auto off = ParseKernelSpec(text.substr(0, text.find("push_tiles")) + "push_tiles = false\n");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->push_tiles);
  ExpectError(ParseKernelSpec("entry = k\npush_tiles = yes\n").status(),
              absl::StatusCode::kInvalidArgument,
              "line 2: spec key push_tiles: \"yes\" is not true or false");
}

TEST(KernelSpecTest, AffineExpressions) {
  auto spec = ParseKernelSpec(
      "entry = k\nproblem_m = 4\nproblem_n = 4\ntile_m = 1\ntile_n = 1\n"
      "operand = X f32 local - 100x100 -m+3*n+10:2 m+n:1\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const OperandSpec& x = *spec->Operands()[0];
  EXPECT_EQ(x.footprint[0].begin, (AffineExpr{-1, 3, 10}));
  EXPECT_EQ(x.footprint[0].ToString(), "-m+3*n+10:2");
  EXPECT_EQ(x.footprint[1].begin, (AffineExpr{1, 1, 0}));
}

TEST(KernelSpecTest, ParseErrorsNameLineAndField) {
  ExpectError(ParseKernelSpec("entry = k\nbogus = 1\n").status(), absl::StatusCode::kInvalidArgument,
              "line 2: unknown key \"bogus\"");
  ExpectError(ParseKernelSpec("entry = k\noperand = A f32 sideways d 4x4 * *\n").status(),
              absl::StatusCode::kInvalidArgument, "operand A: unknown role \"sideways\"");
  ExpectError(ParseKernelSpec("entry = k\noperand = A f32 local - 4x4 4*q:4 *\n").status(),
              absl::StatusCode::kInvalidArgument, "operand A: unknown variable 'q' in \"4*q\"");
  ExpectError(ParseKernelSpec("entry = k\nscalar = M i32 4.5\n").status(),
              absl::StatusCode::kInvalidArgument, "line 2: scalar M: \"4.5\" is not an integer");
  ExpectError(ParseKernelSpec("entry = 3k\n").status(), absl::StatusCode::kInvalidArgument,
              "entry \"3k\"");
}

TEST(KernelSpecTest, ValidationErrorsNameTheOperand) {
  KernelSpec spec = GemmSpecForAllGather(256, 256, 64, plan::DType::kBF16);
  std::get<OperandSpec>(spec.params[0]).footprint.pop_back();
  ExpectError(ValidateKernelSpec(spec), absl::StatusCode::kInvalidArgument,
              "operand A (consumed, plan buffer \"data\"): footprint has 1 axes but the shape "
              "256x64 has 2");
  spec = GemmSpecForReduceScatter(256, 256, 64, plan::DType::kBF16);
  std::get<OperandSpec>(spec.params[2]).buffer.clear();
  ExpectError(ValidateKernelSpec(spec), absl::StatusCode::kInvalidArgument,
              "operand C (produced): a produced operand must be bound to a plan buffer");
  spec = GemmSpecForAllGather(256, 256, 64, plan::DType::kBF16);
  spec.params.push_back(ScalarSpec{"A", ScalarType::kI32, "1"});
  ExpectError(ValidateKernelSpec(spec), absl::StatusCode::kInvalidArgument,
              "parameter A appears twice");
}

TEST(KernelSpecTest, PlanMismatchNamesOperandAndDimension) {
  const plan::Plan plan = testing::AllGatherPlan("ring", 4, 4000, 4096, 1);
  KernelSpec spec = GemmSpecForAllGather(4000, 1024, 4096, plan::DType::kBF16);
  EXPECT_TRUE(CheckSpecAgainstPlan(spec, plan).ok()) << CheckSpecAgainstPlan(spec, plan);

  std::get<OperandSpec>(spec.params[0]).shape = {4096, 4096};
  ExpectError(CheckSpecAgainstPlan(spec, plan), absl::StatusCode::kInvalidArgument,
              "operand A (consumed, plan buffer \"data\"): dim 0 is 4096 in the spec but 4000 in "
              "the plan");
  spec = GemmSpecForAllGather(4000, 1024, 4000, plan::DType::kBF16);
  ExpectError(CheckSpecAgainstPlan(spec, plan), absl::StatusCode::kInvalidArgument,
              "operand A (consumed, plan buffer \"data\"): dim 1 is 4000 in the spec but 4096 in "
              "the plan");
  spec = GemmSpecForAllGather(4000, 1024, 4096, plan::DType::kF16);
  ExpectError(CheckSpecAgainstPlan(spec, plan), absl::StatusCode::kInvalidArgument,
              "operand A (consumed, plan buffer \"data\"): dtype is f16 in the spec but bf16 in the "
              "plan");
  spec = GemmSpecForReduceScatter(4000, 4096, 64, plan::DType::kBF16);
  ExpectError(CheckSpecAgainstPlan(spec, plan), absl::StatusCode::kInvalidArgument,
              "operand C (produced, plan buffer \"input\"): plan \"" + plan.name +
                  "\" has no such buffer (it has \"data\")");
  spec = GemmSpecForAllGather(4000, 1024, 4096, plan::DType::kBF16);
  std::get<OperandSpec>(spec.params[0]).shape = {4000, 64, 64};
  std::get<OperandSpec>(spec.params[0]).footprint.push_back(AxisFootprint{});
  ExpectError(CheckSpecAgainstPlan(spec, plan), absl::StatusCode::kInvalidArgument,
              "operand A (consumed, plan buffer \"data\"): rank is 3 in the spec");
}

TEST(KernelSpecTest, ExampleSpecFilesMatchFactories) {
  const std::string dir = SYNCOPATE_EXAMPLES_DIR;
  const std::pair<const char*, KernelSpec> cases[] = {
      {"gemm_allgather.spec", GemmSpecForAllGather(8192, 4096, 4096, plan::DType::kBF16)},
      {"gemm_reducescatter.spec", GemmSpecForReduceScatter(8192, 4096, 4096, plan::DType::kBF16)}};
  for (const auto& [file, want] : cases) {
    std::ifstream in(dir + "/" + file);
    ASSERT_TRUE(in.good()) << file;
    std::stringstream text;
    text << in.rdbuf();
    auto spec = ParseKernelSpec(text.str());
    ASSERT_TRUE(spec.ok()) << file << ": " << spec.status();
    EXPECT_EQ(*spec, want) << file;
  }
}

// The wgmma kernel stages its epilogue through shared memory only when the staging tile fits
// beside the stages in Hopper's 227 KB less a fused kernel's static shared memory; the host's
// size and the kernel's rule must agree.
TEST(GemmWgmmaSmemBytes, AddsTheStagingTileOnlyWhereItFits) {
  EXPECT_EQ(kHopperMaxDynamicSmem + kFusedStaticSmemReserve, 232448);
  EXPECT_EQ(GemmWgmmaSmemBytes(128, 256, 3), 3 * 384 * 128 + 2048 + 128 * 256 * 2);  // 215040
  EXPECT_EQ(GemmWgmmaSmemBytes(128, 256, 4), 4 * 384 * 128 + 2048);  // no room: registers
  EXPECT_EQ(GemmWgmmaSmemBytes(128, 128, 5), 5 * 256 * 128 + 2048 + 128 * 128 * 2);  // 198656
  // 231,424 with the staging tile: over the 230,400 left beside the static reserve.
  EXPECT_EQ(GemmWgmmaSmemBytes(128, 128, 6), 6 * 256 * 128 + 2048);
  EXPECT_GT(GemmWgmmaSmemBytes(128, 128, 7), kHopperMaxDynamicSmem);  // not a configuration
  for (int stages = 2; stages <= 6; ++stages) {
    EXPECT_LE(GemmWgmmaSmemBytes(128, 128, stages), kHopperMaxDynamicSmem) << stages;
  }
  EXPECT_EQ(GemmWgmmaSpecForAllGather(8192, 8192, 8192, plan::DType::kBF16).dynamic_smem_bytes,
            215040);
}

}  // namespace
}  // namespace syncopate::jit
