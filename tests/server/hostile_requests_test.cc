// Integration: malformed and hostile requests against a real syncopated. Each gets a precise
// status and a message naming the field, and the daemon keeps serving (checked after each).
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "core/plan_io/plan_proto.h"
#include "syncopate/client.h"
#include "syncopate/v1/service.grpc.pb.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/template_plan.h"
#include "tests/testing/test_kernels.h"

namespace syncopate::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class HostileRequests : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<DaemonProcess>(SYNCOPATED_PATH, dir_, "hostile",
                                              std::vector<std::string>{"--cache_dir=" + dir_.Path("cache")});
    ASSERT_TRUE(daemon_->ok()) << daemon_->Log();
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(-1);
    args.SetMaxReceiveMessageSize(-1);
    auto channel = grpc::CreateCustomChannel("unix:" + daemon_->socket(),
                                             grpc::InsecureChannelCredentials(), args);
    rendezvous_ = v1::Rendezvous::NewStub(channel);
    compiler_ = v1::Compiler::NewStub(channel);
    tcp_rendezvous_ = v1::Rendezvous::NewStub(grpc::CreateCustomChannel(
        daemon_->address(), grpc::InsecureChannelCredentials(), args));
  }

  void TearDown() override {
    // The daemon still serves: health and a full one-rank group.
    auto client = Client::Connect(daemon_->socket());
    ASSERT_TRUE(client.ok());
    EXPECT_TRUE(client->CheckHealth().ok());
    JoinOptions join;
    join.job_id = "after-" + std::to_string(counter_++);
    join.world_size = 1;
    join.rank = 0;
    auto group = client->Join(join);
    ASSERT_TRUE(group.ok()) << group.status().ToString();
    ASSERT_EQ(daemon_->process().Wait(std::chrono::milliseconds(0)), std::nullopt);
  }

  static void Deadline(grpc::ClientContext& ctx, int seconds = 30) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  }

  grpc::Status Join(const v1::JoinRequest& request, v1::JoinResponse* response = nullptr) {
    v1::JoinResponse ignored;
    grpc::ClientContext ctx;
    Deadline(ctx);
    return rendezvous_->Join(&ctx, request, response ? response : &ignored);
  }

  // Like Join: one Agree call under the usual deadline, for tests that look at its status only.
  grpc::Status Agree(const v1::AgreeRequest& request) {
    v1::AgreeResponse ignored;
    grpc::ClientContext ctx;
    Deadline(ctx);
    return rendezvous_->Agree(&ctx, request, &ignored);
  }

  static v1::JoinRequest ValidJoin(const std::string& job, int world, int rank) {
    v1::JoinRequest r;
    r.set_job_id(job);
    r.set_world_size(world);
    r.set_rank(rank);
    r.set_timeout_ms(20000);
    return r;
  }

  static v1::TemplateRequest AllGather(int world, std::vector<int64_t> shape) {
    v1::TemplateRequest t;
    t.set_template_name("allgather.ring");
    t.set_world_size(world);
    for (int64_t d : shape) t.add_shape(d);
    t.set_dtype(v1::DTYPE_BF16);
    return t;
  }

  // Forms a 2-rank group and has both ranks propose; returns both statuses.
  std::pair<grpc::Status, grpc::Status> AgreeTwo(const v1::Proposal& p0, const v1::Proposal& p1) {
    const std::string job = "agree-" + std::to_string(counter_++);
    v1::JoinResponse joined;
    std::thread other([&] { EXPECT_TRUE(Join(ValidJoin(job, 2, 1)).ok()); });
    EXPECT_TRUE(Join(ValidJoin(job, 2, 0), &joined).ok());
    other.join();
    auto agree = [&](int rank, const v1::Proposal& p) {
      v1::AgreeRequest request;
      request.set_group_id(joined.group_id());
      request.set_rank(rank);
      *request.mutable_proposal() = p;
      request.set_timeout_ms(20000);
      return Agree(request);
    };
    auto second = std::async(std::launch::async, [&] { return agree(1, p1); });
    grpc::Status first = agree(0, p0);
    return {first, second.get()};
  }

  grpc::Status Compile(const v1::CompileRequest& request) {
    v1::CompileResponse response;
    grpc::ClientContext ctx;
    Deadline(ctx, 120);
    return compiler_->Compile(&ctx, request, &response);
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::Rendezvous::Stub> rendezvous_;
  std::unique_ptr<v1::Rendezvous::Stub> tcp_rendezvous_;
  std::unique_ptr<v1::Compiler::Stub> compiler_;
  int counter_ = 0;
};

#define EXPECT_STATUS(status, code, text)                          \
  do {                                                             \
    grpc::Status s_ = (status);                                    \
    EXPECT_EQ(s_.error_code(), grpc::StatusCode::code) << s_.error_message(); \
    EXPECT_THAT(s_.error_message(), HasSubstr(text));              \
  } while (0)

TEST_F(HostileRequests, JoinFieldsAreChecked) {
  EXPECT_STATUS(Join(v1::JoinRequest()), INVALID_ARGUMENT, "job_id: is required");
  EXPECT_STATUS(Join(ValidJoin("bad job!", 2, 0)), INVALID_ARGUMENT, "job_id: may contain only");
  // '#' is not in service.proto's alphabet: the daemon uses it inside group ids.
  EXPECT_STATUS(Join(ValidJoin("job#1", 1, 0)), INVALID_ARGUMENT, "job_id: may contain only");
  EXPECT_STATUS(Join(ValidJoin("j", 0, 0)), INVALID_ARGUMENT, "world_size: 0 is out of range");
  EXPECT_STATUS(Join(ValidJoin("j", -5, 0)), INVALID_ARGUMENT, "world_size: -5");
  EXPECT_STATUS(Join(ValidJoin("j", 1 << 30, 0)), INVALID_ARGUMENT, "world_size: 1073741824");
  EXPECT_STATUS(Join(ValidJoin("j", 4, 4)), INVALID_ARGUMENT, "rank: 4 is out of range [0, 3]");
  EXPECT_STATUS(Join(ValidJoin("j", 4, -1)), INVALID_ARGUMENT, "rank: -1");
}

TEST_F(HostileRequests, DuplicateRankAndWorldSizeMismatchFailOnlyTheCaller) {
  v1::JoinResponse formed;
  auto first = std::async(std::launch::async,
                          [&] { return Join(ValidJoin("dup", 2, 0), &formed); });
  // Wait until rank 0 is waiting, then send a duplicate and a mismatch.
  auto client = Client::Connect(daemon_->socket());
  ASSERT_TRUE(client.ok());
  while (client->Stats()->pending_joins != 1) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_STATUS(Join(ValidJoin("dup", 2, 0)), INVALID_ARGUMENT, "rank: 0 already joined job 'dup'");
  EXPECT_STATUS(Join(ValidJoin("dup", 3, 1)), INVALID_ARGUMENT,
                "world_size: 3 from rank 1 (via daemon hostile");
  // The group still forms with the right rank 1.
  EXPECT_TRUE(Join(ValidJoin("dup", 2, 1)).ok());
  EXPECT_TRUE(first.get().ok());
  EXPECT_EQ(formed.members_size(), 2);
}

TEST_F(HostileRequests, JoinTimesOutNamingMissingRanks) {
  v1::JoinRequest r = ValidJoin("lonely", 4, 1);
  r.set_timeout_ms(300);
  EXPECT_STATUS(Join(r), DEADLINE_EXCEEDED, "missing ranks [0, 2, 3] of world size 4");
}

TEST_F(HostileRequests, BadShapesAreNamed) {
  v1::Proposal p;
  *p.mutable_template_request() = AllGather(2, {64, -4});
  v1::AgreeRequest request;
  request.set_group_id("g");
  request.set_rank(0);
  *request.mutable_proposal() = p;
  EXPECT_STATUS(Agree(request), INVALID_ARGUMENT,
                "proposal.template_request.shape[1]: -4 is negative");
  *request.mutable_proposal()->mutable_template_request() = AllGather(2, {int64_t{1} << 50, 2});
  EXPECT_STATUS(Agree(request), INVALID_ARGUMENT,
                "proposal.template_request.shape[0]: 1125899906842624 exceeds the limit");
  *request.mutable_proposal()->mutable_template_request() =
      AllGather(2, {int64_t{1} << 30, int64_t{1} << 30});
  EXPECT_STATUS(Agree(request), INVALID_ARGUMENT,
                "proposal.template_request.shape: [1073741824,1073741824] has more than");
  request.clear_proposal();
  EXPECT_STATUS(Agree(request), INVALID_ARGUMENT, "proposal: is required");
  *request.mutable_proposal()->mutable_template_request() = AllGather(2, {64, 32});
  EXPECT_STATUS(Agree(request), NOT_FOUND, "group_id: group g is not known");
}

TEST_F(HostileRequests, DivergingProposalsNameTheRanksAndField) {
  v1::Proposal p0, p1;
  p0.set_kernel_hash("k");
  p1.set_kernel_hash("k");
  *p0.mutable_template_request() = AllGather(2, {64, 32});
  *p1.mutable_template_request() = AllGather(2, {64, 48});
  auto [s0, s1] = AgreeTwo(p0, p1);
  for (const grpc::Status& s : {s0, s1}) {
    EXPECT_STATUS(s, FAILED_PRECONDITION, "ranks [1] diverge from rank 0 in their plan");
    EXPECT_THAT(s.error_message(), HasSubstr("template_request.shape[1]: 32 -> 48"));
  }
  p1 = p0;
  p1.set_kernel_hash("other");
  auto [t0, t1] = AgreeTwo(p0, p1);
  EXPECT_STATUS(t0, FAILED_PRECONDITION, "in their kernel_hash");
}

TEST_F(HostileRequests, PlanFailingValidationIsNamed) {
  auto built = TemplatePlan("allgather.ring", 2, {64, 32});
  ASSERT_TRUE(built.ok()) << built.status();
  v1::Proposal p;
  p.set_kernel_hash("k");
  *p.mutable_plan() = plan_io::ToProto(*built);
  p.mutable_plan()->clear_plan_hash();
  // Drop rank 1's transfers: rank 0 never receives shard 1.
  p.mutable_plan()->mutable_ranks(1)->clear_channels();
  p.mutable_plan()->mutable_ranks(1)->add_channels();
  auto [s0, s1] = AgreeTwo(p, p);
  EXPECT_STATUS(s0, INVALID_ARGUMENT, "fails validation");
  EXPECT_EQ(s0.error_message(), s1.error_message());
}

TEST_F(HostileRequests, KernelThatDoesNotCompileIsReported) {
  v1::CompileRequest request;
  request.mutable_kernel()->set_source(kBrokenKernelSource);
  request.mutable_kernel()->set_spec(kTestKernelSpec);
  request.set_arch("sm_90");
  EXPECT_STATUS(Compile(request), INVALID_ARGUMENT, "kernel.source: does not compile");
  EXPECT_THAT(Compile(request).error_message(), HasSubstr("undefined_name"));

  request.mutable_kernel()->set_source(kTestKernelSource);
  request.mutable_kernel()->set_spec("entry = \n");
  EXPECT_STATUS(Compile(request), INVALID_ARGUMENT, "kernel.spec: ");
  request.mutable_kernel()->set_spec(kTestKernelSpec);
  request.set_arch("sm_banana");
  EXPECT_STATUS(Compile(request), INVALID_ARGUMENT, "arch: ");
  request.clear_arch();
  EXPECT_STATUS(Compile(request), INVALID_ARGUMENT, "arch: is required");
  request.clear_kernel();
  EXPECT_STATUS(Compile(request), INVALID_ARGUMENT, "kernel: is required");
}

TEST_F(HostileRequests, HundredMegabytePayloadIsRejected) {
  v1::CompileRequest request;
  request.mutable_kernel()->set_source(std::string(100 << 20, 'x'));
  request.mutable_kernel()->set_spec(kTestKernelSpec);
  request.set_arch("sm_90");
  const grpc::Status status = Compile(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
}

TEST_F(HostileRequests, TcpCallsNeedTheToken) {
  v1::JoinResponse response;
  {
    grpc::ClientContext ctx;
    Deadline(ctx);
    EXPECT_STATUS(tcp_rendezvous_->Join(&ctx, ValidJoin("tcp", 1, 0), &response), UNAUTHENTICATED,
                  "x-syncopate-token: missing");
  }
  {
    grpc::ClientContext ctx;
    Deadline(ctx);
    ctx.AddMetadata("x-syncopate-token", "wrong");
    EXPECT_STATUS(tcp_rendezvous_->Join(&ctx, ValidJoin("tcp", 1, 0), &response), UNAUTHENTICATED,
                  "x-syncopate-token: wrong token");
  }
  {
    grpc::ClientContext ctx;
    Deadline(ctx);
    ctx.AddMetadata("x-syncopate-token", kTestToken);
    grpc::Status s = tcp_rendezvous_->Join(&ctx, ValidJoin("tcp", 1, 0), &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
}

}  // namespace
}  // namespace syncopate::testing
