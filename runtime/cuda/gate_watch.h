// GateWatch: what this rank's copy-engine gates looked like just before a launch failed, for
// Sync()'s diagnosis. A copy-engine step's side stream waits for its gate word, which the
// kernel's control CTA releases once the step's conditions hold (launch_waits.h); after a
// device wait expires the control CTA releases every gate, so reading them afterwards says
// nothing. Sync() therefore samples them while it polls and no timeout is recorded yet. The
// description separates the two ways a copy can fail to land: its gate was never released (the
// kernel waited on a peer) or it was released and the copy still did not run (blocked behind
// other work on the GPU's queues or engines).
//
// Covers the gates of the last copy-engine launch issued (launches of one group are usually one
// kernel; with several the description names the gates it watched). No CUDA dependency.
// Thread-safety: one thread (the group's).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/control_block.h"

namespace syncopate::cuda {

struct WatchedGate {
  int gate = 0;      // index into HostWords::gates
  int transfer = 0;  // plan transfer of the step it releases
  int dst_rank = 0;  // where the step's copy goes
};

// A prepared launch's gates, built once with it (Group::PrepareWaits); null or empty: none.
using WatchedGates = std::shared_ptr<const std::vector<WatchedGate>>;

class GateWatch {
 public:
  // A copy-engine launch was issued with these gates. No allocation once the sample buffers have
  // grown to the largest launch's gates (Arm and Observe run on every launch and every poll).
  void Arm(WatchedGates gates);
  // Samples the gate words unless a timeout is already recorded or the host abort is raised
  // (then the gates may have been released by the abort, not by their conditions).
  void Observe(const volatile HostWords& words);
  // For the launch `epoch` that failed: how many gates were released before the abort, and
  // which were held. Empty when no gates are watched.
  std::string Describe(uint32_t epoch) const;

 private:
  const std::vector<WatchedGate>& gates() const { return gates_ ? *gates_ : kNoGates; }
  static inline const std::vector<WatchedGate> kNoGates;

  WatchedGates gates_;
  std::vector<uint32_t> sampled_;  // gate words, per watched gate, at the last clean sample
  std::vector<uint32_t> reading_;  // Observe's scratch: the words being read
  bool sampled_once_ = false;
};

}  // namespace syncopate::cuda
