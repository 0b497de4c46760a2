// See plan_store.h.
#include "server/plan_store.h"

namespace syncopate::server {

void PlanStore::Remember(const std::string& hash, const v1::Plan& plan) {
  if (hash.empty()) return;
  {
    absl::MutexLock lock(&mu_);
    if (plans_.contains(hash)) return;
  }
  // Copy and size outside the lock: a world-64 plan takes a while, and other ranks' lookups of
  // plans already here must not wait for it.
  auto copy = std::make_shared<const v1::Plan>(plan);
  const size_t size = copy->ByteSizeLong();
  if (size > options_.max_bytes) return;  // would evict everything and still not fit
  absl::MutexLock lock(&mu_);
  if (!plans_.emplace(hash, Entry{std::move(copy), size}).second) return;  // a racing Remember
  order_.push_back(hash);
  bytes_ += size;
  while (plans_.size() > options_.max_entries || bytes_ > options_.max_bytes) {
    auto oldest = plans_.find(order_.front());
    bytes_ -= oldest->second.bytes;
    plans_.erase(oldest);
    order_.pop_front();
  }
}

std::shared_ptr<const v1::Plan> PlanStore::Find(const std::string& hash) const {
  absl::MutexLock lock(&mu_);
  auto it = plans_.find(hash);
  return it == plans_.end() ? nullptr : it->second.plan;
}

size_t PlanStore::size() const {
  absl::MutexLock lock(&mu_);
  return plans_.size();
}

size_t PlanStore::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace syncopate::server
