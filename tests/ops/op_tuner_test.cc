// The op tuner's choices made before anything runs (ops/tuner/op_tuner.h): which paths it times,
// the op config of each, and the options it refuses before forking a rank. Timing itself needs a
// GPU (tests/cli/ops_tune_test.sh on the GPU machine).
#include "ops/tuner/op_tuner.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::ops {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Names(const std::vector<TuningCandidate>& candidates) {
  std::vector<std::string> names;
  names.reserve(candidates.size());
  for (const TuningCandidate& c : candidates) names.push_back(CandidateName(c));
  return names;
}

OpTuneOptions Options() {
  OpTuneOptions o;
  o.config.kind = OpKind::kMatmulAllReduce;
  o.config.max_m = 8192;
  o.config.n = 4096;
  o.config.k = 7168;
  o.config.cache_dir = "/tmp/op_tuner_test";
  o.world = 2;
  o.ms = {8192, 2048};
  return o;
}

TEST(OpTunerTest, ThePathsTimedFollowTheOpAndTheEnginesBackend) {
  EXPECT_THAT(Names(TuneCandidates(OpKind::kAllGatherMatmul)),
              ElementsAre("unfused sm x1", "fused sm x1", "fused sm x2", "fused ce x1"));
  // An engine on the SM backend never takes a measured copy-engine path (Create skips it).
  EXPECT_THAT(Names(TuneCandidates(OpKind::kAllGatherMatmul, Backend::kSm)),
              ElementsAre("unfused sm x1", "fused sm x1", "fused sm x2"));
  EXPECT_THAT(Names(TuneCandidates(OpKind::kAllGatherMatmul, Backend::kCopyEngine)),
              ElementsAre("unfused sm x1", "fused ce x1"));
  // The copy engine cannot reduce.
  EXPECT_THAT(Names(TuneCandidates(OpKind::kMatmulReduceScatter)),
              ElementsAre("unfused sm x1", "fused sm x1", "fused sm x2"));
}

TEST(OpTunerTest, EachPathRunsAtEveryMAsItsOwnBucket) {
  OpTuneOptions o = Options();
  o.config.path = PathPreference::kUnfused;  // the engine's preferences give way per bucket
  o.config.chunks = 4;
  o.config.bucket_paths = {{.bucket_m = 512, .fused = true}};
  const OpConfig c = ConfigForCandidate(o, {.fused = true, .backend = Backend::kSm, .chunks = 2});
  EXPECT_EQ(c.path, PathPreference::kAuto);
  EXPECT_EQ(c.chunks, 0);
  EXPECT_EQ(c.m_buckets, o.ms);
  ASSERT_EQ(c.bucket_paths.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(c.bucket_paths[i].bucket_m, o.ms[i]);
    EXPECT_TRUE(c.bucket_paths[i].fused);
    EXPECT_EQ(c.bucket_paths[i].backend, Backend::kSm);
    EXPECT_EQ(c.bucket_paths[i].chunks, 2);
  }
  EXPECT_EQ(c.n, o.config.n);  // the shape and the table's folder are the engine's
  EXPECT_EQ(c.cache_dir, o.config.cache_dir);
}

TEST(OpTunerTest, OptionsThatCannotBeTunedAreNamedBeforeAnythingRuns) {
  EXPECT_TRUE(CheckTuneOptions(Options()).ok()) << CheckTuneOptions(Options());
  auto message = [](const OpTuneOptions& o) {
    const absl::Status s = CheckTuneOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  OpTuneOptions o = Options();
  o.config.cache_dir = "";
  EXPECT_THAT(message(o), HasSubstr("cache_dir is empty"));
  o = Options();
  o.ms.clear();
  EXPECT_THAT(message(o), HasSubstr("no M to time"));
  o = Options();
  o.gpus = 3;
  EXPECT_THAT(message(o), HasSubstr("gpus 3 is not in 0..world (2"));
  o = Options();
  o.rounds = 0;
  EXPECT_THAT(message(o), HasSubstr("rounds 0 must be at least 1"));
  o = Options();
  o.timeout = absl::ZeroDuration();
  EXPECT_THAT(message(o), HasSubstr("timeout must be positive"));
  o = Options();
  o.ms = {8192, 16384};
  EXPECT_THAT(message(o), HasSubstr("16384"));
  o = Options();
  o.config.backend = Backend::kCopyEngine;  // an AllReduce on the copy engine: Create refuses it
  EXPECT_THAT(message(o), HasSubstr("copy engine"));
  o = Options();
  o.job = std::string(63, 'j');  // the paths' groups are "<job>_<i>": 65 characters
  EXPECT_THAT(message(o), HasSubstr("group.job"));
}

}  // namespace
}  // namespace syncopate::ops
