// The bookkeeping of LaunchTrace's ring (ops/launch_trace.h), apart from its device memory so it
// is tested anywhere: which slot the next launch's records go to, which launch each slot holds,
// and the kept launches oldest first. No CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace syncopate::ops {

struct LaunchRecordSlot {
  int64_t launch = -1;  // which launch of the op (0-based); -1: empty
  int ctas = 0, comm_ctas = 0, control_ctas = 0;
  int64_t bucket_m = 0, m = 0;
};

class LaunchRing {
 public:
  explicit LaunchRing(int slots) : slots_(static_cast<std::size_t>(slots)) {}

  // The slot of the next launch (`slot.launch` is set here): the oldest one once the ring is
  // full.
  int Claim(LaunchRecordSlot slot) {
    const int index = static_cast<int>(launches_ % static_cast<int64_t>(slots_.size()));
    slot.launch = launches_++;
    slots_[static_cast<std::size_t>(index)] = slot;
    return index;
  }
  // The last claimed launch did not happen: its slot is empty again and its number reused.
  void DropLast() {
    if (launches_ == 0) return;
    --launches_;
    slots_[static_cast<std::size_t>(launches_ % static_cast<int64_t>(slots_.size()))] = {};
  }
  // The indices of the slots that hold a launch, oldest launch first.
  std::vector<int> OldestFirst() const {
    std::vector<int> order;
    const auto n = static_cast<int64_t>(slots_.size());
    for (int64_t i = 0; i < n; ++i) {
      const int index = static_cast<int>((launches_ + i) % n);
      if (slots_[static_cast<std::size_t>(index)].launch >= 0) order.push_back(index);
    }
    return order;
  }
  const LaunchRecordSlot& slot(int index) const { return slots_[static_cast<std::size_t>(index)]; }
  int64_t launches() const { return launches_; }

 private:
  std::vector<LaunchRecordSlot> slots_;
  int64_t launches_ = 0;
};

}  // namespace syncopate::ops
