// The shared build path: its cache-key inputs (every builder, daemon, runtime and CLI, must derive
// the same key for the same kernel, however the toolkit directory was spelled to it), what
// Prepare checks and derives, and the compile slots' bound.
#include "jit/build/kernel_build.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/plan/templates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_kernels.h"

namespace syncopate::jit {
namespace {

namespace fs = std::filesystem;

GeneratedKernel SomeKernel() {
  GeneratedKernel generated;
  generated.source = "extern \"C\" __global__ void k() {}";
  generated.entry_symbol = "k";
  return generated;
}

std::string KeyWith(const std::string& include_dir) {
  BuildOptions options;
  options.cuda_include_dir = include_dir;
  return cache::CacheKey::FromParts(CacheKeyPartsFor(SomeKernel(), "plan", options)).hex();
}

class ScratchDir : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("kernel_build_test." + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "cuda-13.0" / "include");
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

// CI found the toolkit as /usr/local/cuda-13.0/... while the runtime asked $CUDA_HOME: two
// spellings of one directory gave the daemon and the runtime different keys for one kernel.
TEST_F(ScratchDir, SymlinkedToolkitGivesTheSameKey) {
  fs::create_directory_symlink(root_ / "cuda-13.0", root_ / "cuda");
  EXPECT_EQ(KeyWith((root_ / "cuda" / "include").string()),
            KeyWith((root_ / "cuda-13.0" / "include").string()));
}

TEST_F(ScratchDir, DifferentToolkitsGiveDifferentKeys) {
  fs::create_directories(root_ / "cuda-12.8" / "include");
  EXPECT_NE(KeyWith((root_ / "cuda-12.8" / "include").string()),
            KeyWith((root_ / "cuda-13.0" / "include").string()));
}

// Writes `content` as the folder's cuda_bf16.h (the folder is made if need be).
void WriteBf16Header(const fs::path& include_dir, const std::string& content) {
  fs::create_directories(include_dir);
  std::ofstream(include_dir / "cuda_bf16.h") << content;
}

// A cache filled on the build host (toolkit at /usr/local/cuda-13.0/include) was never hit on the
// GPU machine, whose one toolkit canonicalises elsewhere: the key holds the headers' content.
TEST_F(ScratchDir, OneToolkitAtTwoPlacesGivesTheSameKey) {
  WriteBf16Header(root_ / "host" / "include", "#define BF16_VERSION 13000\n");
  WriteBf16Header(root_ / "gpu" / "targets" / "x86_64-linux" / "include",
                  "#define BF16_VERSION 13000\n");
  EXPECT_EQ(KeyWith((root_ / "host" / "include").string()),
            KeyWith((root_ / "gpu" / "targets" / "x86_64-linux" / "include").string()));
}

TEST_F(ScratchDir, OtherToolkitHeadersGiveAnotherKey) {
  WriteBf16Header(root_ / "a" / "include", "#define BF16_VERSION 13000\n");
  WriteBf16Header(root_ / "b" / "include", "#define BF16_VERSION 12080\n");
  EXPECT_NE(KeyWith((root_ / "a" / "include").string()),
            KeyWith((root_ / "b" / "include").string()));
}

// Sets (or, with nullptr, unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CudaIncludeDirTest, EnvironmentOverridesCudaHomeWhichOverridesTheBuild) {
  ScopedEnv no_override("SYNCOPATE_CUDA_INCLUDE", nullptr);
  {
    ScopedEnv home("CUDA_HOME", "/opt/cuda-home");
    EXPECT_EQ(CudaIncludeDir(), "/opt/cuda-home/include");
    ScopedEnv explicit_dir("SYNCOPATE_CUDA_INCLUDE", "/opt/toolkit/include");
    EXPECT_EQ(CudaIncludeDir(), "/opt/toolkit/include");
  }
  // Neither set: the toolkit this build was configured with.
  ScopedEnv no_home("CUDA_HOME", nullptr);
  EXPECT_EQ(CudaIncludeDir(), SYNCOPATE_BUILD_CUDA_INCLUDE);
}

// The default spelled explicitly is the same key as the default left empty, so a daemon told its
// directory in config and a runtime left to find it agree. (Guards against a second default
// creeping back in, which is how CI once saw two keys for one kernel.)
TEST(CudaIncludeDirTest, EmptyMeansTheDefault) { EXPECT_EQ(KeyWith(""), KeyWith(CudaIncludeDir())); }

plan::Plan TwoLevelAllGather() {
  plan::TemplateParams p;
  p.world_size = 4;
  p.ranks_per_node = 2;
  p.shape = {256, 64};
  p.dtype = plan::DType::kBF16;
  absl::StatusOr<plan::Plan> plan = plan::BuildTemplate("allgather.two_level", p);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : plan::Plan{};
}

const KernelSpec& GemmSpec() {
  static const KernelSpec kSpec = GemmSpecForAllGather(256, 128, 64, plan::DType::kBF16, 64, 64);
  return kSpec;
}

// What Prepare derives is what a build compiles and caches under: one key, computed once.
TEST(PrepareTest, KeyIsTheKeyOfItsOwnOptions) {
  BuildOptions options;
  options.arch = "sm_90a";
  auto prepared = PrepareFusedKernel(TwoLevelAllGather(), GemmSpec(), "// kernel\n", options);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(prepared->plan_hash, plan::PlanHash(TwoLevelAllGather()));
  EXPECT_EQ(prepared->key.hex(),
            cache::CacheKey::FromParts(
                CacheKeyPartsFor(prepared->generated, prepared->plan_hash, options))
                .hex());
  EXPECT_EQ(prepared->nvrtc_options.arch, "sm_90a");
  EXPECT_EQ(prepared->nvrtc_options.program_name, prepared->generated.entry_symbol + ".cu");
  EXPECT_FALSE(prepared->nvrtc_options.deadline.has_value());  // each build sets its own
  auto local = PrepareLocalKernel(GemmSpec(), "// kernel\n", options);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->plan_hash, "");
  EXPECT_NE(local->key.hex(), prepared->key.hex());
}

// The node map is part of the kernel, so of the key; one node is the single-node kernel.
TEST(PrepareTest, NodeMapIsInTheKey) {
  auto key_with = [](std::vector<int> nodes) {
    CodegenOptions codegen;
    codegen.nodes = std::move(nodes);
    auto prepared = PrepareFusedKernel(TwoLevelAllGather(), GemmSpec(), "// kernel\n", {}, codegen);
    EXPECT_TRUE(prepared.ok()) << prepared.status();
    return prepared.ok() ? prepared->key.hex() : "";
  };
  EXPECT_EQ(key_with({}), key_with({0, 0, 0, 0}));
  EXPECT_NE(key_with({}), key_with({0, 0, 1, 1}));
  EXPECT_NE(key_with({0, 0, 1, 1}), key_with({1, 1, 0, 0}));
}

// Every builder validates: the runtime once compiled plans nothing had checked.
TEST(PrepareTest, ErrorsNameThePartAtFault) {
  plan::Plan broken = TwoLevelAllGather();
  broken.world_size = 3;  // its transfers name rank 3
  auto invalid = PrepareFusedKernel(broken, GemmSpec(), "", {});
  EXPECT_EQ(invalid.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(invalid.status().message()),
              ::testing::StartsWith("plan: fails validation: "));

  KernelSpec other_shape = GemmSpecForAllGather(512, 128, 64, plan::DType::kBF16, 64, 64);
  auto mismatch = PrepareFusedKernel(TwoLevelAllGather(), other_shape, "", {});
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mismatch.status().message()),
              ::testing::StartsWith("kernel spec (against plan): "));
}

// A compile that finds every slot taken waits until its deadline, then names the kernel; a
// slot given back lets the next one in.
TEST(CompileSlotsTest, FullSlotsEndAtTheDeadlineNamingTheKernel) {
  auto prepared = PrepareLocalKernel(GemmSpec(), "// kernel\n", {});
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  CompileSlots slots(1);
  {
    CompileSlots::Held held = slots.Acquire(std::nullopt);
    ASSERT_TRUE(held);
    auto compiled = CompilePrepared(
        *prepared, std::chrono::steady_clock::now() + std::chrono::milliseconds(50), &slots);
    EXPECT_EQ(compiled.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(std::string(compiled.status().message()),
                ::testing::HasSubstr(prepared->key.hex()));
    EXPECT_THAT(std::string(compiled.status().message()), ::testing::HasSubstr("compile slot"));
  }
  // Released: a waiter on another thread gets it.
  CompileSlots::Held first = slots.Acquire(std::nullopt);
  ASSERT_TRUE(first);
  std::thread release(
      [held = std::move(first)]() mutable { CompileSlots::Held gone(std::move(held)); });
  CompileSlots::Held second =
      slots.Acquire(std::chrono::steady_clock::now() + std::chrono::seconds(30));
  release.join();
  EXPECT_TRUE(second);
}

// Kernels built together land in the cache: each later BuildKernel of one of them is a memory
// hit, not a compile (what Op::Create and the tuner rely on). Three local variants of the test
// kernel that differ in their scale (so in their keys).
TEST(BuildInParallelTest, LaterBuildsOfTheSameKernelsHitTheCacheInMemory) {
  absl::StatusOr<std::unique_ptr<cache::KernelCache>> cache =
      cache::KernelCache::Open({.memory_only = true});
  ASSERT_TRUE(cache.ok()) << cache.status();
  BuildOptions options;
  options.cache = cache->get();
  std::vector<PreparedKernel> prepared;
  for (int cols : {32, 33, 34}) {
    std::string text = syncopate::testing::kTestKernelSpec;
    text.replace(text.find("cols i32 32"), 11, "cols i32 " + std::to_string(cols));
    absl::StatusOr<KernelSpec> spec = ParseKernelSpec(text);
    ASSERT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<PreparedKernel> p =
        PrepareLocalKernel(*spec, syncopate::testing::kTestKernelSource, options);
    ASSERT_TRUE(p.ok()) << p.status();
    prepared.push_back(*std::move(p));
  }
  ASSERT_NE(prepared[0].key.hex(), prepared[1].key.hex());
  std::vector<const PreparedKernel*> kernels;
  kernels.reserve(prepared.size());
  for (const PreparedKernel& p : prepared) kernels.push_back(&p);
  BuildInParallel(kernels, options, 3);
  for (const PreparedKernel& p : prepared) {
    absl::StatusOr<BuiltKernel> built = BuildKernel(p, options);
    ASSERT_TRUE(built.ok()) << built.status();
    EXPECT_EQ(built->source, cache::KernelCache::Source::kMemory) << p.key.hex();
  }
}

// The segment mover is out of line by default; -DSYNCOPATE_MOVER_INLINE=1 (what
// SYNCOPATE_NVRTC_OPTIONS passes for A/B runs) inlines it again: both compile, the options are in
// the key, and the two binaries differ, so the knob really changes the kernel.
TEST(BuildOptionsTest, InliningTheSegmentMoverCompilesToAnotherKernelUnderAnotherKey) {
  plan::TemplateParams params;
  params.world_size = 2;
  params.shape = {64, 32};
  params.dtype = plan::DType::kBF16;
  absl::StatusOr<plan::Plan> plan = plan::BuildTemplate("allgather.ring", params);
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<KernelSpec> spec = ParseKernelSpec(syncopate::testing::kTestKernelSpec);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto build = [&](bool inline_mover) {
    BuildOptions options;
    if (inline_mover) options.extra_options.push_back("-DSYNCOPATE_MOVER_INLINE=1");
    return BuildFusedKernel(*plan, *spec, syncopate::testing::kTestKernelSource, options);
  };
  absl::StatusOr<BuiltKernel> out_of_line = build(false);
  ASSERT_TRUE(out_of_line.ok()) << out_of_line.status();
  absl::StatusOr<BuiltKernel> inlined = build(true);
  ASSERT_TRUE(inlined.ok()) << inlined.status();
  EXPECT_NE(out_of_line->cache_key, inlined->cache_key);
  EXPECT_NE(out_of_line->compiled->binary, inlined->compiled->binary);
}

}  // namespace
}  // namespace syncopate::jit
