// Copy-engine gate sampling for Sync()'s diagnosis; see gate_watch.h.
#include "runtime/cuda/gate_watch.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"

namespace syncopate::cuda {

void GateWatch::Arm(std::vector<WatchedGate> gates) {
  gates_ = std::move(gates);
  sampled_.assign(gates_.size(), 0);
  sampled_once_ = false;
}

void GateWatch::Observe(const volatile HostWords& words) {
  if (gates_.empty()) return;
  std::vector<uint32_t> now(gates_.size());
  for (size_t i = 0; i < gates_.size(); ++i) now[i] = words.gates[gates_[i].gate];
  // The kernel writes the timeout record (with a fence) before any abort releases a gate: a
  // record still clear after reading the gates means no abort released the ones just read.
  std::atomic_thread_fence(std::memory_order_acquire);
  if (words.record.timed_out != 0 || words.abort_flag != 0) return;
  sampled_ = std::move(now);
  sampled_once_ = true;
}

std::string GateWatch::Describe(uint32_t epoch) const {
  if (gates_.empty()) return "";
  if (!sampled_once_) {
    return absl::StrCat("; this rank's ", gates_.size(),
                        " copy-engine gates were not sampled before the wait expired");
  }
  int released = 0;
  std::string held;
  int listed = 0;
  for (size_t i = 0; i < gates_.size(); ++i) {
    if (static_cast<int32_t>(sampled_[i] - epoch) >= 0) {
      ++released;
      continue;
    }
    if (listed++ < 8) {
      absl::StrAppend(&held, held.empty() ? "" : ", ", "transfer ", gates_[i].transfer, " to rank ",
                      gates_[i].dst_rank, " (gate at launch ", sampled_[i], ")");
    }
  }
  const int total = static_cast<int>(gates_.size());
  if (released == total) {
    return absl::StrCat("; this rank's kernel had released all ", total,
                        " copy-engine gates of launch ", epoch,
                        " before the wait expired, so any of its copies that did not land was "
                        "queued behind other GPU work, not waiting for a peer");
  }
  return absl::StrCat("; this rank's kernel had released ", released, " of ", total,
                      " copy-engine gates of launch ", epoch,
                      " before the wait expired; held: ", held, listed > 8 ? ", ..." : "");
}

}  // namespace syncopate::cuda
