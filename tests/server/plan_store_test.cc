// PlanStore: plans by hash for Compile requests that name their plan by hash.
#include "server/plan_store.h"

#include <gtest/gtest.h>

#include <string>

namespace syncopate::server {
namespace {

v1::Plan PlanOfWorld(int world) {
  v1::Plan plan;
  plan.set_world_size(world);
  plan.set_plan_hash("h" + std::to_string(world));
  return plan;
}

TEST(PlanStoreTest, FindsWhatWasRememberedAndNothingElse) {
  PlanStore store;
  EXPECT_EQ(store.Find("h2"), nullptr);
  store.Remember("h2", PlanOfWorld(2));
  std::shared_ptr<const v1::Plan> found = store.Find("h2");
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->world_size(), 2);
  EXPECT_EQ(store.Find("h3"), nullptr);
  store.Remember("", PlanOfWorld(3));  // no hash: nothing to find it by
  EXPECT_EQ(store.size(), 1u);
}

TEST(PlanStoreTest, FirstRememberWins) {
  PlanStore store;
  store.Remember("h", PlanOfWorld(2));
  store.Remember("h", PlanOfWorld(4));
  EXPECT_EQ(store.Find("h")->world_size(), 2);
  EXPECT_EQ(store.size(), 1u);
}

TEST(PlanStoreTest, EvictsOldestPastEntryAndByteBounds) {
  PlanStore::Options options;
  options.max_entries = 2;
  PlanStore by_count(options);
  by_count.Remember("a", PlanOfWorld(2));
  by_count.Remember("b", PlanOfWorld(3));
  by_count.Remember("c", PlanOfWorld(4));
  EXPECT_EQ(by_count.Find("a"), nullptr);
  EXPECT_NE(by_count.Find("b"), nullptr);
  EXPECT_NE(by_count.Find("c"), nullptr);

  const size_t one = PlanOfWorld(2).ByteSizeLong();
  options.max_entries = 100;
  options.max_bytes = 2 * one;
  PlanStore by_bytes(options);
  by_bytes.Remember("a", PlanOfWorld(2));
  by_bytes.Remember("b", PlanOfWorld(3));
  EXPECT_EQ(by_bytes.size(), 2u);
  by_bytes.Remember("c", PlanOfWorld(4));
  EXPECT_EQ(by_bytes.Find("a"), nullptr);
  EXPECT_LE(by_bytes.bytes(), 2 * one);

  options.max_bytes = one - 1;  // a plan larger than the whole budget is not kept
  PlanStore tiny(options);
  tiny.Remember("a", PlanOfWorld(2));
  EXPECT_EQ(tiny.size(), 0u);
}

TEST(PlanStoreTest, HandsOutPlansThatSurviveEviction) {
  PlanStore::Options options;
  options.max_entries = 1;
  PlanStore store(options);
  store.Remember("a", PlanOfWorld(2));
  std::shared_ptr<const v1::Plan> held = store.Find("a");
  store.Remember("b", PlanOfWorld(3));
  EXPECT_EQ(store.Find("a"), nullptr);
  EXPECT_EQ(held->world_size(), 2);  // a compile in flight keeps using it
}

}  // namespace
}  // namespace syncopate::server
