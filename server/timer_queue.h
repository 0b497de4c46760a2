// A single-threaded timer queue: runs callbacks at (or shortly after) their due time.
//
// Why: the daemon serves with gRPC's callback API, so a waiting rendezvous holds no thread; its
// deadline needs something to fire it. One thread for every timer keeps server-side waits bounded
// without a thread per waiter.
//
// Thread-safety: Schedule and Cancel may be called from any thread, including from inside a
// callback. Callbacks run on the queue's thread without the queue's lock held, one at a time. The
// destructor stops the thread; callbacks not yet run are dropped, never run.
#pragma once

#include <cstdint>
#include <map>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace syncopate::server {

class TimerQueue {
 public:
  using TimerId = uint64_t;

  TimerQueue();
  ~TimerQueue();
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  // Runs `fn` at `when`. Ids are never 0, so 0 can mean "no timer".
  TimerId Schedule(absl::Time when, absl::AnyInvocable<void()> fn);
  // True when the timer was pending and will now never run; false when it already ran (or is
  // running) or was cancelled before.
  bool Cancel(TimerId id);

 private:
  void Run();

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  TimerId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // (due, id) -> callback; ordered by due time.
  std::map<std::pair<absl::Time, TimerId>, absl::AnyInvocable<void()>> timers_ ABSL_GUARDED_BY(mu_);
  std::map<TimerId, absl::Time> due_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace syncopate::server
