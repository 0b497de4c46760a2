// Copy-engine gate sampling for Sync()'s diagnosis; see gate_watch.h.
#include "runtime/cuda/gate_watch.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/launch_waits.h"

namespace syncopate::cuda {

void GateWatch::Arm(WatchedGates gates) {
  gates_ = std::move(gates);
  sampled_.assign(this->gates().size(), 0);
  sampled_once_ = false;
}

void GateWatch::Observe(const volatile HostWords& words) {
  const std::vector<WatchedGate>& gates = this->gates();
  if (gates.empty()) return;
  reading_.resize(gates.size());
  for (size_t i = 0; i < gates.size(); ++i) reading_[i] = words.gates[gates[i].gate];
  // The kernel writes the timeout record (with a fence) before any abort releases a gate: a
  // record still clear after reading the gates means no abort released the ones just read.
  std::atomic_thread_fence(std::memory_order_acquire);
  if (words.record.timed_out != 0 || words.abort_flag != 0) return;
  sampled_.swap(reading_);
  sampled_once_ = true;
}

std::string GateWatch::Describe(uint32_t epoch) const {
  const std::vector<WatchedGate>& gates = this->gates();
  if (gates.empty()) return "";
  if (!sampled_once_) {
    // Sync() samples only while it waits, and drops reads made after a timeout or an abort: a
    // launch that failed while the host was still queueing later ones (a timed loop that syncs
    // at its end, as the stall matrix's) has none, so this says nothing of its copies.
    return absl::StrCat("; this rank's ", gates.size(),
                        " copy-engine gates were not sampled before the wait expired (no read "
                        "came before the timeout or an abort), so nothing is known of its copies");
  }
  int released = 0;
  std::string held;
  int listed = 0;
  for (size_t i = 0; i < gates.size(); ++i) {
    if (EpochReached(sampled_[i], epoch)) {
      ++released;
      continue;
    }
    if (listed++ < 8) {
      absl::StrAppend(&held, held.empty() ? "" : ", ", "transfer ", gates[i].transfer, " to rank ",
                      gates[i].dst_rank, " (gate at launch ", sampled_[i], ")");
    }
  }
  const int total = static_cast<int>(gates.size());
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
