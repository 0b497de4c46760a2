// The C ABI (syncopate/syncopate_ops.h) through libsyncopate.so as a C caller sees it: struct
// sizes checked, NULLs refused with a message, the pure functions, the thread's last error, and
// creation without a GPU (UNAVAILABLE, *out left NULL). No GPU needed; on a GPU machine the
// creation case is skipped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <thread>

#include "runtime/cuda/workloads/multiprocess.h"
#include "syncopate/syncopate_ops.h"
#include "tests/testing/scoped_env.h"

namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;

syncopate_group_config Group(int rank, int world) {
  syncopate_group_config g;
  std::memset(&g, 0, sizeof(g));
  g.struct_size = sizeof(g);
  g.job = "c_api_test";
  g.rank = rank;
  g.world = world;
  return g;
}

syncopate_op_config AllGather() {
  syncopate_op_config c;
  std::memset(&c, 0, sizeof(c));
  c.struct_size = sizeof(c);
  c.kind = SYNCOPATE_ALL_GATHER_MATMUL;
  c.max_m = 8192;
  c.n = 1024;
  c.k = 512;
  return c;
}

syncopate_path Path() {
  syncopate_path p;
  std::memset(&p, 0, sizeof(p));
  p.struct_size = sizeof(p);
  return p;
}

TEST(CApiTest, VersionAndStatusNames) {
  EXPECT_EQ(syncopate_abi_version(), SYNCOPATE_ABI_VERSION);
  EXPECT_STREQ(syncopate_status_name(SYNCOPATE_INVALID_ARGUMENT), "INVALID_ARGUMENT");
  EXPECT_STREQ(syncopate_status_name(99), "UNKNOWN");
}

TEST(CApiTest, ConfigErrorsNameTheFieldAndSuccessClearsTheMessage) {
  syncopate_group_config g = Group(3, 2);
  syncopate_op_config c = AllGather();
  EXPECT_EQ(syncopate_check_config(&g, &c), SYNCOPATE_INVALID_ARGUMENT);
  EXPECT_THAT(syncopate_last_error(), HasSubstr("group.rank 3"));
  g.rank = 1;
  EXPECT_EQ(syncopate_check_config(&g, &c), SYNCOPATE_OK);
  EXPECT_STREQ(syncopate_last_error(), "");
  c.kind = 7;
  EXPECT_EQ(syncopate_check_config(&g, &c), SYNCOPATE_INVALID_ARGUMENT);
  EXPECT_THAT(syncopate_last_error(), HasSubstr("op.kind 7"));
}

TEST(CApiTest, ShortStructsAndNullsAreRefusedWithAMessage) {
  syncopate_group_config g = Group(0, 2);
  syncopate_op_config c = AllGather();
  g.struct_size = 8;
  EXPECT_EQ(syncopate_check_config(&g, &c), SYNCOPATE_INVALID_ARGUMENT);
  EXPECT_THAT(syncopate_last_error(), HasSubstr("group config struct_size 8"));
  g.struct_size = sizeof(g);
  EXPECT_EQ(syncopate_check_config(&g, nullptr), SYNCOPATE_INVALID_ARGUMENT);
  EXPECT_THAT(syncopate_last_error(), HasSubstr("op config is NULL"));
  c.num_buckets = SYNCOPATE_MAX_BUCKETS + 1;
  EXPECT_EQ(syncopate_check_config(&g, &c), SYNCOPATE_INVALID_ARGUMENT);
  EXPECT_THAT(syncopate_last_error(), HasSubstr("num_buckets"));
  EXPECT_EQ(syncopate_op_run(nullptr, 128, 1, 1, 1, 0, nullptr), SYNCOPATE_INVALID_ARGUMENT);
  EXPECT_THAT(syncopate_last_error(), HasSubstr("op is NULL"));
  EXPECT_EQ(syncopate_op_input_workspace(nullptr, 128), 0u);
  syncopate_op_destroy(nullptr);  // a no-op
}

// A handle syncopate_op_create did not return (or one destroyed since) is refused by name on
// every call, never dereferenced, and destroying it does nothing.
TEST(CApiTest, AHandleThatIsNotALiveOpIsRefusedNotUsed) {
  int not_an_op = 0;
  auto* fake = reinterpret_cast<syncopate_op*>(&not_an_op);
  EXPECT_EQ(syncopate_op_run(fake, 128, 1, 1, 1, 0, nullptr), SYNCOPATE_INVALID_ARGUMENT);
  EXPECT_THAT(syncopate_last_error(), HasSubstr("is not a live op (destroyed, or not returned"));
  EXPECT_EQ(syncopate_op_synchronize(fake, nullptr), SYNCOPATE_INVALID_ARGUMENT);
  EXPECT_EQ(syncopate_op_error(fake), SYNCOPATE_INVALID_ARGUMENT);
  syncopate_path path{};
  path.struct_size = sizeof(path);
  EXPECT_EQ(syncopate_op_path(fake, 128, &path), SYNCOPATE_INVALID_ARGUMENT);
  EXPECT_EQ(syncopate_op_input_workspace(fake, 128), 0u);
  EXPECT_THAT(syncopate_last_error(), HasSubstr("is not a live op"));
  syncopate_op_destroy(fake);  // nothing to free: must not touch it
  EXPECT_THAT(syncopate_last_error(), HasSubstr("is not a live op"));
  EXPECT_EQ(not_an_op, 0);
}

TEST(CApiTest, ChoosePathFillsTheStructAndNamesABadM) {
  syncopate_op_config c = AllGather();
  c.num_buckets = 1;
  c.m_buckets[0] = 1024;
  syncopate_path p = Path();
  ASSERT_EQ(syncopate_choose_path(&c, 2, 1000, &p), SYNCOPATE_OK) << syncopate_last_error();
  EXPECT_EQ(p.m, 1000);
  EXPECT_EQ(p.bucket_m, 1024);
  EXPECT_EQ(p.fused, 0);  // 512 rows per rank: below the heuristic's 1024
  EXPECT_EQ(p.backend, SYNCOPATE_BACKEND_SM);
  EXPECT_THAT(std::string(p.reason), HasSubstr("bucket M 1024"));
  EXPECT_STREQ(p.plan, "allgather.push");
  EXPECT_EQ(syncopate_choose_path(&c, 2, 1001, &p), SYNCOPATE_INVALID_ARGUMENT);
  EXPECT_THAT(syncopate_last_error(), HasSubstr("m 1001"));
  syncopate_path short_path = Path();
  short_path.struct_size = 4;
  EXPECT_EQ(syncopate_choose_path(&c, 2, 1000, &short_path), SYNCOPATE_INVALID_ARGUMENT);
  EXPECT_EQ(syncopate_choose_path(&c, 2, 1000, nullptr), SYNCOPATE_INVALID_ARGUMENT);
}

// An AllReduce's plan depends on the bucket (C of at most 2 MiB: direct_out); the path names it
// in a field of its own, which a long reason cannot cut off.
TEST(CApiTest, ThePathNamesEachBucketsPlan) {
  syncopate::testing::ScopedEnv no_knob("SYNCOPATE_OPS_ALLREDUCE_PLAN", nullptr);
  syncopate_op_config c = AllGather();
  c.kind = SYNCOPATE_MATMUL_ALL_REDUCE;
  c.max_m = 8192;
  c.n = 4096;
  c.num_buckets = 1;
  c.m_buckets[0] = 128;  // 1 MiB of C
  syncopate_path p = Path();
  ASSERT_EQ(syncopate_choose_path(&c, 2, 128, &p), SYNCOPATE_OK) << syncopate_last_error();
  EXPECT_STREQ(p.plan, "allreduce.direct_out");
  ASSERT_EQ(syncopate_choose_path(&c, 2, 8192, &p), SYNCOPATE_OK) << syncopate_last_error();
  EXPECT_STREQ(p.plan, "allreduce.direct");
  EXPECT_THAT(std::string(p.reason), EndsWith("; plan allreduce.direct"));
}

// A caller built against an older header of this ABI passes a smaller struct: its missing
// fields take their defaults (config) or stay unwritten (path); below the first release's size
// the struct is refused, naming struct_size.
TEST(CApiTest, StructsFromAnOlderHeaderWorkWithoutTheirNewerFields) {
  syncopate_op_config c = AllGather();
  c.kind = SYNCOPATE_MATMUL_REDUCE_SCATTER;
  c.path = SYNCOPATE_PATH_FUSED;
  c.tile_parts = 7;  // past an older caller's struct: not read
  c.struct_size = offsetof(syncopate_op_config, tile_parts);
  syncopate_path p = Path();
  p.struct_size = offsetof(syncopate_path, tile_parts);
  p.tile_parts = -5;
  std::memset(p.plan, 'x', sizeof(p.plan));
  ASSERT_EQ(syncopate_choose_path(&c, 2, 4096, &p), SYNCOPATE_OK) << syncopate_last_error();
  EXPECT_EQ(p.m, 4096);
  EXPECT_THAT(std::string(p.reason), HasSubstr("tile parts"));  // the default: on
  EXPECT_EQ(p.tile_parts, -5);
  EXPECT_EQ(p.plan[0], 'x');
  p.struct_size = offsetof(syncopate_path, plan);  // a header with tile_parts but no plan
  ASSERT_EQ(syncopate_choose_path(&c, 2, 4096, &p), SYNCOPATE_OK) << syncopate_last_error();
  EXPECT_EQ(p.tile_parts, 1);
  EXPECT_EQ(p.plan[0], 'x');
  c.struct_size = offsetof(syncopate_op_config, tile_parts) - 1;
  EXPECT_EQ(syncopate_choose_path(&c, 2, 4096, &p), SYNCOPATE_INVALID_ARGUMENT);
  EXPECT_THAT(syncopate_last_error(), HasSubstr("op config struct_size"));
  c.struct_size = sizeof(c);
  c.tile_parts = 0;
  p.struct_size = offsetof(syncopate_path, tile_parts) - 1;
  EXPECT_EQ(syncopate_choose_path(&c, 2, 4096, &p), SYNCOPATE_INVALID_ARGUMENT);
  EXPECT_THAT(syncopate_last_error(), HasSubstr("path struct_size"));
}

// A fused ReduceScatter moves tile parts when the config says 1 or 0 (the default) and whole
// chunks when it says -1; the path says which.
TEST(CApiTest, TilePartsReachTheLibraryAndComeBackInThePath) {
  syncopate_op_config c = AllGather();
  c.kind = SYNCOPATE_MATMUL_REDUCE_SCATTER;
  c.path = SYNCOPATE_PATH_FUSED;
  syncopate_path p = Path();
  ASSERT_EQ(syncopate_choose_path(&c, 2, 4096, &p), SYNCOPATE_OK) << syncopate_last_error();
  EXPECT_EQ(p.tile_parts, 1);
  c.tile_parts = 1;
  ASSERT_EQ(syncopate_choose_path(&c, 2, 4096, &p), SYNCOPATE_OK) << syncopate_last_error();
  EXPECT_EQ(p.tile_parts, 1);
  EXPECT_THAT(std::string(p.reason), HasSubstr("tile parts"));
  c.tile_parts = -1;
  ASSERT_EQ(syncopate_choose_path(&c, 2, 4096, &p), SYNCOPATE_OK) << syncopate_last_error();
  EXPECT_EQ(p.tile_parts, 0);
  EXPECT_THAT(std::string(p.reason), ::testing::Not(HasSubstr("tile parts")));
  c.tile_parts = 2;
  EXPECT_EQ(syncopate_choose_path(&c, 2, 4096, &p), SYNCOPATE_INVALID_ARGUMENT);
  EXPECT_THAT(syncopate_last_error(), HasSubstr("tile_parts 2"));
}

TEST(CApiTest, TheLastErrorBelongsToTheCallingThread) {
  syncopate_group_config bad = Group(0, 0);
  syncopate_op_config c = AllGather();
  ASSERT_EQ(syncopate_check_config(&bad, &c), SYNCOPATE_INVALID_ARGUMENT);
  std::string other;
  std::thread([&] {
    syncopate_group_config good = Group(0, 2);
    (void)syncopate_check_config(&good, &c);
    other = syncopate_last_error();
  }).join();
  EXPECT_EQ(other, "");
  EXPECT_THAT(syncopate_last_error(), HasSubstr("group.world"));
}

TEST(CApiTest, CreateWithoutAGpuIsUnavailableAndLeavesNoOp) {
  std::string why;
  if (syncopate::workloads::ProbeGpu(&why))
    GTEST_SKIP() << "a GPU is present: ops_gpu_test covers Create";
  syncopate_group_config g = Group(0, 1);
  syncopate_op_config c = AllGather();
  c.max_m = 512;
  syncopate_op* op = reinterpret_cast<syncopate_op*>(0x1);
  EXPECT_EQ(syncopate_op_create(&g, &c, &op), SYNCOPATE_UNAVAILABLE);
  EXPECT_EQ(op, nullptr);
  EXPECT_THAT(syncopate_last_error(), HasSubstr("no usable GPU"));
}

}  // namespace
