// The wgmma autotuner and the kernel selection that uses its winners. Without a GPU: SelectGemm
// with a tuned config, FindTunedWgmma over the tuning table, the candidate lists. With one (LABEL
// gpu; skips without): TuneGemm on a small shape stores a winner that FindTunedWgmma returns and
// SelectGemm turns into the kernel's template arguments. The GPU work runs in a forked child
// (RunRanks), so this process stays free of CUDA state like the other GPU tests.
#include <stdlib.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/workloads/multiprocess.h"
#include "runtime/gemm/gemm_kernels.h"
#include "runtime/gemm/gemm_tuner.h"
#include "tests/cuda/gpu_test_env.h"
#include "tests/testing/cache_test_util.h"

namespace syncopate::cuda {
namespace {

using ::syncopate::cache::testing::ScratchDir;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr plan::DType kBF16 = plan::DType::kBF16;

TEST(SelectGemmTest, TunedConfigBecomesTemplateArguments) {
  const gemm::WgmmaConfig tuned{128, 6, true};
  for (gemm::GemmWorkload w :
       {gemm::GemmWorkload::kAllGather, gemm::GemmWorkload::kReduceScatter}) {
    gemm::GemmKernelChoice c = gemm::SelectGemm(90, w, 4096, 2048, 1024, kBF16, false, &tuned);
    ASSERT_TRUE(c.wgmma);
    EXPECT_THAT(c.spec.template_args, ElementsAre("__nv_bfloat16", "128", "128", "6", "1"));
    EXPECT_EQ(c.spec.tile_n, 128);
    EXPECT_EQ(c.spec.dynamic_smem_bytes, jit::GemmWgmmaSmemBytes(128, 128, 6));
    EXPECT_EQ(c.wgmma_config, tuned);  // what the bench and the tuner print
  }
  // No tuned config: kernel_spec.h's defaults, TMA loads (no kLoads argument), as before; and
  // WgmmaConfig{} is that same kernel, so "tuned to the default" changes nothing.
  gemm::GemmKernelChoice plain =
      gemm::SelectGemm(90, gemm::GemmWorkload::kAllGather, 4096, 2048, 1024, kBF16);
  EXPECT_EQ(plain.spec, jit::GemmWgmmaSpecForAllGather(4096, 2048, 1024, kBF16));
  EXPECT_EQ(plain.spec.template_args.size(), 4u);
  EXPECT_EQ(plain.wgmma_config, gemm::WgmmaConfig{});
  const gemm::WgmmaConfig defaults;
  EXPECT_EQ(gemm::SelectGemm(90, gemm::GemmWorkload::kAllGather, 4096, 2048, 1024, kBF16, false,
                             &defaults)
                .spec,
            plain.spec);
  // Where mma.sync is chosen the tuned config does not apply.
  EXPECT_FALSE(
      gemm::SelectGemm(80, gemm::GemmWorkload::kAllGather, 4096, 2048, 1024, kBF16, false, &tuned)
          .wgmma);
  EXPECT_FALSE(
      gemm::SelectGemm(90, gemm::GemmWorkload::kAllGather, 4096, 2048, 1022, kBF16, false, &tuned)
          .wgmma);
  EXPECT_EQ(gemm::WgmmaConfigName(tuned), "128x128x6 cpasync");
}

TEST(FindTunedWgmmaTest, ReadsTheTableAndChecksTheEntry) {
  ScratchDir dir;
  auto find = [&] { return gemm::FindTunedWgmma(dir.path(), 90, 8192, 4096, 1024, kBF16); };
  absl::StatusOr<std::optional<gemm::WgmmaConfig>> none = find();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());

  const tune::TuningTable table(dir.path());
  const tune::TuningKey key = gemm::WgmmaTuningKey(90, 8192, 4096, 1024, kBF16);
  EXPECT_EQ(key.family, "gemm_wgmma");
  EXPECT_EQ(key.arch, "sm_90a");
  ASSERT_TRUE(table.Store(key, {128, 5, "cpasync", 1.5, std::nullopt}).ok());
  absl::StatusOr<std::optional<gemm::WgmmaConfig>> found = find();
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, (gemm::WgmmaConfig{128, 5, true}));
  // Another GPU arch, dtype or shape has its own entry.
  for (auto [cc, dtype, k] : {std::tuple{80, kBF16, 1024}, std::tuple{90, plan::DType::kF16, 1024},
                              std::tuple{90, kBF16, 2048}}) {
    absl::StatusOr<std::optional<gemm::WgmmaConfig>> other =
        gemm::FindTunedWgmma(dir.path(), cc, 8192, 4096, k, dtype);
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_FALSE(other->has_value()) << cc << " " << plan::DTypeName(dtype) << " " << k;
  }

  // "": the kernel cache's default directory.
  ::setenv("SYNCOPATE_CACHE_DIR", dir.path().c_str(), 1);
  found = gemm::FindTunedWgmma("", 90, 8192, 4096, 1024, kBF16);
  ::unsetenv("SYNCOPATE_CACHE_DIR");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, (gemm::WgmmaConfig{128, 5, true}));

  // A well-formed entry the kernel cannot take is an error naming the file, never used.
  ASSERT_TRUE(table.Store(key, {64, 4, "tma", 1.5, std::nullopt}).ok());
  EXPECT_THAT(find().status().message(),
              AllOf(HasSubstr(table.PathFor(key)), HasSubstr("tile_n 64")));
  cache::testing::WriteFile(table.PathFor(key), "tile_n 128\n");
  EXPECT_EQ(find().status().code(), absl::StatusCode::kDataLoss);
}

TEST(WgmmaCandidatesTest, DefaultFirstAndAllFit) {
  constexpr int kH100Smem = 232448;  // sm_90 opt-in limit per block
  const std::vector<gemm::WgmmaConfig> subset = gemm::WgmmaCandidates(kH100Smem, false);
  ASSERT_FALSE(subset.empty());
  EXPECT_EQ(subset.front(), gemm::WgmmaConfig{});
  EXPECT_THAT(subset, Contains(gemm::WgmmaConfig{128, 6, false}));
  const std::vector<gemm::WgmmaConfig> full = gemm::WgmmaCandidates(kH100Smem, true);
  EXPECT_EQ(full.front(), gemm::WgmmaConfig{});
  EXPECT_GT(full.size(), subset.size());
  std::set<std::tuple<int, int, bool>> seen;
  for (const gemm::WgmmaConfig& c : full) {
    EXPECT_LE(jit::GemmWgmmaSmemBytes(128, c.tile_n, c.stages) + jit::kFusedStaticSmemReserve,
              kH100Smem);
    EXPECT_GE(c.stages, 2);
    EXPECT_TRUE(seen.insert({c.tile_n, c.stages, c.cp_async}).second) << gemm::WgmmaConfigName(c);
  }
  EXPECT_TRUE(seen.contains({128, 2, true}));
  EXPECT_TRUE(seen.contains({256, 2, false}));
  // Less shared memory, fewer candidates; all still fit.
  for (const gemm::WgmmaConfig& c : gemm::WgmmaCandidates(100000, true)) {
    EXPECT_LE(jit::GemmWgmmaSmemBytes(128, c.tile_n, c.stages) + jit::kFusedStaticSmemReserve,
              100000)
        << gemm::WgmmaConfigName(c);
  }
}

constexpr char kNotHopper[] = "not an sm_90 GPU: ";

// What the kernel cannot compile or launch is named before NVRTC or the launch would fail.
TEST(WgmmaConfigProblemTest, NamesWhatCannotLaunch) {
  EXPECT_EQ(gemm::WgmmaConfigProblem(gemm::WgmmaConfig{}), "");
  EXPECT_EQ(gemm::WgmmaConfigProblem({128, 6, false}), "");
  EXPECT_THAT(gemm::WgmmaConfigProblem({192, 3, false}), ::testing::HasSubstr("tile_n 192"));
  EXPECT_THAT(gemm::WgmmaConfigProblem({256, 1, false}), ::testing::HasSubstr("stages 1"));
  EXPECT_THAT(gemm::WgmmaConfigProblem({128, 32, false}), ::testing::HasSubstr("stages 32"));
  EXPECT_THAT(gemm::WgmmaConfigProblem({256, 5, false}), ::testing::HasSubstr("247808 bytes"));
  // Within 227 KB, but not beside a fused kernel's static shared memory.
  EXPECT_THAT(gemm::WgmmaConfigProblem({128, 7, false}), ::testing::HasSubstr("231424 bytes"));
}

// The default keeps its place unless a candidate beats it by more than the noise margin.
TEST(PickWinnerTest, TheDefaultWinsWithinTheMargin) {
  EXPECT_EQ(gemm::PickWinner({1.00, 0.99, 1.20}, 0, 0.02), 0);  // 1% faster: noise, default stays
  EXPECT_EQ(gemm::PickWinner({1.00, 0.95, 1.20}, 0, 0.02), 1);  // 5% faster: replaces it
  EXPECT_EQ(gemm::PickWinner({1.00, 0.99, 1.20}, 0, 0.0), 1);   // no margin: the fastest
  EXPECT_EQ(gemm::PickWinner({0.0, 0.99, 0.98}, 0, 0.02), 2);   // default not timed (rejected)
  EXPECT_EQ(gemm::PickWinner({1.0, 0.9}, -1, 0.02), 1);         // no default among the candidates
  EXPECT_EQ(gemm::PickWinner({0.0, 0.0}, 0, 0.02), -1);         // nothing timed
}

TEST(GemmTunerGpuTest, StoresAWinnerThatSelectGemmUses) {
  SYNCOPATE_REQUIRE_GPU();
  ScratchDir dir;
  const gemm::GemmShape shape{1024, 1024, 512};
  // The untuned default as the reference, and a candidate that differs in tile width, load path
  // and (cp.async has no TMA descriptors: register stores) epilogue: outputs agree bit for bit.
  const std::vector<gemm::WgmmaConfig> candidates = {gemm::WgmmaConfig{}, {128, 4, true}};
  const std::vector<absl::Status> results =
      workloads::RunRanks(1, absl::Seconds(600), [&](int) -> absl::Status {
        ASSIGN_OR_RETURN(Context ctx, Context::Retain(0));
        if (ctx.compute_capability() != 90) {
          return absl::FailedPreconditionError(
              absl::StrCat(kNotHopper, "sm_", ctx.compute_capability()));
        }
        cache::KernelCache::Options cache_options;
        cache_options.dir = dir.path();
        ASSIGN_OR_RETURN(std::unique_ptr<cache::KernelCache> kernel_cache,
                         cache::KernelCache::Open(cache_options));
        gemm::TuneOptions options;
        options.cache_dir = dir.path();
        options.candidates = candidates;
        options.warmup = 1;
        options.reps = 3;
        ASSIGN_OR_RETURN(gemm::TuneResult r,
                         gemm::TuneGemm(ctx, kernel_cache.get(), shape, kBF16, options));
        if (r.candidates.size() != candidates.size() || r.reference != 0 || r.winner < 0) {
          return absl::InternalError(absl::StrCat("result: ", r.candidates.size(),
                                                  " candidates, reference ", r.reference,
                                                  ", winner ", r.winner));
        }
        for (const gemm::TunedCandidate& c : r.candidates) {
          if (!c.rejected.empty() || !(c.ms > 0)) {
            return absl::InternalError(absl::StrCat(gemm::WgmmaConfigName(c.config), ": ", c.ms,
                                                    " ms, rejected: ", c.rejected));
          }
        }
        if (r.stored_at != tune::TuningTable(dir.path()).PathFor(r.key)) {
          return absl::InternalError(absl::StrCat("stored at ", r.stored_at));
        }
        return absl::OkStatus();
      });
  ASSERT_EQ(results.size(), 1u);
  if (results[0].code() == absl::StatusCode::kFailedPrecondition &&
      absl::StartsWith(results[0].message(), kNotHopper)) {
    GTEST_SKIP() << results[0].message();
  }
  ASSERT_TRUE(results[0].ok()) << results[0];

  // Back in this process (no CUDA): the table holds one of the candidates, and the runtime's
  // selection builds exactly that kernel from it.
  absl::StatusOr<tune::TunedGemm> stored =
      tune::TuningTable(dir.path()).Lookup(gemm::WgmmaTuningKey(90, 1024, 1024, 512, kBF16));
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_GT(stored->ms, 0);
  absl::StatusOr<std::optional<gemm::WgmmaConfig>> found =
      gemm::FindTunedWgmma(dir.path(), 90, 1024, 1024, 512, kBF16);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  const gemm::WgmmaConfig winner = **found;
  EXPECT_THAT(candidates, Contains(winner));
  const gemm::GemmKernelChoice choice =
      gemm::SelectGemm(90, gemm::GemmWorkload::kAllGather, 1024, 1024, 512, kBF16, false, &winner);
  ASSERT_TRUE(choice.wgmma);
  const std::vector<std::string>& args = choice.spec.template_args;
  ASSERT_GE(args.size(), 4u);
  EXPECT_EQ(args[2], absl::StrCat(winner.tile_n));
  EXPECT_EQ(args[3], absl::StrCat(winner.stages));
  EXPECT_EQ(args.size() == 5 && args[4] == "1", winner.cp_async);
}

}  // namespace
}  // namespace syncopate::cuda
