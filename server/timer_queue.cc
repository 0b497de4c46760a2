// See timer_queue.h.
#include "server/timer_queue.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"

namespace syncopate::server {

TimerQueue::TimerQueue() : thread_([this] { Run(); }) {}

TimerQueue::~TimerQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

TimerQueue::TimerId TimerQueue::Schedule(absl::Time when, absl::AnyInvocable<void()> fn) {
  return ScheduleAfter(when - absl::Now(), std::move(fn));
}

TimerQueue::TimerId TimerQueue::ScheduleAfter(absl::Duration delay, absl::AnyInvocable<void()> fn) {
  // Clamped: an infinite deadline must not overflow the time point (a year is "never" here).
  const absl::Duration bounded = std::clamp(delay, absl::ZeroDuration(), absl::Hours(24 * 365));
  const Clock::time_point due = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                   absl::ToChronoNanoseconds(bounded));
  bool earliest = false;
  TimerId id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    auto it = timers_.emplace(std::make_pair(due, id), std::move(fn)).first;
    due_.emplace(id, due);
    earliest = it == timers_.begin();
  }
  if (earliest) changed_.notify_one();  // the queue's thread may sleep until a later one
  return id;
}

bool TimerQueue::Cancel(TimerId id) {
  // Destroyed after the lock is released: the callback's captures may be large, or schedule or
  // cancel timers from their destructors.
  decltype(timers_)::node_type dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = due_.find(id);
    if (it == due_.end()) return false;
    dropped = timers_.extract(std::make_pair(it->second, id));
    due_.erase(it);
  }
  return true;
}

size_t TimerQueue::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return timers_.size();
}

void TimerQueue::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (timers_.empty()) {
      changed_.wait(lock);  // a new timer, or stop; a spurious wake-up loops back here
      continue;
    }
    const Clock::time_point due = timers_.begin()->first.first;
    if (due > Clock::now()) {
      changed_.wait_until(lock, due);  // or an earlier timer / stop: the loop re-reads
      continue;
    }
    {
      auto node = timers_.extract(timers_.begin());
      due_.erase(node.key().second);
      lock.unlock();
      node.mapped()();
    }  // the callback and its captures are destroyed before the lock is taken again
    lock.lock();
  }
}

}  // namespace syncopate::server
