// Client::Exchange against the embedded daemon: an all-gather of blobs within a formed group,
// rounds in call order, and its errors (blob too big, a rank missing at the deadline, ranks out
// of step, a broken group afterwards).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "syncopate/client.h"

namespace syncopate {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ExchangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto client = Client::Embedded();
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_.emplace(*client);
    std::vector<std::future<Result<Group>>> joins;
    for (int r = 0; r < kWorld; ++r) {
      joins.push_back(std::async(std::launch::async, [this, r] {
        JoinOptions options;
        options.job_id = "exchange-job";
        options.world_size = kWorld;
        options.rank = r;
        options.timeout = std::chrono::seconds(30);
        return client_->Join(options);
      }));
    }
    for (auto& join : joins) {
      Result<Group> group = join.get();
      ASSERT_TRUE(group.ok()) << group.status().ToString();
      groups_.push_back(*group);
    }
  }

  // Every rank exchanges "<prefix><rank>" under `key`, concurrently.
  std::vector<Result<std::vector<std::string>>> ExchangeAll(const std::string& key,
                                                            const std::string& prefix) {
    std::vector<std::future<Result<std::vector<std::string>>>> calls;
    for (int r = 0; r < kWorld; ++r) {
      calls.push_back(std::async(std::launch::async, [&, r] {
        return client_->Exchange(groups_[r], key, prefix + std::to_string(r),
                                 std::chrono::seconds(30));
      }));
    }
    std::vector<Result<std::vector<std::string>>> results;
    for (auto& call : calls) results.push_back(call.get());
    return results;
  }

  static constexpr int kWorld = 3;
  std::optional<Client> client_;
  std::vector<Group> groups_;
};

TEST_F(ExchangeTest, EveryRankGetsEveryBlobInRankOrder) {
  for (const std::string prefix : {"addr", "rkey"}) {
    for (auto& result : ExchangeAll("ucx." + prefix, prefix)) {
      ASSERT_TRUE(result.ok()) << result.status().ToString();
      EXPECT_THAT(*result, ElementsAre(prefix + "0", prefix + "1", prefix + "2"));
    }
  }
}

TEST_F(ExchangeTest, BlobOverOneMebibyteIsResourceExhausted) {
  auto result = client_->Exchange(groups_[1], "ucx.addresses", std::string((1 << 20) + 1, 'x'),
                                  std::chrono::seconds(5));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(result.status().message(), HasSubstr("blob"));
  EXPECT_THAT(result.status().message(), HasSubstr("rank 1"));
  // A rejected call takes no part in any round: the group still works.
  for (auto& r : ExchangeAll("after", "b")) EXPECT_TRUE(r.ok()) << r.status().ToString();
}

TEST_F(ExchangeTest, MissingRankAtDeadlineIsNamedAndBreaksTheGroup) {
  // Ranks 0 and 2 contribute; rank 1 never does.
  auto r0 = std::async(std::launch::async, [&] {
    return client_->Exchange(groups_[0], "ucx.addresses", "a", std::chrono::milliseconds(300));
  });
  auto r2 = client_->Exchange(groups_[2], "ucx.addresses", "c", std::chrono::seconds(30));
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.status().code(), StatusCode::kDeadlineExceeded) << r2.status().ToString();
  EXPECT_THAT(r2.status().message(), HasSubstr("ranks [1] did not contribute"));
  EXPECT_THAT(r2.status().message(), HasSubstr("exchange 'ucx.addresses'"));
  EXPECT_EQ(r0.get().status().code(), StatusCode::kDeadlineExceeded);
  // The late rank learns why (the group's tombstone).
  auto late = client_->Exchange(groups_[1], "ucx.addresses", "b", std::chrono::seconds(5));
  EXPECT_EQ(late.status().code(), StatusCode::kAborted);
  EXPECT_THAT(late.status().message(), HasSubstr("did not contribute"));
}

TEST_F(ExchangeTest, DifferentKeysFailTheRoundNamingEachRank) {
  std::vector<std::future<Result<std::vector<std::string>>>> calls;
  for (int r = 0; r < kWorld; ++r) {
    calls.push_back(std::async(std::launch::async, [&, r] {
      return client_->Exchange(groups_[r], r == 2 ? "barrier" : "addresses", "x",
                               std::chrono::seconds(30));
    }));
  }
  for (auto& call : calls) {
    auto result = call.get();
    EXPECT_EQ(result.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_THAT(result.status().message(), HasSubstr("rank 2: 'barrier'"));
  }
  // Only that round failed.
  for (auto& r : ExchangeAll("next", "n")) EXPECT_TRUE(r.ok()) << r.status().ToString();
}

TEST_F(ExchangeTest, EmptyKeyIsInvalid) {
  auto result = client_->Exchange(groups_[0], "", "x", std::chrono::seconds(5));
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("key"));
}

}  // namespace
}  // namespace syncopate
