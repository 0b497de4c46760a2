// In-memory kernel LRU; see memory_lru.h.
#include "jit/cache/memory_lru.h"

namespace syncopate::cache {

uint64_t MemoryLru::Charge(const nvrtc::CompiledKernel& kernel) {
  uint64_t charge = sizeof(nvrtc::CompiledKernel) + kernel.binary.size() + kernel.log.size() +
                    kernel.target.size() + kernel.nvrtc_version.size();
  for (const auto& [name, lowered] : kernel.lowered_names) charge += name.size() + lowered.size();
  return charge;
}

MemoryLru::Value MemoryLru::Get(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second);
  return it->second->value;
}

int MemoryLru::Put(const std::string& key, Value value) {
  Erase(key);
  uint64_t charge = Charge(*value) + key.size();
  if (charge > budget_bytes_) return 0;  // would evict everything and still not fit
  order_.push_front(Entry{key, std::move(value), charge});
  index_[key] = order_.begin();
  bytes_ += charge;
  return EvictToFit();
}

bool MemoryLru::Erase(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  bytes_ -= it->second->charge;
  order_.erase(it->second);
  index_.erase(it);
  return true;
}

int MemoryLru::EvictToFit() {
  int evicted = 0;
  while (bytes_ > budget_bytes_ && !order_.empty()) {
    Entry& victim = order_.back();
    bytes_ -= victim.charge;
    index_.erase(victim.key);
    order_.pop_back();
    ++evicted;
  }
  return evicted;
}

}  // namespace syncopate::cache
