// The C ABI's bootstrap callback as the C++ API's (ops/c_bootstrap.h): what a C allgather
// delivers arrives by rank and binary-safe; a failing callback, a rank out of range and a gap
// are errors naming them.
#include "ops/c_bootstrap.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::ops {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A C allgather of "world" ranks whose rank r's message is this rank's plus r; `skip` is never
// delivered, `code` is returned.
struct FakeWorld {
  int world = 3;
  int skip = -1;
  int32_t code = SYNCOPATE_OK;
  std::string seen;
};

int32_t FakeAllgather(void* user, const char* mine, uint64_t length, syncopate_deliver_fn deliver,
                      void* ctx) {
  auto* w = static_cast<FakeWorld*>(user);
  w->seen.assign(mine, length);
  for (int r = w->world - 1; r >= 0; --r) {  // any order
    if (r == w->skip) continue;
    const std::string m = w->seen + static_cast<char>('0' + r);
    deliver(ctx, r, m.data(), m.size());
  }
  return w->code;
}

TEST(CBootstrapTest, EveryRankArrivesByRankBinarySafe) {
  FakeWorld world;
  std::vector<std::string> all;
  const Status s = BootstrapOf(&FakeAllgather, &world)(std::string("a\0b", 3), &all);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(world.seen, std::string("a\0b", 3));
  EXPECT_THAT(
      all, ElementsAre(std::string("a\0b0", 4), std::string("a\0b1", 4), std::string("a\0b2", 4)));
}

TEST(CBootstrapTest, FailuresAreNamed) {
  std::vector<std::string> all;
  FakeWorld failing{.code = SYNCOPATE_UNAVAILABLE};
  Status s = BootstrapOf(&FakeAllgather, &failing)("x", &all);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("returned UNAVAILABLE"));
  FakeWorld gap{.skip = 1};
  s = BootstrapOf(&FakeAllgather, &gap)("x", &all);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("delivered rank 2 but not rank 1"));
  FakeWorld huge{.world = 5000};
  s = BootstrapOf(&FakeAllgather, &huge)("x", &all);
  EXPECT_THAT(s.message(), HasSubstr("delivered rank 4999, outside 0..4095"));
}

// A C allgather that delivers one broken message: NULL data with a length, or a length far
// beyond any rendezvous record (the deliver function must neither read NULL nor try to copy it).
struct BrokenDelivery {
  const char* data = nullptr;
  uint64_t length = 5;
};

int32_t BrokenAllgather(void* user, const char*, uint64_t, syncopate_deliver_fn deliver,
                        void* ctx) {
  const auto* b = static_cast<BrokenDelivery*>(user);
  deliver(ctx, 0, b->data, b->length);
  return SYNCOPATE_OK;
}

TEST(CBootstrapTest, BrokenDeliveriesAreNamedNotDereferenced) {
  std::vector<std::string> all;
  BrokenDelivery null_data;
  Status s = BootstrapOf(&BrokenAllgather, &null_data)("x", &all);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("rank 0 with NULL data of length 5"));
  const char byte = 'z';
  BrokenDelivery huge{.data = &byte, .length = uint64_t{1} << 62};
  s = BootstrapOf(&BrokenAllgather, &huge)("x", &all);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("rank 0 with length 4611686018427387904"));
  BrokenDelivery empty{.data = nullptr, .length = 0};  // an empty message may come as NULL
  s = BootstrapOf(&BrokenAllgather, &empty)("x", &all);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_THAT(all, ElementsAre(""));
}

}  // namespace
}  // namespace syncopate::ops
