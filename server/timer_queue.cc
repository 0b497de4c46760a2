// See timer_queue.h.
#include "server/timer_queue.h"

#include <utility>

namespace syncopate::server {

TimerQueue::TimerQueue() : thread_([this] { Run(); }) {}

TimerQueue::~TimerQueue() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

TimerQueue::TimerId TimerQueue::Schedule(absl::Time when, absl::AnyInvocable<void()> fn) {
  absl::MutexLock lock(&mu_);
  TimerId id = next_id_++;
  timers_.emplace(std::make_pair(when, id), std::move(fn));
  due_.emplace(id, when);
  return id;
}

bool TimerQueue::Cancel(TimerId id) {
  absl::MutexLock lock(&mu_);
  auto it = due_.find(id);
  if (it == due_.end()) return false;
  timers_.erase(std::make_pair(it->second, id));
  due_.erase(it);
  return true;
}

void TimerQueue::Run() {
  mu_.Lock();
  while (!stop_) {
    if (timers_.empty()) {
      // Wake on a new timer or on stop; the condition re-reads state under the lock.
      auto changed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !timers_.empty();
      };
      mu_.Await(absl::Condition(&changed));
      continue;
    }
    absl::Time due = timers_.begin()->first.first;
    absl::Time now = absl::Now();
    if (due > now) {
      // Sleep until the earliest timer, or until an earlier one / stop arrives.
      auto earlier = [this, due]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || timers_.empty() || timers_.begin()->first.first < due;
      };
      mu_.AwaitWithDeadline(absl::Condition(&earlier), due);
      continue;
    }
    auto node = timers_.extract(timers_.begin());
    due_.erase(node.key().second);
    absl::AnyInvocable<void()> fn = std::move(node.mapped());
    mu_.Unlock();
    fn();
    mu_.Lock();
  }
  mu_.Unlock();
}

}  // namespace syncopate::server
