// In-memory LRU of compiled kernels, capped by bytes (binary + log + names, roughly what the
// entry holds). An entry larger than the whole budget is not kept. A budget of 0 keeps nothing.
//
// Thread-safety: none; KernelCache calls it under its own mutex. Values are shared_ptr<const>,
// so an entry evicted while a caller still uses it stays alive for that caller.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "jit/nvrtc/nvrtc_compiler.h"

namespace syncopate::cache {

class MemoryLru {
 public:
  using Value = std::shared_ptr<const nvrtc::CompiledKernel>;

  explicit MemoryLru(uint64_t budget_bytes) : budget_bytes_(budget_bytes) {}

  // The entry for `key`, marked most recently used; nullptr on a miss.
  Value Get(const std::string& key);
  // Inserts or replaces; evicts least recently used entries until within budget. Returns how
  // many entries were evicted.
  int Put(const std::string& key, Value value);
  bool Erase(const std::string& key);

  uint64_t bytes() const { return bytes_; }
  size_t size() const { return index_.size(); }
  uint64_t budget_bytes() const { return budget_bytes_; }

  // Bytes an entry is charged for.
  static uint64_t Charge(const nvrtc::CompiledKernel& kernel);

 private:
  struct Entry {
    std::string key;
    Value value;
    uint64_t charge;
  };
  int EvictToFit();

  uint64_t budget_bytes_;
  uint64_t bytes_ = 0;
  std::list<Entry> order_;  // front: most recently used
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace syncopate::cache
