// The ops' pure parts (syncopate/ops.h: CheckConfig, BucketsFor, ChoosePath) and the plans and
// specs an op compiles per bucket (ops/core/op_kernels.h). No GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "core/base/status_macros.h"
#include "jit/compiler/codegen.h"
#include "jit/compiler/embedded_headers.h"
#include "jit/compiler/kernel_spec.h"
#include "ops/core/op_kernels.h"
#include "ops/core/op_names.h"
#include "syncopate/ops.h"
#include "tests/testing/scoped_env.h"

namespace syncopate::ops {
namespace {

using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;

GroupConfig Group(int rank, int world) {
  GroupConfig g;
  g.job = "tp0";
  g.rank = rank;
  g.world = world;
  return g;
}

OpConfig AllGather(int64_t max_m) {
  OpConfig c;
  c.kind = OpKind::kAllGatherMatmul;
  c.max_m = max_m;
  c.n = 1024;
  c.k = 512;
  return c;
}

void ExpectInvalidNaming(const Status& status, const std::string& field) {
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  EXPECT_THAT(status.message(), HasSubstr(field));
}

TEST(CheckConfigTest, AcceptsAValidConfig) {
  EXPECT_TRUE(CheckConfig(Group(1, 2), AllGather(8192)).ok());
}

TEST(CheckConfigTest, NamesTheGroupFieldAtFault) {
  GroupConfig bad_job = Group(0, 2);
  bad_job.job = "has space";
  ExpectInvalidNaming(CheckConfig(bad_job, AllGather(8192)), "group.job");
  ExpectInvalidNaming(CheckConfig(Group(0, 0), AllGather(8192)), "group.world");
  ExpectInvalidNaming(CheckConfig(Group(2, 2), AllGather(8192)), "group.rank");
  GroupConfig bad_device = Group(0, 2);
  bad_device.device = -1;
  ExpectInvalidNaming(CheckConfig(bad_device, AllGather(8192)), "group.device");
  GroupConfig relative_dir = Group(0, 2);
  relative_dir.rendezvous_dir = "run/syncopate";
  ExpectInvalidNaming(CheckConfig(relative_dir, AllGather(8192)),
                      "group.rendezvous_dir 'run/syncopate' must be an absolute path");
}

TEST(CheckConfigTest, NamesTheOpFieldAtFault) {
  const GroupConfig g = Group(0, 4);
  ExpectInvalidNaming(CheckConfig(g, AllGather(8190)), "op.max_m");  // not a multiple of 4
  OpConfig c = AllGather(8192);
  c.n = 0;
  ExpectInvalidNaming(CheckConfig(g, c), "op.n");
  c = AllGather(8192);
  c.dtype = static_cast<DType>(7);
  ExpectInvalidNaming(CheckConfig(g, c), "op.dtype");
  c = AllGather(8192);
  c.chunks = 9;
  ExpectInvalidNaming(CheckConfig(g, c), "op.chunks");
  c = AllGather(8192);
  c.m_buckets = {4096, 1001};
  ExpectInvalidNaming(CheckConfig(g, c), "op.m_buckets entry 1001");
}

TEST(CheckConfigTest, RefusesTheCopyEngineForReductions) {
  OpConfig c = AllGather(8192);
  c.kind = OpKind::kMatmulReduceScatter;
  c.backend = Backend::kCopyEngine;
  ExpectInvalidNaming(CheckConfig(Group(0, 2), c),
                      "op.backend ce cannot run matmul_reduce_scatter");
  c.kind = OpKind::kAllGatherMatmul;
  EXPECT_TRUE(CheckConfig(Group(0, 2), c).ok());
}

TEST(BucketsTest, DefaultQuartersDownToTwoHundredFiftySixRowsPerRank) {
  Result<std::vector<int64_t>> buckets = BucketsFor(AllGather(8192), 2);
  ASSERT_TRUE(buckets.ok()) << buckets.status().ToString();
  EXPECT_THAT(*buckets, ElementsAre(512, 2048, 8192));
  // Rounded up to 64 rows per rank: 6000 / 4 = 1500 -> 1536 at world 2.
  buckets = BucketsFor(AllGather(6000), 2);
  ASSERT_TRUE(buckets.ok());
  EXPECT_THAT(*buckets, ElementsAre(1536, 6000));
}

TEST(BucketsTest, GivenBucketsAreSortedWithMaxMAdded) {
  OpConfig c = AllGather(8192);
  c.m_buckets = {4096, 128, 4096};
  Result<std::vector<int64_t>> buckets = BucketsFor(c, 2);
  ASSERT_TRUE(buckets.ok());
  EXPECT_THAT(*buckets, ElementsAre(128, 4096, 8192));
}

// The names the CLI and ops_bench take read back to the enums they print (op_names.h).
TEST(OpNamesTest, EveryNameReadsBackAndOthersAreRefused) {
  for (OpKind kind :
       {OpKind::kAllGatherMatmul, OpKind::kMatmulReduceScatter, OpKind::kMatmulAllReduce}) {
    EXPECT_EQ(OpKindFromName(OpKindName(kind)), kind);
  }
  EXPECT_EQ(OpKindFromName("ag"), OpKind::kAllGatherMatmul);
  EXPECT_EQ(OpKindFromName("rs"), OpKind::kMatmulReduceScatter);
  EXPECT_EQ(OpKindFromName("ar"), OpKind::kMatmulAllReduce);
  for (Backend b : {Backend::kAuto, Backend::kCopyEngine, Backend::kSm}) {
    EXPECT_EQ(BackendFromName(BackendName(b)), b);
  }
  for (PathPreference p :
       {PathPreference::kAuto, PathPreference::kFused, PathPreference::kUnfused}) {
    EXPECT_EQ(PathPreferenceFromName(PathPreferenceName(p)), p);
  }
  EXPECT_EQ(DTypeFromName("bf16"), DType::kBF16);
  EXPECT_EQ(DTypeFromName("fp16"), DType::kFP16);
  for (const char* other : {"", "AG", "unknown", "f16", "copy_engine"}) {
    EXPECT_FALSE(OpKindFromName(other) || BackendFromName(other) || PathPreferenceFromName(other) ||
                 DTypeFromName(other))
        << other;
  }
}

TEST(ChoosePathTest, TakesTheSmallestBucketAtOrAboveM) {
  const OpConfig c = AllGather(8192);
  Result<PathChoice> p = ChoosePath(c, 2, 2048);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->bucket_m, 2048);
  p = ChoosePath(c, 2, 2050);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->bucket_m, 8192);
  p = ChoosePath(c, 2, 2);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->bucket_m, 512);
}

TEST(ChoosePathTest, AllGatherFusesFromAThousandRowsPerRankAndSaysWhy) {
  const OpConfig c = AllGather(8192);
  Result<PathChoice> small = ChoosePath(c, 2, 1024);  // bucket 2048: 1024 rows per rank
  Result<PathChoice> tiny = ChoosePath(c, 2, 512);    // bucket 512: 256 rows per rank
  ASSERT_TRUE(small.ok() && tiny.ok());
  EXPECT_TRUE(small->fused);
  EXPECT_THAT(small->reason, HasSubstr("fused: 1024 rows per rank >= 1024"));
  EXPECT_FALSE(tiny->fused);
  EXPECT_THAT(tiny->reason, HasSubstr("unfused: 256 rows per rank"));
  EXPECT_EQ(small->backend, Backend::kSm);
}

// The plan is part of the path, so syncopate_choose_path names it without a GPU; an AllReduce's
// depends on the bucket's C (op_plans.h).
TEST(ChoosePathTest, NamesThePlanOfEachBucket) {
  testing::ScopedEnv no_knob("SYNCOPATE_OPS_ALLREDUCE_PLAN", nullptr);
  OpConfig c = AllGather(8192);
  c.n = 4096;
  c.m_buckets = {128, 512};
  const struct {
    OpKind kind;
    int64_t m;
    const char* plan;
  } expected[] = {{OpKind::kAllGatherMatmul, 128, "allgather.push"},
                  {OpKind::kMatmulReduceScatter, 8192, "reducescatter.direct"},
                  {OpKind::kMatmulAllReduce, 128, "allreduce.direct_out"},  // 1 MiB of C
                  {OpKind::kMatmulAllReduce, 512, "allreduce.direct"}};     // 4 MiB
  for (const auto& e : expected) {
    c.kind = e.kind;
    Result<PathChoice> p = ChoosePath(c, 2, e.m);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->plan, e.plan) << OpKindName(e.kind) << " " << e.m;
    EXPECT_THAT(p->reason, EndsWith(std::string("; plan ") + e.plan));
  }
}

TEST(ChoosePathTest, ReductionsRunUnfusedUnlessAsked) {
  OpConfig c = AllGather(8192);
  c.kind = OpKind::kMatmulAllReduce;
  Result<PathChoice> p = ChoosePath(c, 4, 8192);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->fused);
  c.path = PathPreference::kFused;
  c.chunks = 2;
  p = ChoosePath(c, 4, 8192);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->fused);
  EXPECT_EQ(p->chunks, 2);
  EXPECT_THAT(p->reason, HasSubstr("2 chunks per shard"));
}

// Measured (bench/RESULTS.md, eleventh and fourteenth sessions): the fused ReduceScatter and
// AllReduce beat the unfused pair at 2 ranks and 4096 rows per rank, and lose at 4 ranks and 512
// rows; elsewhere unmeasured.
TEST(ChoosePathTest, ReductionsFuseAtTwoRanksFromFourThousandRowsPerRank) {
  for (OpKind kind : {OpKind::kMatmulReduceScatter, OpKind::kMatmulAllReduce}) {
    SCOPED_TRACE(OpKindName(kind));
    OpConfig c = AllGather(8192);
    c.kind = kind;
    const bool rs = kind == OpKind::kMatmulReduceScatter;
    // Whole chunks asked for: two chunks per shard.
    c.tile_parts = false;
    Result<PathChoice> p = ChoosePath(c, 2, 8192);  // 4096 rows per rank
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(p->fused);
    EXPECT_FALSE(p->tile_parts);
    EXPECT_EQ(p->chunks, 2);
    // By default a ReduceScatter moves tile parts in one chunk per shard; an AllReduce's plan
    // has none.
    c.tile_parts = OpConfig{}.tile_parts;
    ASSERT_TRUE(c.tile_parts);
    p = ChoosePath(c, 2, 8192);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->tile_parts, rs);
    EXPECT_EQ(p->chunks, rs ? 1 : 2);
    EXPECT_EQ(p->reason.find("tile parts") != std::string::npos, rs) << p->reason;
    EXPECT_THAT(p->reason, HasSubstr("4096 rows per rank"));
    EXPECT_THAT(p->reason, HasSubstr(kind == OpKind::kMatmulReduceScatter ? "a ReduceScatter"
                                                                          : "an AllReduce"));
    for (auto [world, m] : {std::pair{2, 2048}, std::pair{4, 8192}, std::pair{8, 8192}}) {
      p = ChoosePath(c, world, m);
      ASSERT_TRUE(p.ok());
      // In tile parts a ReduceScatter fuses at 4 ranks (the next test).
      EXPECT_EQ(p->fused, rs && world == 4) << world << " ranks, M " << m;
      EXPECT_EQ(p->chunks, 1) << world << " ranks, M " << m;
    }
    c.chunks = 4;  // the config's chunks win
    p = ChoosePath(c, 2, 8192);
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(p->fused);
    EXPECT_EQ(p->chunks, 4);
    EXPECT_EQ(p->tile_parts, rs);
    c.chunks = 0;
    c.backend = Backend::kCopyEngine;  // copies move whole chunks
    p = ChoosePath(c, 2, 8192);
    ASSERT_TRUE(p.ok());
    EXPECT_FALSE(p->tile_parts);
    EXPECT_EQ(p->chunks, 2);
    c.backend = Backend::kAuto;
    c.tile_parts = false;
    c.chunks = 0;
    c.path = PathPreference::kUnfused;
    p = ChoosePath(c, 2, 8192);
    ASSERT_TRUE(p.ok());
    EXPECT_FALSE(p->fused);
  }
}

// With tile parts asked for, the ReduceScatter also fuses at 4 ranks from 512 rows per rank
// (measured there, eighteenth session); below, at other world sizes, on the copy engine and for
// an AllReduce the heuristic is as without.
TEST(ChoosePathTest, ReduceScatterInTilePartsFusesAtFourRanksFromFiveHundredTwelveRowsPerRank) {
  OpConfig c = AllGather(8192);
  c.kind = OpKind::kMatmulReduceScatter;
  c.tile_parts = true;
  c.m_buckets = {1024, 2048, 8192};
  Result<PathChoice> p = ChoosePath(c, 4, 2048);  // 512 rows per rank
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->fused);
  EXPECT_TRUE(p->tile_parts);
  EXPECT_EQ(p->chunks, 1);
  EXPECT_THAT(p->reason, HasSubstr("tile parts at 4 ranks"));
  for (auto [world, m] : {std::pair{4, 1024}, std::pair{8, 8192}, std::pair{2, 2048}}) {
    p = ChoosePath(c, world, m);
    ASSERT_TRUE(p.ok());
    EXPECT_FALSE(p->fused) << world << " ranks, M " << m;
  }
  c.backend = Backend::kCopyEngine;
  p = ChoosePath(c, 4, 2048);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->fused);
  c.backend = Backend::kAuto;
  c.tile_parts = false;
  p = ChoosePath(c, 4, 2048);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->fused);
  c.kind = OpKind::kMatmulAllReduce;
  c.tile_parts = true;
  p = ChoosePath(c, 4, 2048);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->fused);
}

TEST(ChoosePathTest, RejectsAnMThatNoRunCanTake) {
  const OpConfig c = AllGather(8192);
  for (int64_t m : {int64_t{0}, int64_t{-2}, int64_t{1023}, int64_t{8194}}) {
    Result<PathChoice> p = ChoosePath(c, 2, m);
    ASSERT_FALSE(p.ok()) << m;
    ExpectInvalidNaming(p.status(), "m " + std::to_string(m));
  }
}

TEST(ChoosePathTest, EveryRankReachesTheSameChoice) {
  // Pure in (config, world, m): the rank does not enter it, which is what keeps ranks agreeing.
  const OpConfig c = AllGather(8192);
  for (int64_t m = 2; m <= 8192; m += 194) {
    Result<PathChoice> a = ChoosePath(c, 2, m);
    Result<PathChoice> b = ChoosePath(c, 2, m);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->bucket_m, b->bucket_m);
    EXPECT_EQ(a->fused, b->fused);
    EXPECT_GE(a->bucket_m, m);
  }
}

TEST(BucketPathTest, ASetBucketWinsOverTheHeuristicAndSaysSo) {
  OpConfig c = AllGather(8192);  // buckets 512, 2048, 8192 at world 2
  c.bucket_paths = {{.bucket_m = 512, .fused = true, .backend = Backend::kCopyEngine, .chunks = 2},
                    {.bucket_m = 8192, .fused = false}};
  ASSERT_TRUE(CheckConfig(Group(0, 2), c).ok()) << CheckConfig(Group(0, 2), c).ToString();
  Result<PathChoice> small = ChoosePath(c, 2, 500);
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(small->fused);  // the heuristic would not fuse 256 rows per rank
  EXPECT_EQ(small->backend, Backend::kCopyEngine);
  EXPECT_EQ(small->chunks, 2);
  EXPECT_THAT(small->reason, HasSubstr("set for this bucket"));
  Result<PathChoice> big = ChoosePath(c, 2, 8192);
  ASSERT_TRUE(big.ok());
  EXPECT_FALSE(big->fused);
  EXPECT_EQ(big->backend, Backend::kSm);
  Result<PathChoice> mid = ChoosePath(c, 2, 2048);  // not set: the heuristic
  ASSERT_TRUE(mid.ok());
  EXPECT_TRUE(mid->fused);
  EXPECT_THAT(mid->reason, HasSubstr("rows per rank"));
}

TEST(BucketPathTest, BadEntriesAreNamed) {
  const GroupConfig g = Group(0, 2);
  OpConfig c = AllGather(8192);
  c.bucket_paths = {{.bucket_m = 1000}};
  ExpectInvalidNaming(CheckConfig(g, c),
                      "op.bucket_paths[0] (bucket M 1000) is not one of the "
                      "op's buckets: 512, 2048, 8192");
  c.bucket_paths = {{.bucket_m = 512}, {.bucket_m = 512, .fused = false}};
  ExpectInvalidNaming(CheckConfig(g, c),
                      "op.bucket_paths[1] (bucket M 512) sets that bucket twice");
  c.bucket_paths = {{.bucket_m = 512, .chunks = 9}};
  ExpectInvalidNaming(CheckConfig(g, c), "chunks 9");
  c.kind = OpKind::kMatmulReduceScatter;
  c.bucket_paths = {{.bucket_m = 512, .fused = false, .backend = Backend::kCopyEngine}};
  ExpectInvalidNaming(CheckConfig(g, c), "the ce backend cannot run matmul_reduce_scatter");
}

TEST(OpKernelsTest, EachCollectiveBindsItsOperandsToItsPlanBuffers) {
  for (Collective collective :
       {Collective::kAllGather, Collective::kReduceScatter, Collective::kAllReduce}) {
    OpKernelsRequest r;
    r.collective = collective;
    r.m = 2048;
    r.n = 512;
    r.k = 256;
    r.world = 4;
    r.chunks = 2;
    absl::StatusOr<OpKernels> k = BuildOpKernels(r);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_EQ(k->plan.world_size, 4);
    EXPECT_EQ(k->has_reductions, collective != Collective::kAllGather);
    EXPECT_EQ(k->comm_spec.entry, "syncopate_ops::comm_only");
    EXPECT_EQ(k->result_buffer, collective == Collective::kAllGather   ? ""
                                : collective == Collective::kAllReduce ? "data"
                                                                       : "output");
    EXPECT_TRUE(jit::CheckSpecAgainstPlan(k->gemm_spec, k->plan).ok());
  }
}

// The fused kernel the op would build from `k`, generated (not compiled).
absl::StatusOr<jit::GeneratedKernel> GenerateFused(const OpKernels& k) {
  ASSIGN_OR_RETURN(std::string_view source, jit::ExampleKernelSource(k.gemm_source));
  return jit::GenerateFusedKernel(k.plan, k.gemm_spec, source);
}

// Op::Run points the GEMM at the caller's own tensor at a bucket's M (AllGather: C; the
// reductions: A), and at the run's weight B, only through slots no peer maps: kernel
// parameters that are no plan buffer; and the AllReduce at the caller's C, through its rank-private
// "out".
// Were it one, the runtime would refuse the slot and every run would fall back to copying. The
// fused kernel and the local one (the unfused path's GEMM) must give it the same slot.
TEST(OpKernelsTest, TheOperandARunUsesInPlaceIsLocalToTheRank) {
  for (Collective collective :
       {Collective::kAllGather, Collective::kReduceScatter, Collective::kAllReduce}) {
    for (int world : {2, 4, 8}) {
      for (bool force_mma : {false, true}) {  // the wgmma GEMM (sm_90) and the mma one
        SCOPED_TRACE(::testing::Message() << "collective " << static_cast<int>(collective)
                                          << ", world " << world << ", mma " << force_mma);
        OpKernelsRequest r;
        r.collective = collective;
        r.m = 2048;
        r.n = 256;
        r.k = 256 / world;  // the GPU tests' shapes (ops_gpu_support.h)
        r.world = world;
        r.force_mma = force_mma;
        absl::StatusOr<OpKernels> k = BuildOpKernels(r);
        ASSERT_TRUE(k.ok()) << k.status();
        EXPECT_EQ(k->in_place_operand, collective == Collective::kAllGather ? "C" : "A");
        absl::StatusOr<jit::GeneratedKernel> fused = GenerateFused(*k);
        ASSERT_TRUE(fused.ok()) << fused.status();
        // The weight B too: every run passes its own, so one binding serves every weight.
        for (const std::string& operand : {k->in_place_operand, std::string("B")}) {
          absl::StatusOr<int> slot = jit::PerLaunchOperandSlot(fused->metadata.operands, operand);
          ASSERT_TRUE(slot.ok()) << slot.status();
          absl::StatusOr<int> local_slot =
              jit::PerLaunchOperandSlot(jit::SpecOperandSlots(k->gemm_spec), operand);
          ASSERT_TRUE(local_slot.ok()) << local_slot.status();
          EXPECT_EQ(*slot, *local_slot) << operand;
        }
        // The default plans copy the result out after the kernel.
        EXPECT_EQ(k->private_output, "");
        // allreduce.direct_out: the kernels' copies into "out", which a run points at the
        // caller's C, in the fused kernel and in the unfused path's transfers alike.
        if (collective == Collective::kAllReduce) {
          r.plan_template = "allreduce.direct_out";
          absl::StatusOr<OpKernels> out_plan = BuildOpKernels(r);
          ASSERT_TRUE(out_plan.ok()) << out_plan.status();
          EXPECT_EQ(out_plan->private_output, "out");
          absl::StatusOr<jit::GeneratedKernel> with_out = GenerateFused(*out_plan);
          ASSERT_TRUE(with_out.ok()) << with_out.status();
          absl::StatusOr<jit::GeneratedKernel> comm =
              jit::GenerateFusedKernel(out_plan->plan, out_plan->comm_spec, CommOnlySource());
          ASSERT_TRUE(comm.ok()) << comm.status();
          for (const jit::GeneratedKernel* kernel : {&*with_out, &*comm}) {
            absl::StatusOr<int> out =
                jit::PerLaunchOperandSlot(kernel->metadata.operands, out_plan->private_output);
            EXPECT_TRUE(out.ok()) << out.status();
          }
        }
      }
    }
  }
}

// The check itself refuses what peers address: a plan buffer, and a name the kernel lacks.
TEST(OpKernelsTest, SharedOperandsAreNotPerLaunch) {
  absl::StatusOr<OpKernels> k = BuildOpKernels(
      {.collective = Collective::kAllGather, .m = 2048, .n = 256, .k = 128, .world = 2});
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<jit::GeneratedKernel> fused = GenerateFused(*k);
  ASSERT_TRUE(fused.ok()) << fused.status();
  absl::StatusOr<int> a = jit::PerLaunchOperandSlot(fused->metadata.operands, "A");
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("plan buffer \"data\""));
  absl::StatusOr<int> none = jit::PerLaunchOperandSlot(fused->metadata.operands, "Z");
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("no operand 'Z'"));
}

TEST(OpKernelsTest, AnUnknownPlanTemplateIsNamed) {
  OpKernelsRequest r;
  r.m = 2048;
  r.n = 512;
  r.k = 256;
  r.world = 2;
  r.plan_template = "allgather.nope";
  absl::StatusOr<OpKernels> k = BuildOpKernels(r);
  ASSERT_FALSE(k.ok());
  EXPECT_THAT(std::string(k.status().message()), HasSubstr("allgather.nope"));
}

// What Create and ops_bench --fill-cache both build per bucket: the path ChoosePath takes and
// kernels for that bucket's M and chunks; an M that is no bucket is refused naming it.
TEST(OpKernelsTest, PlanBucketTakesChoosePathsPathAndBuildsForIt) {
  OpConfig config;
  config.kind = OpKind::kMatmulReduceScatter;
  config.max_m = 8192;
  config.n = 512;
  config.k = 256;
  config.m_buckets = {2048, 8192};
  config.bucket_paths = {{.bucket_m = 8192, .fused = true, .chunks = 2}};
  for (int64_t bucket : {2048, 8192}) {
    Result<PathChoice> chosen = ChoosePath(config, 2, bucket);
    ASSERT_TRUE(chosen.ok());
    absl::StatusOr<BucketKernels> b = PlanBucket(config, 2, bucket, 90);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->path.fused, chosen->fused) << bucket;
    EXPECT_EQ(b->path.chunks, chosen->chunks) << bucket;
    EXPECT_EQ(b->kernels.plan.world_size, 2);
    EXPECT_EQ(b->kernels.result_buffer, "output");
    EXPECT_EQ(b->kernels.plan.name, "reducescatter.direct");
  }
  absl::StatusOr<BucketKernels> set = PlanBucket(config, 2, 8192, 90);  // bucket_paths' entry
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(set->path.fused);
  EXPECT_EQ(set->path.chunks, 2);
  // By default a fused ReduceScatter on the SM backend: its GEMM moves tile parts; the
  // transfers never do.
  EXPECT_TRUE(set->path.tile_parts);
  EXPECT_TRUE(set->kernels.gemm_spec.push_tiles);
  EXPECT_FALSE(set->kernels.comm_spec.push_tiles);
  config.tile_parts = false;  // whole chunks
  absl::StatusOr<BucketKernels> whole = PlanBucket(config, 2, 8192, 90);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_FALSE(whole->path.tile_parts);
  EXPECT_FALSE(whole->kernels.gemm_spec.push_tiles);
  EXPECT_FALSE(PlanBucket(config, 2, 2048, 90)->path.fused);  // RS below 4096 rows per rank
  absl::StatusOr<BucketKernels> bad = PlanBucket(config, 2, 9000, 90);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("9000"));
}

// An AllReduce bucket whose C is at most 2 MiB writes the caller's C from its kernel
// (allreduce.direct_out: measured as fast there, with one launch fewer); larger ones keep
// allreduce.direct (measured faster there), fused or not. The knob takes one plan for all.
TEST(OpKernelsTest, SmallAllReduceBucketsWriteTheCallersOutputFromTheKernel) {
  OpConfig config;
  config.kind = OpKind::kMatmulAllReduce;
  config.max_m = 8192;
  config.n = 4096;
  config.k = 256;
  config.m_buckets = {128, 256, 512, 8192};
  testing::ScopedEnv no_knob("SYNCOPATE_OPS_ALLREDUCE_PLAN", nullptr);
  struct Expected {
    int64_t m;
    const char* plan;
  };
  // 128 and 256 rows of 4096 bf16 columns: 1 and 2 MiB; 512 rows: 4 MiB.
  for (const Expected& e :
       {Expected{128, "allreduce.direct_out"}, Expected{256, "allreduce.direct_out"},
        Expected{512, "allreduce.direct"}, Expected{8192, "allreduce.direct"}}) {
    EXPECT_EQ(AllReducePlanFor(config, e.m), e.plan) << e.m;
    absl::StatusOr<BucketKernels> b = PlanBucket(config, 2, e.m, 90);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->kernels.plan.name, e.plan) << e.m;
    EXPECT_EQ(b->path.plan, e.plan) << e.m;
    EXPECT_THAT(b->path.reason, EndsWith(std::string("; plan ") + e.plan)) << e.m;
    EXPECT_EQ(b->kernels.private_output, e.plan == std::string("allreduce.direct_out") ? "out" : "")
        << e.m;
  }
  EXPECT_TRUE(PlanBucket(config, 2, 8192, 90)->path.fused);
  EXPECT_FALSE(PlanBucket(config, 2, 128, 90)->path.fused);
  {
    testing::ScopedEnv knob("SYNCOPATE_OPS_ALLREDUCE_PLAN", "allreduce.direct_out");
    EXPECT_EQ(AllReducePlanFor(config, 8192), "allreduce.direct_out");
  }
  {
    testing::ScopedEnv knob("SYNCOPATE_OPS_ALLREDUCE_PLAN", "allreduce.direct");
    EXPECT_EQ(AllReducePlanFor(config, 128), "allreduce.direct");
  }
}

}  // namespace
}  // namespace syncopate::ops
