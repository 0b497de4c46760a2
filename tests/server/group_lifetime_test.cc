// Integration: finished jobs do not fill a real daemon's registry. There is no "leave" call, so a
// job that completed leaves an idle group; at max_groups the idlest makes room, and idle groups
// expire on the daemon's own timer (group_idle_ttl_ms) without new traffic.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "syncopate/client.h"
#include "syncopate/v1/service.grpc.pb.h"
#include "tests/testing/subprocess.h"

namespace syncopate::testing {
namespace {

using ::testing::HasSubstr;

v1::JoinRequest SoloJoin(const std::string& job) {
  v1::JoinRequest r;
  r.set_job_id(job);
  r.set_world_size(1);
  r.set_rank(0);
  r.set_timeout_ms(20000);
  return r;
}

grpc::Status Join(v1::Rendezvous::Stub& stub, const v1::JoinRequest& request,
                  v1::JoinResponse* response) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return stub.Join(&ctx, request, response);
}

// 10,000 short jobs, one after another, each with a fresh id (max_groups stays at its default of
// 1024): every one forms its group.
TEST(GroupLifetime, TenThousandSequentialJobsWithFreshIdsSucceed) {
  TempDir dir;
  DaemonProcess daemon(SYNCOPATED_PATH, dir, "solo", {"--log_level=warn"});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  auto stub = v1::Rendezvous::NewStub(
      grpc::CreateChannel("unix:" + daemon.socket(), grpc::InsecureChannelCredentials()));
  int failures = 0;
  std::string evicted;  // a group that made room recently enough to have its tombstone
  for (int i = 0; i < 10000; ++i) {
    v1::JoinResponse response;
    grpc::Status s = Join(*stub, SoloJoin("solo-" + std::to_string(i)), &response);
    if (!s.ok() && failures++ < 3) ADD_FAILURE() << "job " << i << ": " << s.error_message();
    if (i == 10000 - 1024 - 100) evicted = response.group_id();
  }
  EXPECT_EQ(failures, 0);
  // A late call on a group that made room says why.
  v1::AgreeRequest agree;
  agree.set_group_id(evicted);
  agree.mutable_proposal()->set_kernel_hash("k");
  auto* t = agree.mutable_proposal()->mutable_template_request();
  t->set_template_name("allgather.ring");
  t->set_world_size(1);
  t->add_shape(8);
  t->set_dtype(v1::DTYPE_BF16);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::AgreeResponse agreed;
  grpc::Status late = stub->Agree(&ctx, agree, &agreed);
  EXPECT_EQ(late.error_code(), grpc::StatusCode::ABORTED) << late.error_message();
  EXPECT_THAT(late.error_message(), HasSubstr("evicted"));
}

// With no calls at all after the jobs, their groups still go once group_idle_ttl_ms passes.
TEST(GroupLifetime, IdleGroupsExpireWithoutNewJoins) {
  TempDir dir;
  DaemonProcess daemon(SYNCOPATED_PATH, dir, "ttl", {"--group_idle_ttl_ms=200"});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  auto stub = v1::Rendezvous::NewStub(
      grpc::CreateChannel("unix:" + daemon.socket(), grpc::InsecureChannelCredentials()));
  for (int i = 0; i < 5; ++i) {
    v1::JoinResponse response;
    ASSERT_TRUE(Join(*stub, SoloJoin("ttl-" + std::to_string(i)), &response).ok());
  }
  auto client = Client::Connect(daemon.socket());
  ASSERT_TRUE(client.ok());
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->groups_live, 5u);
  // Stats is not a Join: only the daemon's timer can sweep here. A generous bound, not a timing.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < give_up) {
    stats = client->Stats();
    ASSERT_TRUE(stats.ok());
    if (stats->groups_live == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(stats->groups_live, 0u);
  EXPECT_THAT(daemon.Log(), HasSubstr("idle longer than group_idle_ttl"));
}

}  // namespace
}  // namespace syncopate::testing
