// Unit tests: the TCP bootstrap hub and clients (threads in one process).
#include "runtime/ucx/tcp_bootstrap.h"

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::ucx {
namespace {

using ::testing::HasSubstr;

TEST(TcpBootstrapTest, AllGatherRoundsReturnEveryRanksBlob) {
  auto hub = TcpBootstrapHub::Start(3);
  ASSERT_TRUE(hub.ok()) << hub.status();
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(3);
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      results[r] = [&]() -> absl::Status {
        auto b = TcpBootstrap::Connect((*hub)->address(), r, 3, absl::Now() + absl::Seconds(10));
        if (!b.ok()) return b.status();
        for (int round = 0; round < 4; ++round) {
          auto all = (*b)->AllGather(std::string(r * 1000 + round, 'a' + r),
                                     absl::Now() + absl::Seconds(10));
          if (!all.ok()) return all.status();
          for (int p = 0; p < 3; ++p) {
            if ((*all)[p] != std::string(p * 1000 + round, 'a' + p)) {
              return absl::InternalError("wrong blob");
            }
          }
        }
        return (*b)->Barrier(absl::Now() + absl::Seconds(10));
      }();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& s : results) EXPECT_TRUE(s.ok()) << s;
}

TEST(TcpBootstrapTest, RankLeavingFailsTheOthersNamingIt) {
  auto hub = TcpBootstrapHub::Start(3);
  ASSERT_TRUE(hub.ok());
  auto b0 = TcpBootstrap::Connect((*hub)->address(), 0, 3, absl::Now() + absl::Seconds(10));
  auto b1 = TcpBootstrap::Connect((*hub)->address(), 1, 3, absl::Now() + absl::Seconds(10));
  {
    auto b2 = TcpBootstrap::Connect((*hub)->address(), 2, 3, absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(b2.ok());
  }  // rank 2 leaves before the round
  ASSERT_TRUE(b0.ok() && b1.ok());
  auto r0 = (*b0)->AllGather("x", absl::Now() + absl::Seconds(10));
  EXPECT_EQ(r0.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r0.status().message(), HasSubstr("rank 2 left the bootstrap group"));
}

TEST(TcpBootstrapTest, MissingRankRunsIntoTheDeadline) {
  auto hub = TcpBootstrapHub::Start(2);
  ASSERT_TRUE(hub.ok());
  auto b0 = TcpBootstrap::Connect((*hub)->address(), 0, 2, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(b0.ok());
  auto r = (*b0)->AllGather("x", absl::Now() + absl::Milliseconds(200));
  // The hub names the missing rank at the deadline.
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("rank(s) 1 did not arrive"));
}

TEST(TcpBootstrapTest, BadAddressIsInvalidArgument) {
  EXPECT_EQ(TcpBootstrap::Connect("nonsense", 0, 1, absl::Now()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace syncopate::ucx
