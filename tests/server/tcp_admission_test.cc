// Integration: what a TCP caller must show before a real daemon spends memory on it. The token is
// checked before the message is read (an unauthenticated max-size request costs no parse), TCP
// has its own message limit, memory goes back after large rejected requests (RSS from
// /proc/<pid>/status: a bound on behaviour, not a timing), and reflection needs the token on TCP
// while health stays open for probes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "syncopate/client.h"
#include "syncopate/v1/service.grpc.pb.h"
#include "tests/server/raw_calls.h"
#include "tests/testing/subprocess.h"

namespace syncopate::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kAgree[] = "/syncopate.v1.Rendezvous/Agree";

// A serialized AgreeRequest whose plan has about `bytes` of transfers: far over the plan limits
// (the daemon rejects it after parsing), and tens of millions of allocations to parse.
std::string BigAgree(size_t bytes) {
  v1::AgreeRequest request;
  request.set_group_id("big#0-1");
  request.mutable_proposal()->set_kernel_hash("k");
  v1::Plan* plan = request.mutable_proposal()->mutable_plan();
  plan->set_world_size(1);
  v1::Channel* channel = plan->add_ranks()->add_channels();
  v1::Transfer prototype;
  prototype.set_kind(v1::TRANSFER_KIND_LOCAL_COPY);
  prototype.set_src_buffer("a");
  prototype.set_dst_buffer("b");
  prototype.set_step(1);
  prototype.set_id(1 << 20);
  const size_t each = prototype.ByteSizeLong() + 3;
  for (size_t i = 0; i < bytes / each; ++i) {
    v1::Transfer* t = channel->add_transfers();
    *t = prototype;
    t->set_id(static_cast<int32_t>(i));
  }
  return request.SerializeAsString();
}

class TcpAdmission : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<DaemonProcess>(SYNCOPATED_PATH, dir_, "admission",
                                              std::vector<std::string>{"--log_level=info"});
    ASSERT_TRUE(daemon_->ok()) << daemon_->Log();
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(-1);
    args.SetMaxReceiveMessageSize(-1);
    unix_ = grpc::CreateCustomChannel("unix:" + daemon_->socket(),
                                      grpc::InsecureChannelCredentials(), args);
    tcp_ = grpc::CreateCustomChannel(daemon_->address(), grpc::InsecureChannelCredentials(), args);
  }

  // RSS once the daemon has served a little (threads and arenas exist) and settled.
  int64_t IdleRss() {
    auto client = Client::Connect(daemon_->socket());
    EXPECT_TRUE(client.ok());
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(client->CheckHealth().ok());
    std::this_thread::sleep_for(std::chrono::seconds(1));
    return RssBytes(daemon_->process().pid());
  }

  // Waits (bounded) for RSS to come back under `limit`; the last value seen. The bound is for a
  // daemon that never gives memory back, not a speed goal: the test that sends three rejected
  // 60 MB plans took 6-16 s in all, run alone on the 2-core CI machine, but the daemon was still
  // at 394 MB after 20 s of this wait among the CI's other tests (2026-12-07); a leak stays up
  // however long we wait.
  int64_t SettledRss(int64_t limit) {
    int64_t rss = 0;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    do {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      rss = RssBytes(daemon_->process().pid());
    } while (rss > limit && std::chrono::steady_clock::now() < give_up);
    return rss;
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::shared_ptr<grpc::Channel> unix_;
  std::shared_ptr<grpc::Channel> tcp_;
};

// What the daemon's RSS must settle to after the rejected requests, as a multiple of idle. 3, not
// 2: with the 2-core build machine loaded by a parallel ctest, gRPC's transport buffers stayed at
// 99-104 MB (idle 47) for the whole settling time (2026-12-05, the first test below; the second
// failed under the same load on 2026-12-04), where an idle machine settles at 56-79 MB. The
// defects these guard kept 0.9-1 GB.
constexpr int64_t kSettledOverIdle = 3;

TEST_F(TcpAdmission, UnauthenticatedMaxSizeRequestsCostNoMemory) {
  const int64_t idle = IdleRss();
  const std::string request = BigAgree((15 << 20) + (512 << 10));  // just under the TCP limit
  std::atomic<int> next{0};
  std::atomic<int> unauthenticated{0};
  std::atomic<int64_t> peak{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      while (next.fetch_add(1) < 100) {
        auto [status, reply] = RawUnary(tcp_, kAgree, request);
        if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED &&
            status.error_message().find("x-syncopate-token: missing") != std::string::npos) {
          ++unauthenticated;
        }
        peak = std::max<int64_t>(peak, RssBytes(daemon_->process().pid()));
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(unauthenticated.load(), 100);
  const int64_t after = SettledRss(kSettledOverIdle * idle);
  std::printf("rss idle=%lld MB, peak during 100 rejected TCP requests=%lld MB, after=%lld MB\n",
              static_cast<long long>(idle >> 20), static_cast<long long>(peak.load() >> 20),
              static_cast<long long>(after >> 20));
  EXPECT_LE(after, kSettledOverIdle * idle);
  // Parsing them (the defect) took RSS past 1 GB: a parsed Transfer costs several times its ~20
  // wire bytes. Unparsed, only transport buffers remain, which grow with the bytes in flight (4
  // callers' requests), not with idle RSS: the CI machine saw 144 MB over idle (2.3x the bytes
  // in flight) on 2026-12-06, past the old bound of 4x idle. 4x the bytes in flight (250 MB)
  // still sits far below the defect.
  const int64_t in_flight = 4 * static_cast<int64_t>(request.size());
  EXPECT_LE(peak.load() - idle, 4 * in_flight)
      << "unauthenticated requests' messages were read and parsed";
}

TEST_F(TcpAdmission, RejectedLargePlansOnTheUnixSocketGiveMemoryBack) {
  const int64_t idle = IdleRss();
  const std::string request = BigAgree(60 << 20);  // under max_message_bytes (64 MiB)
  int64_t peak = 0;
  for (int i = 0; i < 3; ++i) {
    auto [status, reply] = RawUnary(unix_, kAgree, request);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("proposal.plan"));
    peak = std::max(peak, RssBytes(daemon_->process().pid()));
  }
  const int64_t after = SettledRss(kSettledOverIdle * idle);
  std::printf("rss idle=%lld MB, after 3 rejected 60 MB plans=%lld MB (peak seen %lld MB)\n",
              static_cast<long long>(idle >> 20), static_cast<long long>(after >> 20),
              static_cast<long long>(peak >> 20));
  EXPECT_LE(after, kSettledOverIdle * idle);
}

TEST_F(TcpAdmission, TcpHasItsOwnMessageLimit) {
  v1::JoinRequest join;
  join.set_job_id("big");
  join.set_world_size(1);
  join.set_node_name(std::string(20 << 20, 'n'));  // over tcp_max_message_bytes, under the local
  const std::string bytes = join.SerializeAsString();
  auto [tcp_status, tcp_reply] = RawUnary(tcp_, "/syncopate.v1.Rendezvous/Join", bytes, kTestToken);
  EXPECT_EQ(tcp_status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << tcp_status.error_message();
  auto [unix_status, unix_reply] = RawUnary(unix_, "/syncopate.v1.Rendezvous/Join", bytes);
  EXPECT_EQ(unix_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << unix_status.error_message();
  EXPECT_THAT(unix_status.error_message(), HasSubstr("node_name"));
}

TEST_F(TcpAdmission, ReflectionNeedsTheTokenOnTcpHealthDoesNot) {
  const grpc::Status anonymous = ReflectionListServices(tcp_);
  EXPECT_EQ(anonymous.error_code(), grpc::StatusCode::UNAUTHENTICATED) << anonymous.error_message();
  EXPECT_THAT(anonymous.error_message(), HasSubstr("x-syncopate-token: missing"));
  const grpc::Status with_token = ReflectionListServices(tcp_, kTestToken);
  EXPECT_TRUE(with_token.ok()) << with_token.error_message();
  const grpc::Status local = ReflectionListServices(unix_);
  EXPECT_TRUE(local.ok()) << local.error_message();
  // Health: open on TCP for probes. HealthCheckResponse{status: SERVING} is 08 01.
  auto [health, reply] = RawUnary(tcp_, "/grpc.health.v1.Health/Check", "");
  EXPECT_TRUE(health.ok()) << health.error_message();
  EXPECT_EQ(reply, std::string("\x08\x01", 2));
}

}  // namespace
}  // namespace syncopate::testing
