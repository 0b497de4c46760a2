// Tests for jit/nvrtc: cubins for real archs, errors with line numbers and source text, missing
// name expressions, deadline cancellation, and the PTX fallback for archs newer than NVRTC knows.
#include "jit/nvrtc/nvrtc_compiler.h"

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::nvrtc {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kScaleKernel[] = R"(
extern "C" __global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
template <int kVec>
__global__ void add(float* x, const float* y) { x[threadIdx.x * kVec] += y[threadIdx.x]; }
)";

bool IsElf(const std::string& binary) {
  return binary.rfind(
             "\x7f"
             "ELF",
             0) == 0;
}

CompileOptions Options(std::string arch) {
  CompileOptions options;
  options.arch = std::move(arch);
  options.program_name = "scale.cu";
  return options;
}

class NvrtcArchTest : public ::testing::TestWithParam<std::string> {};

TEST_P(NvrtcArchTest, CompilesCubin) {
  CompileOptions options = Options(GetParam());
  options.name_expressions = {"scale", "add<4>"};
  absl::StatusOr<CompiledKernel> kernel = Compile(kScaleKernel, options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_FALSE(kernel->is_ptx);
  EXPECT_EQ(kernel->target, GetParam());
  EXPECT_TRUE(IsElf(kernel->binary));
  EXPECT_EQ(kernel->nvrtc_version, NvrtcVersion());
  EXPECT_GT(kernel->compile_ms, 0);
  EXPECT_EQ(kernel->lowered_names.at("scale"), "scale");
  EXPECT_THAT(kernel->lowered_names.at("add<4>"), HasSubstr("add"));
}

INSTANTIATE_TEST_SUITE_P(Archs, NvrtcArchTest, ::testing::Values("sm_80", "sm_90", "sm_90a"));

TEST(NvrtcTest, VersionAndArchs) {
  EXPECT_THAT(NvrtcVersion(), ::testing::MatchesRegex("[0-9]+\\.[0-9]+"));
  ASSERT_FALSE(SupportedArchs().empty());
  EXPECT_THAT(SupportedArchs(), ::testing::Contains(90));
}

TEST(NvrtcTest, SyntaxErrorNamesLineAndSourceText) {
  const std::string source =
      "extern \"C\" __global__ void broken(float* x) {\n"
      "  x[0] = 1.0f\n"
      "  int missing_semicolon_before_me = 2;\n"
      "}\n";
  absl::StatusOr<CompiledKernel> kernel = Compile(source, Options("sm_90"));
  ASSERT_EQ(kernel.status().code(), absl::StatusCode::kInvalidArgument) << kernel.status();
  EXPECT_THAT(kernel.status().message(),
              AllOf(HasSubstr("scale.cu"), HasSubstr("scale.cu:3: error"),
                    HasSubstr("3 |   int missing_semicolon_before_me = 2;"), HasSubstr("sm_90")));
}

TEST(NvrtcTest, ErrorInHeaderShowsHeaderLine) {
  CompileOptions options = Options("sm_90");
  options.headers["tile.cuh"] = "#pragma once\nconstexpr int kTile = ;\n";
  absl::StatusOr<CompiledKernel> kernel =
      Compile("#include \"tile.cuh\"\nextern \"C\" __global__ void k() {}\n", options);
  ASSERT_EQ(kernel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(kernel.status().message(),
              AllOf(HasSubstr("tile.cuh:2: error"), HasSubstr("2 | constexpr int kTile = ;")));
}

TEST(NvrtcTest, HeadersAndOptionsAreUsed) {
  CompileOptions options = Options("sm_90");
  options.headers["params.cuh"] = "#pragma once\nconstexpr int kScale = SCALE;\n";
  options.extra_options = {"-DSCALE=3", "-std=c++17"};
  options.name_expressions = {"k"};
  absl::StatusOr<CompiledKernel> kernel = Compile(
      "#include \"params.cuh\"\nextern \"C\" __global__ void k(int* x) { x[0] = kScale; }\n",
      options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_TRUE(IsElf(kernel->binary));
}

TEST(NvrtcTest, MissingEntryIsNamed) {
  CompileOptions options = Options("sm_90");
  options.name_expressions = {"scale", "fused_entry_that_does_not_exist"};
  absl::StatusOr<CompiledKernel> kernel = Compile(kScaleKernel, options);
  ASSERT_EQ(kernel.status().code(), absl::StatusCode::kInvalidArgument) << kernel.status();
  EXPECT_THAT(kernel.status().message(),
              AllOf(HasSubstr("name expression 'fused_entry_that_does_not_exist' is not defined"),
                    HasSubstr("scale.cu"), Not(HasSubstr("'scale'"))));
}

// Hundreds of distinct non-inlined template instantiations, each with an unrolled loop: seconds
// of NVRTC time (measured ~3 s on the dev machine), so a 1 ms deadline always expires mid-way.
constexpr char kHeavyKernel[] = R"(
template <int N> struct Heavy {
  __device__ __noinline__ static float Run(float x) {
    float y = Heavy<N - 1>::Run(x * 1.0001f + N);
#pragma unroll
    for (int i = 0; i < 16; ++i) y = y * 0.999f + __sinf(y + i * N);
    return y;
  }
};
template <> struct Heavy<0> { __device__ static float Run(float x) { return x; } };
extern "C" __global__ void heavy(float* out) {
  out[threadIdx.x] = Heavy<200>::Run(out[threadIdx.x]);
}
)";

TEST(NvrtcTest, DeadlineCancelsCompile) {
  CompileOptions options = Options("sm_90");
  options.program_name = "heavy.cu";
  options.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
  absl::StatusOr<CompiledKernel> kernel = Compile(kHeavyKernel, options);
  ASSERT_EQ(kernel.status().code(), absl::StatusCode::kDeadlineExceeded) << kernel.status();
  EXPECT_THAT(kernel.status().message(), HasSubstr("heavy.cu"));
}

TEST(NvrtcTest, DeadlineAlreadyPassed) {
  CompileOptions options = Options("sm_90");
  options.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  EXPECT_EQ(Compile(kScaleKernel, options).status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(NvrtcTest, GenerousDeadlineCompiles) {
  CompileOptions options = Options("sm_90");
  options.deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  absl::StatusOr<CompiledKernel> kernel = Compile(kScaleKernel, options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
}

// Decision: an arch newer than this NVRTC knows gets PTX for the newest supported arch at or
// below it (the driver JITs PTX forward), so "sm_999" -> compute_<newest>.
TEST(NvrtcTest, UnknownNewerArchFallsBackToPtx) {
  absl::StatusOr<CompiledKernel> kernel = Compile(kScaleKernel, Options("sm_999"));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_TRUE(kernel->is_ptx);
  EXPECT_EQ(kernel->target, "compute_" + std::to_string(SupportedArchs().back()));
  EXPECT_THAT(kernel->binary, AllOf(HasSubstr(".version"), HasSubstr(".entry scale")));
}

TEST(NvrtcTest, UnknownArchWithoutFallbackIsAnError) {
  CompileOptions options = Options("sm_999");
  options.want_ptx_fallback = false;
  absl::StatusOr<CompiledKernel> kernel = Compile(kScaleKernel, options);
  ASSERT_EQ(kernel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(kernel.status().message(), AllOf(HasSubstr("sm_999"), HasSubstr("sm_90")));
}

TEST(NvrtcTest, ArchOlderThanAnySupportedIsAnError) {
  absl::StatusOr<CompiledKernel> kernel = Compile(kScaleKernel, Options("sm_10"));
  ASSERT_EQ(kernel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(kernel.status().message(), HasSubstr("older than every supported arch"));
}

TEST(NvrtcTest, VirtualArchGivesPtx) {
  absl::StatusOr<CompiledKernel> kernel = Compile(kScaleKernel, Options("compute_90"));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_TRUE(kernel->is_ptx);
  EXPECT_THAT(kernel->binary, HasSubstr(".target sm_90"));
}

TEST(NvrtcTest, BadArchStrings) {
  for (const char* arch : {"native", "sm90", "sm_", "sm_9x", "gfx90a", ""}) {
    EXPECT_EQ(Compile(kScaleKernel, Options(arch)).status().code(),
              absl::StatusCode::kInvalidArgument)
        << arch;
  }
  EXPECT_THAT(Compile(kScaleKernel, Options("native")).status().message(),
              HasSubstr("resolved by the caller"));
}

TEST(NvrtcTest, ArchInExtraOptionsIsRejected) {
  CompileOptions options = Options("sm_90");
  options.extra_options = {"--gpu-architecture=sm_80"};
  EXPECT_THAT(Compile(kScaleKernel, options).status().message(), HasSubstr("CompileOptions::arch"));
}

TEST(NvrtcTest, UnknownOptionIsInvalidArgument) {
  CompileOptions options = Options("sm_90");
  options.extra_options = {"--no-such-option"};
  absl::StatusOr<CompiledKernel> kernel = Compile(kScaleKernel, options);
  ASSERT_EQ(kernel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(kernel.status().message(), HasSubstr("--no-such-option"));
}

}  // namespace
}  // namespace syncopate::nvrtc
