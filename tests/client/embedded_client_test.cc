// The public client API over Client::Embedded: eight rank threads of one process join, agree and
// compile through the in-process services; errors keep the daemon's code and message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <future>
#include <set>
#include <thread>

#include "core/plan_io/plan_proto.h"
#include "jit/build/kernel_build.h"
#include "spdlog/spdlog.h"
#include "syncopate/client.h"
#include "syncopate/v1/plan.pb.h"
#include "tests/testing/template_plan.h"
#include "tests/testing/test_kernels.h"

namespace syncopate {
namespace {

using ::syncopate::testing::TemplatePlan;
using ::testing::HasSubstr;

constexpr int kWorld = 8;

TemplateSpec AllGather(std::vector<int64_t> shape = {64, 32}) {
  TemplateSpec spec;
  spec.name = "allgather.ring";
  spec.shape = std::move(shape);
  spec.dtype = "bf16";
  return spec;
}

std::vector<Group> JoinAll(const Client& client, const std::string& job) {
  std::vector<std::future<Result<Group>>> futures;
  for (int r = 0; r < kWorld; ++r) {
    futures.push_back(std::async(std::launch::async, [&, r] {
      JoinOptions options;
      options.job_id = job;
      options.world_size = kWorld;
      options.rank = r;
      // A bound, not a timing check: generous so a loaded CI machine cannot trip it.
      options.timeout = std::chrono::seconds(120);
      return client.Join(options);
    }));
  }
  std::vector<Group> groups;
  for (auto& f : futures) {
    auto group = f.get();
    EXPECT_TRUE(group.ok()) << group.status().ToString();
    if (group.ok()) groups.push_back(*group);
  }
  return groups;
}

class EmbeddedClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto client = Client::Embedded();
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_.emplace(*client);
  }
  std::optional<Client> client_;
};

TEST_F(EmbeddedClientTest, EightRankThreadsJoinAgreeAndCompile) {
  std::vector<Group> groups = JoinAll(*client_, "embedded");
  ASSERT_EQ(groups.size(), static_cast<size_t>(kWorld));
  std::vector<std::future<Result<AgreedPlan>>> agreed;
  for (const Group& g : groups) {
    agreed.push_back(std::async(std::launch::async, [&, g] {
      Proposal p;
      p.kernel_hash = "k";
      p.template_spec = AllGather();
      return client_->Agree(g, p, std::chrono::seconds(120));
    }));
  }
  std::set<std::string> hashes;
  std::string plan;
  for (auto& f : agreed) {
    auto a = f.get();
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    hashes.insert(a->plan_hash);
    plan = a->plan;
  }
  EXPECT_EQ(hashes.size(), 1u);

  CompileRequest request;
  request.kernel.source = testing::kTestKernelSource;
  request.kernel.spec = testing::kTestKernelSpec;
  request.plan = plan;
  auto first = client_->Compile(request);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->binary.empty());
  EXPECT_EQ(first->plan_hash, *hashes.begin());
  EXPECT_EQ(first->launch.block_threads, 128u);
  EXPECT_FALSE(first->launch.entry.empty());
  EXPECT_EQ(first->launch.num_tiles, 4u);
  EXPECT_EQ(first->target, "sm_90");
  EXPECT_FALSE(first->is_ptx);
  // The daemon derives its cache key on the shared build path: the runtime or the CLI building
  // the same kernel for the same arch gets the same key, so a node compiles it once for all.
  {
    v1::Plan wire;
    ASSERT_TRUE(wire.ParseFromString(plan));
    auto decoded = plan_io::FromProto(wire);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    auto spec = jit::ParseKernelSpec(testing::kTestKernelSpec);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    jit::BuildOptions build;
    build.arch = "sm_90";
    auto local_build = jit::BuildFusedKernel(*decoded, *spec, testing::kTestKernelSource, build);
    ASSERT_TRUE(local_build.ok()) << local_build.status().ToString();
    EXPECT_EQ(local_build->cache_key, first->cache_key);
  }
  auto second = client_->Compile(request);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(second->cache_hit);
  EXPECT_EQ(second->cache_key, first->cache_key);
  EXPECT_EQ(second->binary, first->binary);
  request.known_cache_key = first->cache_key;  // revalidation: same key, no binary sent
  auto third = client_->Compile(request);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_TRUE(third->binary_omitted);
  EXPECT_TRUE(third->binary.empty());
  EXPECT_EQ(third->launch.entry, first->launch.entry);
  request.known_cache_key.clear();
  // By plan hash alone: the daemon kept the plan it agreed on, so the request carries no plan.
  {
    CompileRequest by_hash = request;
    by_hash.plan.clear();
    by_hash.plan_hash = *hashes.begin();
    auto hashed = client_->Compile(by_hash);
    ASSERT_TRUE(hashed.ok()) << hashed.status().ToString();
    EXPECT_TRUE(hashed->cache_hit);
    EXPECT_EQ(hashed->cache_key, first->cache_key);
    EXPECT_EQ(hashed->plan_hash, first->plan_hash);
    EXPECT_EQ(hashed->binary, first->binary);
  }
  // Without a plan: the local kernel over the identity schedule, a different cache entry.
  request.plan.clear();
  auto local = client_->Compile(request);
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  EXPECT_NE(local->cache_key, first->cache_key);
  EXPECT_TRUE(local->plan_hash.empty());
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->nvrtc_compiles, 2u);
  const Status health = client_->CheckHealth();
  EXPECT_TRUE(health.ok()) << health.ToString();
}

// Eight calls for one kernel at once: one compiles, the others wait on it. Each call's state is
// released once it is answered, not at its deadline (ten minutes here): the daemon held joined
// calls, requests and all, until their deadlines passed.
TEST_F(EmbeddedClientTest, CallsWaitingOnOneCompileAreReleasedOnceAnswered) {
  CompileRequest request;
  // A source no earlier test compiled, so the first call really compiles and the others join it.
  request.kernel.source =
      std::string(testing::kTestKernelSource) + "\n// " + std::to_string(::getpid()) + "_" +
      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "\n";
  request.kernel.spec = testing::kTestKernelSpec;
  request.timeout = std::chrono::minutes(10);
  std::vector<std::future<Result<CompiledKernel>>> calls;
  calls.reserve(kWorld);
  for (int i = 0; i < kWorld; ++i) {
    calls.push_back(std::async(std::launch::async, [&] { return client_->Compile(request); }));
  }
  for (auto& f : calls) {
    auto compiled = f.get();
    ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  }
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->nvrtc_compiles, 1u);  // the others joined it (or hit what it cached)
  // A worker drops its call just after replying: wait for that (a bound, not a timing check).
  for (int i = 0; i < 500 && stats.ok() && stats->compile_calls_held != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stats = client_->Stats();
  }
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->compile_calls_held, 0u);
}

// A daemon that never saw the plan (it restarted, or the plan was agreed elsewhere): by hash
// alone is NOT_FOUND naming plan_hash; with the plan at hand the client resends it in full; the
// daemon then holds it and later requests by hash alone work.
TEST_F(EmbeddedClientTest, CompileByPlanHashFallsBackToTheFullPlan) {
  auto built = TemplatePlan("allgather.ring", 4, {64, 32});
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  const std::string hash = plan::PlanHash(*built);
  std::string serialized;
  ASSERT_TRUE(plan_io::ToProto(*built).SerializeToString(&serialized));

  CompileRequest request;
  request.kernel.source = testing::kTestKernelSource;
  request.kernel.spec = testing::kTestKernelSpec;
  request.plan_hash = hash;
  auto unknown = client_->Compile(request);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("plan_hash: this daemon does not hold plan"));

  request.plan = serialized;
  auto resent = client_->Compile(request);
  ASSERT_TRUE(resent.ok()) << resent.status().ToString();
  EXPECT_EQ(resent->plan_hash, hash);

  request.plan.clear();
  auto by_hash = client_->Compile(request);
  ASSERT_TRUE(by_hash.ok()) << by_hash.status().ToString();
  EXPECT_TRUE(by_hash->cache_hit);
  EXPECT_EQ(by_hash->cache_key, resent->cache_key);

  request.plan_hash = std::string(64, '0');  // well-formed, but no plan has it
  EXPECT_EQ(client_->Compile(request).status().code(), StatusCode::kNotFound);
}

TEST_F(EmbeddedClientTest, ErrorsCarryCodeAndMessage) {
  JoinOptions bad;
  bad.job_id = "";
  bad.world_size = 2;
  bad.rank = 0;
  auto r = client_->Join(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("job_id: is required"));
  EXPECT_THAT(r.status().ToString(), HasSubstr("INVALID_ARGUMENT: job_id"));

  JoinOptions lonely;
  lonely.job_id = "lonely";
  lonely.world_size = 3;
  lonely.rank = 1;
  lonely.timeout = std::chrono::milliseconds(200);
  auto late = client_->Join(lonely);
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(late.status().message(), HasSubstr("missing ranks [0, 2]"));

  Group group;
  group.group_id = "nope#1";
  group.world_size = 2;
  Proposal p;
  p.template_spec = AllGather();
  p.template_spec->dtype = "complex128";
  EXPECT_THAT(client_->Agree(group, p).status().message(),
              HasSubstr("template_spec.dtype: unknown dtype 'complex128'"));
  p.template_spec = AllGather();
  auto missing = client_->Agree(group, p);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(EmbeddedOptionsTest, LogLevelIsCheckedAndApplied) {
  EmbeddedOptions bad;
  bad.log_level = "chatty";
  auto refused = Client::Embedded(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("log_level: 'chatty'"));
  EmbeddedOptions quiet;
  quiet.log_level = "error";
  ASSERT_TRUE(Client::Embedded(quiet).ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::err);
}

TEST(ClientConnectTest, MissingSocketIsUnavailable) {
  auto client = Client::Connect("/nonexistent/syncopated.sock");
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(client.status().message(), HasSubstr("/nonexistent/syncopated.sock"));
}

}  // namespace
}  // namespace syncopate
