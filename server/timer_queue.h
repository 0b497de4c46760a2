// A single-threaded timer queue: runs callbacks at (or shortly after) their due time.
//
// Why: the daemon serves with gRPC's callback API, so a waiting rendezvous holds no thread; its
// deadline needs something to fire it. One thread for every timer keeps server-side waits bounded
// without a thread per waiter.
//
// Due times are kept on the monotonic clock: a deadline given as a wall-clock time becomes "this
// long from now" when it is scheduled, and the queue sleeps on a steady-clock condition variable
// (absl::Mutex's timed waits follow the wall clock), so setting the system clock neither fires the
// daemon's deadlines early nor holds them back.
//
// Thread-safety: Schedule and Cancel may be called from any thread, including from inside a
// callback. Callbacks run on the queue's thread without the queue's lock held, one at a time. The
// destructor stops the thread; callbacks not yet run are dropped, never run.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"

namespace syncopate::server {

class TimerQueue {
 public:
  using TimerId = uint64_t;

  TimerQueue();
  ~TimerQueue();
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  // Runs `fn` at `when`: `when - absl::Now()` from now, on the monotonic clock. Ids are never 0,
  // so 0 can mean "no timer".
  TimerId Schedule(absl::Time when, absl::AnyInvocable<void()> fn);
  // Runs `fn` after `delay` (negative: as soon as the queue's thread gets to it).
  TimerId ScheduleAfter(absl::Duration delay, absl::AnyInvocable<void()> fn);
  // True when the timer was pending and will now never run; false when it already ran (or is
  // running) or was cancelled before.
  bool Cancel(TimerId id);
  // Timers scheduled and neither run nor cancelled (for tests and stats).
  size_t pending() const;

 private:
  using Clock = std::chrono::steady_clock;
  void Run();

  mutable std::mutex mu_;
  std::condition_variable changed_;  // a new earliest timer, or stop
  bool stop_ = false;                // guarded by mu_
  TimerId next_id_ = 1;              // guarded by mu_
  // (due, id) -> callback, ordered by due time; and id -> due. Guarded by mu_.
  std::map<std::pair<Clock::time_point, TimerId>, absl::AnyInvocable<void()>> timers_;
  std::map<TimerId, Clock::time_point> due_;
  std::thread thread_;
};

}  // namespace syncopate::server
