// Fused AllGather+GEMM and GEMM+ReduceScatter across rank processes on one GPU, through the whole
// product path (template plan -> overlap compiler -> NVRTC / kernel cache -> symmetric memory ->
// launch protocol), checked element by element against an fp32 reference GEMM; plus thousands of
// launches, CUDA-graph replay, and a rank that never launches. LABEL gpu; skips without a GPU.
#include <cstdlib>
#include <ostream>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cuda/gpu_test_env.h"
#if SYNCOPATE_GPU_TEST_WITH_DAEMON
#include "tests/cuda/daemon_fetcher.h"
#include "tests/testing/rank_results.h"
#include "tests/testing/subprocess.h"
#endif
#include "runtime/cuda/workloads/multiprocess.h"
#include "runtime/cuda/workloads/workloads.h"

namespace syncopate::testing {
namespace {

using cuda::Backend;
using ::syncopate::testing::ExpectEveryRankOk;
using ::testing::HasSubstr;
using ::testing::Not;
using workloads::RunAllGatherGemm;
using workloads::RunGemmReduceScatter;
using workloads::RunRanks;
using workloads::UniqueGroupId;
using workloads::WorkloadConfig;

uint64_t FreshSeed() {
  static std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

struct Param {
  std::string workload;  // "ag" or "rs"
  std::string plan_template;
  int world;
  plan::DType dtype;
  Backend backend;
  int chunks;
  int64_t m, n, k;
};

// gtest prints parameters in failure messages and ctest listings: make them readable.
void PrintTo(const Param& p, std::ostream* os) {
  *os << p.workload << " " << p.plan_template << " world " << p.world << " "
      << plan::DTypeName(p.dtype) << " " << cuda::BackendName(p.backend) << " chunks " << p.chunks
      << " M=" << p.m << " N=" << p.n << " K=" << p.k;
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const Param& p = info.param;
  std::string t = p.plan_template.substr(p.plan_template.find('.') + 1);
  return absl::StrCat(p.workload, "_", t, "_w", p.world, "_", plan::DTypeName(p.dtype), "_",
                      cuda::BackendName(p.backend), "_c", p.chunks);
}

std::vector<absl::Status> RunWorkload(const Param& p, WorkloadConfig base) {
  base.group_id = UniqueGroupId("ov");
  base.world = p.world;
  base.dtype = p.dtype;
  base.backend = p.backend;
  base.plan_template = p.plan_template;
  base.chunks = p.chunks;
  base.m = p.m, base.n = p.n, base.k = p.k;
  base.seed = FreshSeed();
  return RunRanks(p.world, absl::Seconds(300), [&](int r) {
    WorkloadConfig c = base;
    c.rank = r;
    return p.workload == "ag" ? RunAllGatherGemm(c) : RunGemmReduceScatter(c);
  });
}

class FusedWorkloadTest : public ::testing::TestWithParam<Param> {};

TEST_P(FusedWorkloadTest, MatchesReference) {
  SYNCOPATE_REQUIRE_GPU();
  SYNCOPATE_REQUIRE_RANKS_FIT(GetParam().world);
  WorkloadConfig c;
  c.launches = 3;  // fresh inputs each launch, epochs 1..3
  auto results = RunWorkload(GetParam(), c);
  ExpectEveryRankOk(results);
}

// Shapes are not multiples of the 128 x 128 tiles; K = 200 takes the kernel's scalar load path.
std::vector<Param> Matrix() {
  std::vector<Param> v;
  int chunk = 1;
  for (int world : {2, 3, 4}) {
    for (plan::DType dt : {plan::DType::kBF16, plan::DType::kF16}) {
      for (Backend b : {Backend::kCopyEngine, Backend::kSm}) {
        v.push_back({"ag", "allgather.push", world, dt, b, chunk, 300 + 37 * world, 200 + 8 * world,
                     world == 3 ? 200 : 264});
        chunk = chunk % 8 + 1;
      }
      v.push_back({"rs", "reducescatter.direct", world, dt, Backend::kSm, chunk, 260 + 29 * world,
                   136 + 8 * world, world == 2 ? 200 : 96});
      chunk = chunk % 8 + 1;
    }
  }
  v.push_back({"ag", "allgather.ring", 4, plan::DType::kBF16, Backend::kCopyEngine, 2, 515, 260, 128});
  v.push_back({"ag", "allgather.ring", 3, plan::DType::kF16, Backend::kSm, 3, 515, 260, 128});
  v.push_back({"ag", "allgather.pull", 3, plan::DType::kBF16, Backend::kCopyEngine, 2, 390, 200, 64});
  // The ring at worlds 2 (its one hop meets the owner's own contribution in "output") and 4, and
  // in f16 too; with SYNCOPATE_NVRTC_OPTIONS=-DSYNCOPATE_PLAIN_REDUCE=1 its hops into the inputs
  // take the plain path (jit/compiler/plain_reductions.h).
  v.push_back({"rs", "reducescatter.ring", 3, plan::DType::kBF16, Backend::kSm, 2, 390, 264, 64});
  v.push_back({"rs", "reducescatter.ring", 2, plan::DType::kF16, Backend::kSm, 1, 300, 200, 128});
  v.push_back({"rs", "reducescatter.ring", 4, plan::DType::kBF16, Backend::kSm, 4, 520, 264, 96});
  // Reductions into the owners' inputs (landing guards), then copies to "output".
  v.push_back(
      {"rs", "reducescatter.direct_inplace", 2, plan::DType::kF16, Backend::kSm, 2, 300, 200, 128});
  v.push_back(
      {"rs", "reducescatter.direct_inplace", 4, plan::DType::kBF16, Backend::kSm, 1, 520, 264, 96});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Matrix, FusedWorkloadTest, ::testing::ValuesIn(Matrix()), Name);

// More tiles than resident CTAs (a persistent grid that would fill the GPU) and chunks of
// megabytes on the copy engine: the driver runs such device-to-device copies as kernels, so a
// grid holding every slot while its tiles wait for the copies deadlocked on every launch
// (tp bench, 2-8 chunks, 2026-12-04). The launch leaves DefaultCopyEngineFreeCtas slots free.
TEST(FusedCopyEngineTest, MegabyteChunksUnderAGridThatFillsTheGpu) {
  SYNCOPATE_REQUIRE_GPU();
  for (int chunks : {2, 4}) {
    WorkloadConfig c;
    c.launches = 3;
    // 512 tiles of 128 x 128; A's shard 2048 x 2048 bf16 = 8 MB, so chunks of 4 and 2 MB.
    auto results = RunWorkload({"ag", "allgather.push", 2, plan::DType::kBF16,
                                Backend::kCopyEngine, chunks, 4096, 2048, 2048},
                               c);
    ExpectEveryRankOk(results, absl::StrCat(chunks, " chunks"));
  }
}

// The Hopper kernel (gemm_wgmma.cuh, 128 x 256 tiles, warp-specialised): fused AllGather+GEMM and
// GEMM+ReduceScatter against the fp32 reference, world 2 and 4, both dtypes, shapes that are not
// tile multiples (M, N tails; K a multiple of 8 but not of the 64-wide k-block).
using WgmmaParam = Param;  // the same matrix, run with the Hopper kernel

class WgmmaWorkloadTest : public ::testing::TestWithParam<WgmmaParam> {};

// The workload with the Hopper kernel; true in `*skip` when this GPU has no sm_90 (the caller
// skips with results[0] as the reason).
std::vector<absl::Status> RunWgmmaWorkload(const WgmmaParam& p, WorkloadConfig c, bool* skip) {
  c.wgmma = true;
  std::vector<absl::Status> results = RunWorkload(p, c);
  *skip = results[0].code() == absl::StatusCode::kFailedPrecondition &&
          absl::StrContains(results[0].message(), "needs sm_90");
  return results;
}

// The workload with the Hopper kernel (`wgmma`; `*skip` as RunWgmmaWorkload) or the mma one.
std::vector<absl::Status> RunWithKernel(const Param& p, bool wgmma, const WorkloadConfig& c,
                                        bool* skip) {
  *skip = false;
  return wgmma ? RunWgmmaWorkload(p, c, skip) : RunWorkload(p, c);
}

// One case of a test that runs several: the workload, the kernel, its config and a label for
// failures.
struct KernelCase {
  Param p;
  bool wgmma;
  WorkloadConfig config;
  std::string label;
};

// Runs each case whose ranks fit on the GPU at once and expects every rank ok. Returns the cases
// not run and why; stops at the first case that needs sm_90 where this GPU has none, with the
// reason in `*no_sm90`.
std::string RunKernelCases(const std::vector<KernelCase>& cases, std::string* no_sm90) {
  std::string not_run;
  for (const KernelCase& k : cases) {
    if (std::string why = RanksDoNotFitReason(k.p.world); !why.empty()) {
      not_run += " world " + std::to_string(k.p.world) + ": " + why;
      continue;
    }
    bool skip = false;
    std::vector<absl::Status> results = RunWithKernel(k.p, k.wgmma, k.config, &skip);
    if (skip) {
      *no_sm90 = results[0].ToString();
      return not_run;
    }
    ExpectEveryRankOk(results, k.label);
  }
  return not_run;
}

TEST_P(WgmmaWorkloadTest, MatchesReference) {
  SYNCOPATE_REQUIRE_GPU();
  SYNCOPATE_REQUIRE_RANKS_FIT(GetParam().world);
  WorkloadConfig c;
  c.launches = 3;
  bool skip = false;
  auto results = RunWgmmaWorkload(GetParam(), c, &skip);
  if (skip) GTEST_SKIP() << results[0];
  ExpectEveryRankOk(results);
}

std::vector<WgmmaParam> WgmmaMatrix() {
  std::vector<WgmmaParam> v;
  for (int world : {2, 4}) {
    for (plan::DType dt : {plan::DType::kBF16, plan::DType::kF16}) {
      v.push_back({"ag", "allgather.push", world, dt, Backend::kCopyEngine, 2, 520 + 64 * world,
                   600 + 8 * world, 328});
      v.push_back({"ag", "allgather.push", world, dt, Backend::kSm, 1, 392, 520, 200});
      v.push_back({"rs", "reducescatter.direct", world, dt, Backend::kSm, 2, 392 + 32 * world,
                   300 + 8 * world, 264});
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Hopper, WgmmaWorkloadTest, ::testing::ValuesIn(WgmmaMatrix()), Name);

// Dynamic tile dealing (LaunchOptions::dynamic_tiles, FusedSchedule::claim): the tile counter
// resets itself at every launch's end, so many launches in a row (and a CUDA graph replayed) stay
// right on both workloads; grids with more CTAs than tiles give some CTAs nothing to claim. The
// AllGather workload then runs the local variant twice on 3 CTAs claiming from the same counter
// (LocalLaunchOptions::dynamic_tiles, LocalSchedule::claim).
TEST(WgmmaDynamicTilesTest, ManyLaunchesAndGraphReplaysMatchTheReference) {
  SYNCOPATE_REQUIRE_GPU();
  struct Case {
    Param p;
    bool graph;
  };
  const std::vector<Case> cases = {
      {{"ag", "allgather.push", 2, plan::DType::kBF16, Backend::kSm, 2, 1032, 1040, 264}, false},
      {{"ag", "allgather.push", 4, plan::DType::kF16, Backend::kCopyEngine, 1, 392, 264, 200}, true},
      {{"rs", "reducescatter.direct", 2, plan::DType::kBF16, Backend::kSm, 2, 456, 316, 264}, false},
  };
  std::string not_run;  // cases whose ranks do not fit on the GPU at once
  for (const Case& k : cases) {
    const Param& p = k.p;
    if (std::string why = RanksDoNotFitReason(p.world); !why.empty()) {
      not_run += " " + p.workload + " world " + std::to_string(p.world) + ": " + why;
      continue;
    }
    WorkloadConfig c;
    c.launches = 40;
    c.check_every = 8;
    c.dynamic_tiles = true;
    c.graph = k.graph;
    bool skip = false;
    auto results = RunWgmmaWorkload(p, c, &skip);
    if (skip) GTEST_SKIP() << results[0];
    ExpectEveryRankOk(results, absl::StrCat(p.workload, " world ", p.world));
  }
  if (!not_run.empty()) GTEST_SKIP() << "not run (one-GPU stand-in):" << not_run;
}

// GEMM+ReduceScatter steps of several 512 KB pieces (impl/pieces.cuh), claimed by the comm CTAs
// and by the compute CTAs that ran out of tiles, over many launches: the claim words are tagged
// with the epoch and never reset, the arrival counters are reset by each step's last piece, so a
// word left from the launch before must never count. The Hopper kernel's consumer warpgroups
// join once claim() ran out; the mma kernel deals statically and never joins (its comm CTAs
// move every piece); steps of 1-4 pieces.
TEST(FusedPiecesTest, ReduceScatterStepsOfManyPiecesStayRightOverManyLaunches) {
  SYNCOPATE_REQUIRE_GPU();
  WorkloadConfig c;
  c.launches = 30;
  c.check_every = 10;
  c.dynamic_tiles = true;
  const std::vector<KernelCase> cases = {
      // 4096 x 1024 bf16 out: shards of 4 MB, steps of 2 MB (4 pieces).
      {{"rs", "reducescatter.direct", 2, plan::DType::kBF16, Backend::kSm, 2, 4096, 1024, 128},
       true,
       c,
       "wgmma world 2"},
      // Shards of 2 MB in 4 chunks: steps of 512 KB (4 pieces of 128 KB) and 3 ranks'
      // reductions into each.
      {{"rs", "reducescatter.direct", 4, plan::DType::kF16, Backend::kSm, 4, 4096, 1024, 128},
       true,
       c,
       "wgmma world 4"},
      // The mma kernel (no join), one chunk per shard of 2 MB (4 pieces).
      {{"rs", "reducescatter.direct", 2, plan::DType::kBF16, Backend::kSm, 1, 2048, 1024, 64},
       false,
       c,
       "mma world 2"},
  };
  std::string no_sm90;
  const std::string not_run = RunKernelCases(cases, &no_sm90);
  if (!no_sm90.empty()) GTEST_SKIP() << no_sm90;
  if (!not_run.empty()) GTEST_SKIP() << "not run (one-GPU stand-in):" << not_run;
}

// GEMM+ReduceScatter in tile parts (KernelSpec::push_tiles): each tile reduces its own rows of
// a chunk into the owner's output as it finishes, counts them in at its CTA's next tile (or at
// the kernel's end), and the chunk's last tile signals the owner. Over many launches (the chunk
// counters reset by each chunk's last part), in a graph, with tiles that straddle chunks
// (M = 456 at 2 ranks and 2 chunks: chunks of 114 rows, tiles of 128), through the Hopper
// kernel's staged epilogue (N a multiple of 8) and its register path (N = 316), the mma kernel's
// CTA-collective done(), and 3 ranks' reductions into each output.
TEST(FusedTilePartsTest, ReduceScatterInTilePartsMatchesTheReference) {
  SYNCOPATE_REQUIRE_GPU();
  WorkloadConfig c;
  c.push_tiles = true;
  c.launches = 30;
  c.check_every = 10;
  WorkloadConfig hopper = c;  // the Hopper kernel claims its tiles
  hopper.dynamic_tiles = true;
  WorkloadConfig hopper_graph = hopper;
  hopper_graph.graph = true;
  const std::vector<KernelCase> cases = {
      {{"rs", "reducescatter.direct", 2, plan::DType::kBF16, Backend::kSm, 2, 456, 1024, 264},
       true,
       hopper,
       "wgmma world 2"},
      {{"rs", "reducescatter.direct", 2, plan::DType::kF16, Backend::kSm, 1, 456, 316, 264},
       true,
       hopper_graph,
       "wgmma world 2 graph"},
      {{"rs", "reducescatter.direct", 4, plan::DType::kBF16, Backend::kSm, 2, 1032, 512, 128},
       true,
       hopper,
       "wgmma world 4"},
      {{"rs", "reducescatter.direct", 3, plan::DType::kF16, Backend::kSm, 2, 390, 264, 64},
       false,
       c,
       "mma world 3"},
  };
  std::string no_sm90;
  const std::string not_run = RunKernelCases(cases, &no_sm90);
  if (!no_sm90.empty()) GTEST_SKIP() << no_sm90;
  if (!not_run.empty()) GTEST_SKIP() << "not run (one-GPU stand-in):" << not_run;
}

// A rank that never launches: the others' tiles wait for its entry before reducing into its
// output, and give up at their deadline naming it (a compute CTA's wait, where the whole chunk's
// move was a comm CTA's).
TEST(FusedTilePartsTest, NeverLaunchingRankIsNamed) {
  SYNCOPATE_REQUIRE_GPU();
  WorkloadConfig c;
  c.push_tiles = true;
  c.absent_rank = 2;
  c.wgmma = true;
  c.dynamic_tiles = true;
  c.timeout = absl::Milliseconds(200);
  auto results = RunWorkload(
      {"rs", "reducescatter.direct", 3, plan::DType::kBF16, Backend::kSm, 1, 390, 264, 64}, c);
  if (results[0].code() == absl::StatusCode::kFailedPrecondition) GTEST_SKIP() << results[0];
  EXPECT_TRUE(results[2].ok()) << results[2];
  for (int r : {0, 1}) {
    EXPECT_EQ(results[r].code(), absl::StatusCode::kDeadlineExceeded)
        << "rank " << r << ": " << results[r];
    EXPECT_THAT(results[r].message(), HasSubstr("rank 2 had not entered launch")) << results[r];
  }
}

// Four ranks sharing one GPU as MPS clients with a quarter of its SMs each (gpu-checks.sh runs
// this test at MPS_PCT=25 as well): the fused copy-engine AllGather of the Hopper kernel (one CTA
// per SM) stalled within 15 launches when it left 1 or 4 of a rank's 32 slots to the driver's
// copy kernels, ran 20,000 launches clean with 8 (bench/RESULTS.md, tenth session; at 8 chunks
// it still stalled) and then stalled here at launch 205 (eleventh session). The launch leaves
// DefaultCopyEngineFreeCtas slots free: 3/8 when more than two ranks share the GPU. The
// LLaMA-3.1-8B shape of the stall matrix, chunks of 2 MB.
TEST(FusedCopyEngineTest, FourRanksOnOneGpuLeaveTheDriversCopiesRoom) {
  SYNCOPATE_REQUIRE_GPU();
  SYNCOPATE_REQUIRE_RANKS_FIT(4);
  // At 50% each (gpu-checks.sh's default share) 4 ranks' grids leave the driver's copy kernels no
  // slot at all, whatever a rank leaves of the 66 SMs it sees: stalled at launch 99 (eleventh
  // session). The free-slot rule is for ranks at their share of the GPU.
  if (std::string why = MpsOversubscribedReason(4); !why.empty()) GTEST_SKIP() << why;
  const Param p{"ag", "allgather.push", 4, plan::DType::kBF16, Backend::kCopyEngine, 2, 2048, 3584,
                4096};
  WorkloadConfig c;
  c.launches = 300;
  c.check_every = 100;
  c.dynamic_tiles = true;
  bool skip = false;
  auto results = RunWgmmaWorkload(p, c, &skip);
  if (skip) GTEST_SKIP() << results[0];
  ExpectEveryRankOk(results);
}

TEST(FusedLoopTest, ThousandsOfLaunches) {
  SYNCOPATE_REQUIRE_GPU();
  for (Backend b : {Backend::kCopyEngine, Backend::kSm}) {
    WorkloadConfig c;
    c.launches = 2000;
    c.check_every = 250;
    auto results = RunWorkload({"ag", "allgather.push", 2, plan::DType::kBF16, b, 2, 256, 128, 64}, c);
    ExpectEveryRankOk(results, cuda::BackendName(b));
  }
}

#if SYNCOPATE_GPU_TEST_WITH_DAEMON
// The daemon's binary end to end: a real syncopated compiles the fused kernel (for the arch the
// runtime asks, sm_90a on Hopper), each rank process fetches it through the client library,
// loads it and runs it; every output element is checked as in every workload test.
TEST(FusedFetchTest, RanksRunTheDaemonsBinaryAndMatchTheReference) {
  SYNCOPATE_REQUIRE_GPU();
  TempDir dir;
  // $SYNCOPATED on the GPU machine, where the bundle (scripts/gpu-run.sh) carries the daemon.
  const char* syncopated = std::getenv("SYNCOPATED");
  DaemonProcess daemon(syncopated != nullptr ? syncopated : SYNCOPATED_PATH, dir, "gpu_fetch",
                       {"--cache_dir=" + dir.Path("cache")});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  WorkloadConfig c;
  c.launches = 3;
  c.fetcher = DaemonFetcherAt(daemon.socket());
  for (Backend b : {Backend::kCopyEngine, Backend::kSm}) {
    auto results = RunWorkload({"ag", "allgather.push", 2, plan::DType::kBF16, b, 2, 256, 128, 64}, c);
    for (size_t r = 0; r < results.size(); ++r) {
      EXPECT_TRUE(results[r].ok()) << cuda::BackendName(b) << " rank " << r << ": " << results[r]
                                   << "\n--- daemon log ---\n" << daemon.Log();
    }
  }
}
#endif

// After launch 0 every rank skips 2^31 + 12345 epochs, as a bucket idle for days would: the
// signal, entered and drained words of launch 0 are then more than half the epoch range behind,
// where a cyclic ">=" reads them as reached, and so are the copy-engine gates the driver's
// cyclic GEQ awaits (Group::RefreshStaleGates rewrites those). The launches after the jump must
// wait for their own words and stay right on both backends.
TEST(FusedEpochTest, WordsLeftHalfTheEpochRangeBehindAreNotReadAsReached) {
  SYNCOPATE_REQUIRE_GPU();
  for (Backend b : {Backend::kCopyEngine, Backend::kSm}) {
    WorkloadConfig c;
    c.launches = 4;
    c.epoch_jump = (1u << 31) + 12345;
    auto results =
        RunWorkload({"ag", "allgather.push", 2, plan::DType::kBF16, b, 2, 264, 136, 64}, c);
    ExpectEveryRankOk(results, cuda::BackendName(b));
  }
}

TEST(FusedGraphTest, ReplaysAdvanceTheEpoch) {
  SYNCOPATE_REQUIRE_GPU();
  for (Backend b : {Backend::kCopyEngine, Backend::kSm}) {
    WorkloadConfig c;
    c.graph = true;
    c.launches = 200;
    c.check_every = 25;
    auto results = RunWorkload({"ag", "allgather.push", 3, plan::DType::kBF16, b, 2, 300, 136, 64}, c);
    ExpectEveryRankOk(results, cuda::BackendName(b));
  }
  WorkloadConfig rs;
  rs.graph = true;
  rs.launches = 50;
  rs.check_every = 10;
  auto results = RunWorkload({"rs", "reducescatter.direct", 2, plan::DType::kBF16, Backend::kSm, 2, 260, 136, 64}, rs);
  for (size_t r = 0; r < results.size(); ++r) EXPECT_TRUE(results[r].ok()) << "rs rank " << r << ": " << results[r];
}

TEST(FusedTimeoutTest, NeverLaunchingRankIsNamedAndTheGpuStaysUsable) {
  SYNCOPATE_REQUIRE_GPU();
  for (Backend b : {Backend::kCopyEngine, Backend::kSm}) {
    WorkloadConfig c;
    c.absent_rank = 2;
    c.timeout = absl::Milliseconds(200);
    const absl::Time start = absl::Now();
    auto results = RunWorkload({"ag", "allgather.push", 3, plan::DType::kBF16, b, 2, 300, 136, 64}, c);
    EXPECT_TRUE(results[2].ok()) << results[2];
    // Both others fail by deadline and both name rank 2 as the cause, whichever of their waits
    // expired first (the first wait alone named the other survivor in some runs, under MPS and
    // time-sliced: they abort and starve each other). Group::WithAbsentPeers reads who entered.
    for (int r : {0, 1}) {
      EXPECT_EQ(results[r].code(), absl::StatusCode::kDeadlineExceeded)
          << cuda::BackendName(b) << " rank " << r << ": " << results[r];
      EXPECT_TRUE(absl::StrContains(results[r].message(), "rank 2 had not entered launch"))
          << cuda::BackendName(b) << " rank " << r << ": " << results[r];
    }
    EXPECT_LT(absl::Now() - start, absl::Seconds(120));
  }
}

// A rank killed (SIGKILL) with its launch in flight, on both backends, time-sliced or under MPS:
// every survivor fails by its deadline, at least one naming the dead rank, and the GPU still runs
// a local launch right for each of them.
TEST(FusedTimeoutTest, RankKilledMidLaunchIsNamedAndTheGpuStaysUsable) {
  SYNCOPATE_REQUIRE_GPU();
  for (Backend b : {Backend::kCopyEngine, Backend::kSm}) {
    WorkloadConfig c;
    c.killed_rank = 1;
    c.kill_after_launch = 3;
    c.launches = 6;
    c.check_every = 1;
    c.timeout = absl::Milliseconds(300);
    const absl::Time start = absl::Now();
    auto results = RunWorkload({"ag", "allgather.push", 3, plan::DType::kBF16, b, 2, 300, 136, 64}, c);
    EXPECT_FALSE(results[1].ok()) << "the killed rank reported success";
    int named = 0;
    for (int r : {0, 2}) {
      EXPECT_EQ(results[r].code(), absl::StatusCode::kDeadlineExceeded)
          << cuda::BackendName(b) << " rank " << r << ": " << results[r];
      EXPECT_THAT(results[r].message(), Not(HasSubstr("local launch after the failed one")))
          << results[r];
      named += absl::StrContains(results[r].message(), "rank 1");
    }
    EXPECT_GE(named, 1) << cuda::BackendName(b) << ": " << results[0] << " / " << results[2];
    EXPECT_LT(absl::Now() - start, absl::Seconds(60));
  }
}

// The warp-specialised kernel's abort path: the producer's wait times out, it wakes the consumers
// through the stage barrier, and every role returns (no hang), with the absent rank named.
TEST(FusedTimeoutTest, WgmmaKernelNamesTheAbsentRank) {
  SYNCOPATE_REQUIRE_GPU();
  WorkloadConfig c;
  c.absent_rank = 2;
  c.wgmma = true;
  c.timeout = absl::Milliseconds(200);
  auto results = RunWorkload({"ag", "allgather.push", 3, plan::DType::kBF16, Backend::kSm, 2, 300, 136, 64}, c);
  if (results[0].code() == absl::StatusCode::kFailedPrecondition) GTEST_SKIP() << results[0];
  EXPECT_TRUE(results[2].ok()) << results[2];
  // As in NeverLaunchingRankIsNamedAndTheGpuStaysUsable: both survivors name rank 2.
  for (int r : {0, 1}) {
    EXPECT_EQ(results[r].code(), absl::StatusCode::kDeadlineExceeded) << "rank " << r << ": " << results[r];
    EXPECT_THAT(results[r].message(), HasSubstr("rank 2 had not entered launch")) << results[r];
  }
}

TEST(FusedBackendTest, CopyEngineRefusesReductions) {
  SYNCOPATE_REQUIRE_GPU();
  WorkloadConfig c;
  auto results = RunWorkload({"rs", "reducescatter.direct", 2, plan::DType::kBF16, Backend::kCopyEngine, 1, 256, 128, 64}, c);
  for (const absl::Status& s : results) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  }
}

}  // namespace
}  // namespace syncopate::testing
