// A fixed pool of threads running queued tasks, with a bounded queue.
//
// Why: callback-API handlers run on gRPC's own threads, which must not block; a compile that
// misses the cache (NVRTC, up to seconds) runs here instead.
//
// Thread-safety: Submit is thread-safe. The destructor runs every task already queued, then joins.
#pragma once

#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace syncopate::server {

class WorkerPool {
 public:
  WorkerPool(int threads, size_t max_queue);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False (task not taken) when the queue is full.
  bool Submit(absl::AnyInvocable<void()> task);

 private:
  void Run();

  const size_t max_queue_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<absl::AnyInvocable<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace syncopate::server
