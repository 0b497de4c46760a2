// The daemon as the runtime's cubin source: a build with DaemonKernelFetcher loads the binary the
// (embedded, real) daemon compiled, for the fused and the local variant and for the arch asked;
// a binary for another key, or a daemon error, leaves the build to NVRTC here with the reason
// recorded; a fetched binary fills the local cache like a compiled one. With a syncopated
// process: a killed daemon and a stopped one (past the request's timeout) leave the build to
// NVRTC too, naming why.
#include "client/kernel_fetch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/plan/templates.h"
#include "core/plan_io/plan_proto.h"
#include "jit/build/kernel_build.h"
#include "syncopate/client.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/test_kernels.h"

namespace syncopate {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

class KernelFetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto client = Client::Embedded();
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_.emplace(*client);
    plan::TemplateParams params;
    params.world_size = 4;
    params.shape = {64, 32};
    params.dtype = plan::DType::kBF16;
    auto built = plan::BuildTemplate("allgather.ring", params);
    ASSERT_TRUE(built.ok()) << built.status().ToString();
    plan_ = *built;
    auto spec = jit::ParseKernelSpec(testing::kTestKernelSpec);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    spec_ = *spec;
    base_.kernel.source = testing::kTestKernelSource;
    base_.kernel.spec = testing::kTestKernelSpec;
    ASSERT_TRUE(plan_io::ToProto(plan_).SerializeToString(&base_.plan));
  }

  jit::BuildOptions WithFetcher(const CompileRequest& base, const std::string& arch = "sm_90") {
    jit::BuildOptions build;
    build.arch = arch;
    build.fetch = DaemonKernelFetcher(*client_, base);
    return build;
  }

  std::optional<Client> client_;
  plan::Plan plan_;
  jit::KernelSpec spec_;
  CompileRequest base_;
};

TEST_F(KernelFetchTest, FusedKernelIsTheDaemonsBinary) {
  auto built = jit::BuildFusedKernel(plan_, spec_, testing::kTestKernelSource, WithFetcher(base_));
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_TRUE(built->fetched) << built->fetch_error;
  EXPECT_EQ(built->fetch_error, "");
  auto daemon = client_->Compile(base_);
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  EXPECT_TRUE(daemon->cache_hit);  // the fetch compiled it there, once
  EXPECT_EQ(built->cache_key, daemon->cache_key);
  EXPECT_EQ(built->compiled->binary, daemon->binary);
  EXPECT_EQ(built->compiled->target, "sm_90");
}

// The runtime builds for sm_90a on Hopper (wgmma); the daemon must compile for that arch.
TEST_F(KernelFetchTest, TheArchOfTheBuildIsTheArchAsked) {
  auto built = jit::BuildFusedKernel(plan_, spec_, testing::kTestKernelSource,
                                     WithFetcher(base_, "sm_90a"));
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_TRUE(built->fetched) << built->fetch_error;
  EXPECT_EQ(built->compiled->target, "sm_90a");
}

TEST_F(KernelFetchTest, LocalVariantIsFetchedWithoutThePlan) {
  auto built = jit::BuildLocalKernel(spec_, testing::kTestKernelSource, WithFetcher(base_));
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_TRUE(built->fetched) << built->fetch_error;
  CompileRequest local = base_;
  local.plan.clear();
  auto daemon = client_->Compile(local);
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  EXPECT_EQ(built->cache_key, daemon->cache_key);
}

// A fetcher set up for another kernel (here: one more comment line) answers with that kernel's
// binary; its key is not this build's, so it is not loaded and NVRTC compiles here.
TEST_F(KernelFetchTest, AnotherKernelsBinaryIsNeverUsed) {
  CompileRequest other = base_;
  other.kernel.source += "\n// another kernel\n";
  auto built = jit::BuildFusedKernel(plan_, spec_, testing::kTestKernelSource, WithFetcher(other));
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_FALSE(built->fetched);
  EXPECT_THAT(built->fetch_error, HasSubstr("the fetched binary is for key"));
  EXPECT_THAT(built->fetch_error, HasSubstr(built->cache_key));
  EXPECT_FALSE(built->compiled->binary.empty());
}

TEST_F(KernelFetchTest, DaemonErrorsLeaveTheBuildToNvrtc) {
  CompileRequest broken = base_;
  broken.kernel.spec = "this is not a kernel spec";
  auto built = jit::BuildFusedKernel(plan_, spec_, testing::kTestKernelSource, WithFetcher(broken));
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_FALSE(built->fetched);
  EXPECT_THAT(built->fetch_error, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(built->fetch_error, HasSubstr("daemon compile"));
  EXPECT_FALSE(built->compiled->binary.empty());
}

TEST_F(KernelFetchTest, FetchedBinaryFillsTheLocalCache) {
  cache::KernelCache::Options options;
  options.memory_only = true;
  auto cache = cache::KernelCache::Open(options);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  std::atomic<int> fetches{0};
  jit::BuildOptions build = WithFetcher(base_);
  build.cache = cache->get();
  build.fetch = [inner = build.fetch, &fetches](const jit::FetchQuery& query) {
    ++fetches;
    return inner(query);
  };
  auto first = jit::BuildFusedKernel(plan_, spec_, testing::kTestKernelSource, build);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->fetched) << first->fetch_error;
  EXPECT_EQ(first->source, cache::KernelCache::Source::kFetched);
  auto second = jit::BuildFusedKernel(plan_, spec_, testing::kTestKernelSource, build);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->source, cache::KernelCache::Source::kMemory);
  EXPECT_FALSE(second->fetched);  // served from the cache: neither fetched nor compiled
  EXPECT_EQ(fetches.load(), 1);
  EXPECT_EQ((*cache)->Stats().fetched, 1u);
  EXPECT_EQ((*cache)->Stats().compiles, 0u);  // no NVRTC here
  EXPECT_EQ(second->compiled->binary, first->compiled->binary);
}

// The runtime's disk cache and the daemon's in one directory (the demo's setup): the daemon
// compiles the key under the directory's per-key lock, so the runtime must ask it before taking
// that lock itself, or the request would wait on itself until its timeout.
TEST_F(KernelFetchTest, SharedCacheDirectoryIsNotADeadlock) {
  testing::TempDir dir;
  EmbeddedOptions embedded;
  embedded.cache_dir = dir.Path("cache");
  auto daemon = Client::Embedded(embedded);
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  cache::KernelCache::Options options;
  options.dir = dir.Path("cache");
  auto cache = cache::KernelCache::Open(options);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  jit::BuildOptions build;
  build.cache = cache->get();
  CompileRequest base = base_;
  base.timeout = std::chrono::seconds(60);  // a deadlock would end here, as a failed fetch
  build.fetch = DaemonKernelFetcher(*daemon, base);
  auto built = jit::BuildFusedKernel(plan_, spec_, testing::kTestKernelSource, build);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_TRUE(built->fetched) << built->fetch_error;
}

// A rank of a group spanning two nodes builds a kernel that depends on the node map (inter-node
// chunks leave the kernel's tables to the proxy): with the map in its request the daemon compiles
// that kernel and the rank loads it; without it the daemon's kernel is the one-node kernel, whose
// key differs, so the rank compiles itself (what every multi-node rank did before the map).
TEST_F(KernelFetchTest, TwoNodeRankLoadsTheDaemonsBinaryForItsNodeMap) {
  plan::TemplateParams params;
  params.world_size = 4;
  params.ranks_per_node = 2;
  params.shape = {64, 32};
  params.dtype = plan::DType::kBF16;
  auto plan = plan::BuildTemplate("allgather.two_level", params);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const std::vector<int> nodes = {0, 0, 1, 1};
  jit::CodegenOptions codegen;
  codegen.nodes = nodes;
  auto build_with = [&](const CompileRequest& base) {
    const jit::BuildOptions build = WithFetcher(base);
    auto prepared =
        jit::PrepareFusedKernel(*plan, spec_, testing::kTestKernelSource, build, codegen);
    EXPECT_TRUE(prepared.ok()) << prepared.status().ToString();
    return jit::BuildKernel(*prepared, build);
  };

  auto with_map = CompileRequestFor(&*plan, spec_, testing::kTestKernelSource, nodes);
  ASSERT_TRUE(with_map.ok()) << with_map.status().ToString();
  auto built = build_with(*with_map);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_TRUE(built->fetched) << built->fetch_error;
  EXPECT_NE(built->generated.source.find("// nodes:   0 0 1 1"), std::string::npos);
  auto daemon = client_->Compile(*with_map);
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  EXPECT_TRUE(daemon->cache_hit);  // the fetch compiled it there, once
  EXPECT_EQ(daemon->cache_key, built->cache_key);
  EXPECT_EQ(daemon->binary, built->compiled->binary);

  auto without_map = CompileRequestFor(&*plan, spec_, testing::kTestKernelSource);
  ASSERT_TRUE(without_map.ok()) << without_map.status().ToString();
  auto compiled_here = build_with(*without_map);
  ASSERT_TRUE(compiled_here.ok()) << compiled_here.status().ToString();
  EXPECT_FALSE(compiled_here->fetched);
  EXPECT_THAT(compiled_here->fetch_error, HasSubstr("the fetched binary is for key"));
  EXPECT_EQ(compiled_here->cache_key, built->cache_key);
}

// The map travels only with a plan and must cover the plan's ranks: the daemon says which.
TEST_F(KernelFetchTest, NodeMapWithoutItsPlanIsRejectedNamingTheField) {
  CompileRequest no_plan = base_;
  no_plan.plan.clear();
  no_plan.nodes = {0, 0, 1, 1};
  auto compiled = client_->Compile(no_plan);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(compiled.status().message(), HasSubstr("nodes"));
  CompileRequest short_map = base_;
  short_map.nodes = {0, 1};  // the plan has 4 ranks
  compiled = client_->Compile(short_map);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(compiled.status().message(), HasSubstr("one entry per rank (4)"));
}

class KernelFetchDaemonProcessTest : public KernelFetchTest {
 protected:
  void SetUp() override {
    KernelFetchTest::SetUp();
    daemon_ = std::make_unique<testing::DaemonProcess>(SYNCOPATED_PATH, dir_, "fetch");
    ASSERT_TRUE(daemon_->ok()) << daemon_->Log();
    auto client = Client::Connect(daemon_->socket());
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_.emplace(*client);
  }
  testing::TempDir dir_;
  std::unique_ptr<testing::DaemonProcess> daemon_;
};

TEST_F(KernelFetchDaemonProcessTest, KilledDaemonLeavesTheBuildToNvrtc) {
  auto fetched = jit::BuildFusedKernel(plan_, spec_, testing::kTestKernelSource, WithFetcher(base_));
  ASSERT_TRUE(fetched.ok()) << fetched.status().ToString();
  EXPECT_TRUE(fetched->fetched) << fetched->fetch_error;
  daemon_->process().Kill();
  auto built = jit::BuildFusedKernel(plan_, spec_, testing::kTestKernelSource, WithFetcher(base_));
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_FALSE(built->fetched);
  EXPECT_THAT(built->fetch_error, HasSubstr("UNAVAILABLE"));
  EXPECT_EQ(built->compiled->binary, fetched->compiled->binary);  // NVRTC here, same kernel
}

TEST_F(KernelFetchDaemonProcessTest, StoppedDaemonIsGivenUpAtTheRequestTimeout) {
  base_.timeout = std::chrono::seconds(2);  // bounds a stopped daemon's hold on the build
  daemon_->process().Signal(SIGSTOP);
  auto built = jit::BuildFusedKernel(plan_, spec_, testing::kTestKernelSource, WithFetcher(base_));
  daemon_->process().Signal(SIGCONT);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_FALSE(built->fetched);
  // Whichever bound fires first: the call's deadline (timeout + the client's wait grace) or the
  // channel's keepalive watchdog.
  EXPECT_THAT(built->fetch_error,
              AnyOf(HasSubstr("DEADLINE_EXCEEDED"), HasSubstr("keepalive watchdog timeout")));
  EXPECT_FALSE(built->compiled->binary.empty());
}

}  // namespace
}  // namespace syncopate
