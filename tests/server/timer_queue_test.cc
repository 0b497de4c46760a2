// TimerQueue: due order, cancellation, callbacks that schedule, an earlier timer waking the
// queue that sleeps on a later one, far deadlines, and pending timers dropped at destruction.
// Waits are bounds (seconds), never speed checks.
#include "server/timer_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "absl/time/clock.h"

namespace syncopate::server {
namespace {

// Records which timers ran, in order, and lets the test wait for a count of them.
class Ran {
 public:
  void Add(int id) {
    std::lock_guard<std::mutex> lock(mu_);
    order_.push_back(id);
    cv_.notify_all();
  }
  // True once `n` have run (false after 10 s: the test then fails on what it expected).
  bool WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return order_.size() >= n; });
  }
  std::vector<int> order() {
    std::lock_guard<std::mutex> lock(mu_);
    return order_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> order_;
};

TEST(TimerQueueTest, RunsTimersInDueOrder) {
  TimerQueue timers;
  Ran ran;
  // Due times from one base: a slow scheduling thread cannot reorder them.
  const absl::Time base = absl::Now();
  timers.Schedule(base + absl::Milliseconds(60), [&] { ran.Add(3); });
  timers.Schedule(base + absl::Milliseconds(20), [&] { ran.Add(1); });
  timers.Schedule(base + absl::Milliseconds(40), [&] { ran.Add(2); });
  ASSERT_TRUE(ran.WaitFor(3));
  EXPECT_EQ(ran.order(), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(timers.pending(), 0u);
}

TEST(TimerQueueTest, ACancelledTimerNeverRuns) {
  TimerQueue timers;
  Ran ran;
  const TimerQueue::TimerId cancelled =
      timers.ScheduleAfter(absl::Hours(1), [&] { ran.Add(0); });  // cancelled long before
  const TimerQueue::TimerId kept =
      timers.ScheduleAfter(absl::Milliseconds(10), [&] { ran.Add(1); });
  EXPECT_NE(cancelled, 0u);
  EXPECT_TRUE(timers.Cancel(cancelled));
  EXPECT_FALSE(timers.Cancel(cancelled));  // already cancelled
  ASSERT_TRUE(ran.WaitFor(1));
  EXPECT_FALSE(timers.Cancel(kept));  // already ran
  EXPECT_EQ(ran.order(), (std::vector<int>{1}));
}

TEST(TimerQueueTest, AnEarlierTimerWakesTheQueueSleepingOnALaterOne) {
  TimerQueue timers;
  Ran ran;
  timers.ScheduleAfter(absl::Hours(1), [&] { ran.Add(2); });
  timers.ScheduleAfter(absl::ZeroDuration(), [&] { ran.Add(1); });
  ASSERT_TRUE(ran.WaitFor(1));
  EXPECT_EQ(ran.order(), (std::vector<int>{1}));
  EXPECT_EQ(timers.pending(), 1u);
}

TEST(TimerQueueTest, CallbacksMayScheduleAndCancel) {
  TimerQueue timers;
  Ran ran;
  const TimerQueue::TimerId later = timers.ScheduleAfter(absl::Hours(1), [&] { ran.Add(9); });
  timers.ScheduleAfter(absl::ZeroDuration(), [&] {
    ran.Add(1);
    timers.Cancel(later);
    timers.ScheduleAfter(absl::Milliseconds(5), [&] { ran.Add(2); });
  });
  ASSERT_TRUE(ran.WaitFor(2));
  EXPECT_EQ(ran.order(), (std::vector<int>{1, 2}));
  EXPECT_EQ(timers.pending(), 0u);
}

TEST(TimerQueueTest, FarDeadlinesWaitAndPendingTimersAreDroppedAtDestruction) {
  std::atomic<bool> ran{false};
  {
    TimerQueue timers;
    timers.Schedule(absl::InfiniteFuture(), [&] { ran = true; });
    timers.ScheduleAfter(absl::Hours(2), [&] { ran = true; });
    EXPECT_EQ(timers.pending(), 2u);
  }
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace syncopate::server
