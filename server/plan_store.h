// Plans this daemon has seen, by plan hash, so a Compile can name its plan by hash instead of
// carrying it. Every rank of every training step compiles (or revalidates) the same agreed plan;
// sending and parsing a world-8 plan in every request cost more CPU than the rest of a cached
// compile together (bench/RESULTS.md). Filled by Agree answers passing through this daemon (decided
// here or forwarded from the leader) and by Compile requests that carried a full plan.
//
// Entries are evicted oldest-first past `max_entries` or `max_bytes` (serialized size): a miss is
// harmless, the caller then sends the plan itself (NOT_FOUND tells it to).
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "syncopate/v1/plan.pb.h"

namespace syncopate::server {

class PlanStore {
 public:
  struct Options {
    size_t max_entries = 256;
    size_t max_bytes = size_t{64} << 20;
  };

  PlanStore() : PlanStore(Options()) {}
  explicit PlanStore(Options options) : options_(options) {}

  // Stores a copy of `plan` under `hash` unless one is there (the copy is made only then). The
  // caller vouches that `hash` is plan::PlanHash of `plan`; users re-check before trusting it.
  void Remember(const std::string& hash, const v1::Plan& plan);
  // nullptr when unknown.
  std::shared_ptr<const v1::Plan> Find(const std::string& hash) const;

  size_t size() const;
  size_t bytes() const;

 private:
  struct Entry {
    std::shared_ptr<const v1::Plan> plan;
    size_t bytes = 0;
  };

  const Options options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> plans_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> order_ ABSL_GUARDED_BY(mu_);  // insertion order, for eviction
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace syncopate::server
