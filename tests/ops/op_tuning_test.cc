// The ops' measured per-bucket paths (ops/core/op_tuning.h): the file round-trips, a malformed
// file is named with its line, and measured paths fill only the buckets the caller left open.
#include "ops/core/op_tuning.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/scoped_env.h"

namespace syncopate::ops {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class OpTuningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("op_tuning_test." + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static OpTuningKey Key() {
    return {.kind = OpKind::kAllGatherMatmul, .arch = "sm_90a", .world = 2, .n = 7168, .k = 4096};
  }
  static MeasuredBucket Bucket(int64_t m, bool fused, Backend backend, int chunks, double ms,
                               double unfused_ms) {
    return {.bucket_m = m,
            .fused = fused,
            .backend = backend,
            .chunks = chunks,
            .ms = ms,
            .unfused_ms = unfused_ms};
  }
  static OpConfig Config() {
    OpConfig c;
    c.max_m = 8192;  // buckets 512, 2048, 8192 at world 2
    c.n = 7168;
    c.k = 4096;
    return c;
  }
  std::string dir_;
};

TEST_F(OpTuningTest, StoredBucketsReadBackAndAMissingFileIsEmpty) {
  ASSERT_TRUE(LookupOpTuning(dir_, Key()).ok());
  EXPECT_TRUE(LookupOpTuning(dir_, Key())->empty());
  const std::vector<MeasuredBucket> buckets = {
      Bucket(512, false, Backend::kSm, 1, 0.1, 0.1),
      Bucket(8192, true, Backend::kCopyEngine, 2, 1.25, 1.5)};
  ASSERT_TRUE(StoreOpTuning(dir_, Key(), buckets).ok());
  EXPECT_THAT(OpTuningPath(dir_, Key()),
              HasSubstr("op.all_gather_matmul.sm_90a.bf16.w2.7168x4096"));
  absl::StatusOr<std::vector<MeasuredBucket>> read = LookupOpTuning(dir_, Key());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, buckets);
  OpTuningKey other = Key();
  other.world = 4;
  EXPECT_TRUE(LookupOpTuning(dir_, other)->empty());
}

// A ReduceScatter's table measured with tile parts is not one measured with whole chunks; the
// other ops have no parts, so the config's tile_parts does not enter their key.
TEST_F(OpTuningTest, TilePartsKeepAReduceScattersTableApart) {
  OpConfig rs = Config();
  rs.kind = OpKind::kMatmulReduceScatter;
  rs.tile_parts = true;
  const OpTuningKey parts = OpTuningKeyFor(rs, 2, "sm_90a");
  EXPECT_TRUE(parts.tile_parts);
  EXPECT_THAT(OpTuningPath(dir_, parts), HasSubstr("w2.7168x4096.parts.tune"));
  rs.tile_parts = false;
  const OpTuningKey whole = OpTuningKeyFor(rs, 2, "sm_90a");
  EXPECT_NE(OpTuningPath(dir_, parts), OpTuningPath(dir_, whole));
  ASSERT_TRUE(StoreOpTuning(dir_, parts, {Bucket(8192, true, Backend::kSm, 1, 1.2, 1.5)}).ok());
  EXPECT_EQ(LookupOpTuning(dir_, parts)->size(), 1u);
  EXPECT_TRUE(LookupOpTuning(dir_, whole)->empty());
  OpConfig ar = Config();
  ar.kind = OpKind::kMatmulAllReduce;
  ar.tile_parts = true;
  EXPECT_FALSE(OpTuningKeyFor(ar, 2, "sm_90a").tile_parts);
  EXPECT_EQ(OpTuningKeyFor(ar, 2, "sm_90a").n, 7168);
}

// An AllReduce tuned with one plan forced for every bucket (the developer knob) measured other
// kernels than the default plans: its table is apart.
TEST_F(OpTuningTest, AnAllReduceTunedWithThePlanKnobIsKeptApart) {
  OpConfig ar = Config();
  ar.kind = OpKind::kMatmulAllReduce;
  OpTuningKey plain, forced;
  {
    testing::ScopedEnv unset("SYNCOPATE_OPS_ALLREDUCE_PLAN", nullptr);
    plain = OpTuningKeyFor(ar, 2, "sm_90a");
  }
  {
    testing::ScopedEnv knob("SYNCOPATE_OPS_ALLREDUCE_PLAN", "allreduce.direct_out");
    forced = OpTuningKeyFor(ar, 2, "sm_90a");
    ar.kind = OpKind::kMatmulReduceScatter;
    EXPECT_EQ(OpTuningKeyFor(ar, 2, "sm_90a").plan_knob, "");  // only the AllReduce's plan
  }
  EXPECT_EQ(plain.plan_knob, "");
  EXPECT_THAT(OpTuningPath(dir_, plain), ::testing::EndsWith("w2.7168x4096.tune"));
  EXPECT_THAT(OpTuningPath(dir_, forced),
              ::testing::EndsWith("w2.7168x4096.allreduce.direct_out.tune"));
}

TEST_F(OpTuningTest, AMalformedFileIsNamedWithItsLine) {
  const std::string path = OpTuningPath(dir_, Key());
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path)
      << "format 1\n# measured\nbucket 512 fused sm 1 0.2 0.3\nbucket 2048 maybe sm 1 1 1\n";
  absl::StatusOr<std::vector<MeasuredBucket>> read = LookupOpTuning(dir_, Key());
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(read.status().message()),
              HasSubstr(path + ":4: expected fused or unfused"));
  EXPECT_FALSE(
      StoreOpTuning(dir_, Key(), {{.bucket_m = 512, .chunks = 0, .ms = 1, .unfused_ms = 1}}).ok());
}

TEST_F(OpTuningTest, MeasuredPathsFillOnlyTheBucketsTheCallerLeftOpen) {
  OpConfig config = Config();
  config.bucket_paths = {{.bucket_m = 8192, .fused = false}};
  const std::vector<MeasuredBucket> measured = {
      Bucket(512, true, Backend::kSm, 2, 0.09, 0.1), Bucket(8192, true, Backend::kSm, 1, 1.0, 1.2),
      Bucket(1000, true, Backend::kSm, 1, 1, 2)};  // 1000 is not a bucket: ignored
  const OpConfig out = WithMeasuredPaths(config, 2, measured, "the file");
  ASSERT_EQ(out.bucket_paths.size(), 2u);
  Result<PathChoice> small = ChoosePath(out, 2, 500);
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(small->fused);  // the heuristic would not fuse 256 rows per rank
  EXPECT_EQ(small->chunks, 2);
  EXPECT_THAT(small->reason, HasSubstr("measured 0.09 ms against unfused 0.1 ms (the file)"));
  Result<PathChoice> big = ChoosePath(out, 2, 8192);
  ASSERT_TRUE(big.ok());
  EXPECT_FALSE(big->fused);  // the caller's entry wins
  config.path = PathPreference::kFused;
  EXPECT_EQ(WithMeasuredPaths(config, 2, measured, "x").bucket_paths.size(), 1u);
}

// An op made with backend=sm (graph capture needs it) takes no measured copy-engine path.
TEST_F(OpTuningTest, MeasuredPathsKeepTheCallersBackend) {
  OpConfig config = Config();
  config.backend = Backend::kSm;
  const std::vector<MeasuredBucket> measured = {
      Bucket(512, true, Backend::kCopyEngine, 1, 0.08, 0.1),
      Bucket(8192, true, Backend::kSm, 1, 1.0, 1.2)};
  const OpConfig out = WithMeasuredPaths(config, 2, measured, "the file");
  ASSERT_EQ(out.bucket_paths.size(), 1u);
  EXPECT_EQ(out.bucket_paths[0].bucket_m, 8192);
  config.backend = Backend::kAuto;
  EXPECT_EQ(WithMeasuredPaths(config, 2, measured, "the file").bucket_paths.size(), 2u);
}

// The tuner's choice per bucket: each candidate at its slowest rank's time, so a path that is
// fast on one rank only does not win; the unfused time is candidate 0's, also slowest-rank.
TEST(FastestPerBucketTest, EachCandidateCountsAtItsSlowestRank) {
  const std::vector<TuningCandidate> candidates = {
      {.fused = false}, {.fused = true, .chunks = 1}, {.fused = true, .chunks = 2}};
  // [rank][candidate][bucket]; buckets 8192 and 2048.
  const std::vector<std::vector<std::vector<double>>> ms = {
      {{6.0, 1.6}, {5.5, 1.7}, {5.8, 1.5}},  // rank 0 alone would take fused x1 at 8192
      {{6.1, 1.5}, {6.3, 1.8}, {5.9, 1.6}},
  };
  absl::StatusOr<std::vector<MeasuredBucket>> best = FastestPerBucket({8192, 2048}, candidates, ms);
  ASSERT_TRUE(best.ok()) << best.status();
  ASSERT_EQ(best->size(), 2u);
  // 8192: slowest ranks 6.1 (unfused), 6.3 (x1), 5.9 (x2).
  EXPECT_EQ((*best)[0], (MeasuredBucket{.bucket_m = 8192,
                                        .fused = true,
                                        .backend = Backend::kSm,
                                        .chunks = 2,
                                        .ms = 5.9,
                                        .unfused_ms = 6.1}));
  EXPECT_EQ(SlowestRankMs(ms),
            (std::vector<std::vector<double>>{{6.1, 1.6}, {6.3, 1.8}, {5.9, 1.6}}));
  // 2048: 1.6 (unfused), 1.8, 1.6: a tie keeps the earlier candidate, the unfused path.
  EXPECT_EQ((*best)[1], (MeasuredBucket{.bucket_m = 2048,
                                        .fused = false,
                                        .backend = Backend::kSm,
                                        .chunks = 1,
                                        .ms = 1.6,
                                        .unfused_ms = 1.6}));
}

TEST(FastestPerBucketTest, MissingOrBadTimesAreNamed) {
  const std::vector<TuningCandidate> two = {{.fused = false}, {.fused = true}};
  auto message = [](const absl::StatusOr<std::vector<MeasuredBucket>>& got) {
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(got.status().message());
  };
  EXPECT_THAT(message(FastestPerBucket({8192}, two, {{{1.0}, {1.0}}, {{1.0}}})),
              HasSubstr("rank 1 timed 1 candidates, not 2"));
  EXPECT_THAT(message(FastestPerBucket({8192, 2048}, two, {{{1.0, 2.0}, {1.0}}})),
              HasSubstr("rank 0 candidate 1: 1 times for 2 buckets"));
  EXPECT_THAT(message(FastestPerBucket({8192}, two, {{{1.0}, {0.0}}})),
              HasSubstr("rank 0 candidate 1 bucket 8192: time 0 is not positive"));
  EXPECT_THAT(message(FastestPerBucket({8192}, two, {})), HasSubstr("no rank's times"));
  EXPECT_THAT(message(FastestPerBucket({8192}, {{.fused = true}}, {{{1.0}}})),
              HasSubstr("first candidate must be the unfused path"));
}

// The ranks' figures travel to the choosing process as text and come back the same; anything
// else is named.
TEST(RankTimesTest, FiguresRoundTripAndBadLinesAreNamed) {
  const std::vector<std::vector<double>> ms = {{6.1, 1.625}, {5.9, 1.7}};
  std::vector<std::vector<double>> got;
  std::string arch;
  ASSERT_TRUE(ParseRankTimes(FormatRankTimes("sm_90a", ms), 2, &got, &arch).ok());
  EXPECT_EQ(got, ms);
  EXPECT_EQ(arch, "sm_90a");
  arch.clear();
  ASSERT_TRUE(ParseRankTimes(FormatRankTimes("", ms), 2, &got, &arch).ok());
  EXPECT_EQ(arch, "");  // only rank 0 names the target
  auto message = [&](const std::string& text) {
    const absl::Status s = ParseRankTimes(text, 2, &got, &arch);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << text;
    return std::string(s.message());
  };
  EXPECT_THAT(message("times 2 1.0\n"), HasSubstr("unexpected line 'times 2 1.0' (2 candidates)"));
  EXPECT_THAT(message("times 0 1.0 x\n"), HasSubstr("bad time 'x'"));
  EXPECT_THAT(message("speed 0 1.0\n"), HasSubstr("unexpected line 'speed 0 1.0'"));
}

}  // namespace
}  // namespace syncopate::ops
