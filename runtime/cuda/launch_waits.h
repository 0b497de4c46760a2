// The launch waits of one prepared launch (launch_abi.h, "Protocol"): which words the fused
// kernel itself waits for, with a deadline, so that no stream of this process ever waits on
// another process. Built on the host from the copy-engine program and the launch's peers; no
// CUDA dependency (unit-tested without a GPU).
//
// Copy engine: every step with a condition (peer entered, a chunk forwarded to this rank or to
//   another rank, an outgoing chunk this kernel produces) gets a gate: the control CTA waits for
//   the step's words and release-stores gate_words[gate] = epoch; the step's side stream waits
//   only for that host-mapped word, which this process's kernel (submitted before the side
//   streams' work) or, after an abort, the host writes. Tails: every signal destined to this
//   rank, and every rank pulling from it drained, before the kernel ends.
// SM / direct: guards (entered[q] for each peer the kernel writes into or reads from) in the
//   comm CTAs and before a direct move; tails in comm CTA 0.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/cuda/copy_program.h"
#include "syncopate/launch_abi.h"

namespace syncopate::cuda {

// A signal this rank receives in a launch, and who sets it (diagnosis).
struct IncomingSignal {
  int signal = 0;
  int writer = 0;    // the rank executing the transfer
  int transfer = -1;
  friend bool operator==(const IncomingSignal&, const IncomingSignal&) = default;
};

// Device addresses of the protocol words, as mapped in this process.
struct ProtocolWords {
  std::function<uint64_t(int owner, int index)> signal;  // signals[index] of rank `owner`
  std::function<uint64_t(int about)> entered;            // this rank's entered[about]
  std::function<uint64_t(int about)> drained;            // this rank's drained[about]
  std::function<uint64_t(int index)> chunk_ready;        // this rank's chunk_ready[index]
};

// kProxyEpoch: a host-mapped word this rank's inter-node proxy sets to the epoch once it has
// copied out every outgoing chunk of that launch (InterNodeKernel).
enum class WordKind : int32_t {
  kSignal = 0,
  kEntered = 1,
  kDrained = 2,
  kChunkReady = 3,
  kProxyEpoch = 4,
};

struct LaunchWaits {
  std::vector<LaunchWaitOp> ops;
  std::vector<int> step_gate;  // per copy-engine step: its gate, or -1 (no condition)
  int num_gates = 0;
  bool control_cta = false;    // a copy-engine launch with gates or tails
};

// `program` is null for SM / direct launches. `proxy_epoch_words`: device addresses of
// host-mapped words the kernel's tail also waits for (WordKind::kProxyEpoch). InvalidArgument
// when the gates exceed `gate_capacity` (the host-mapped gate words).
absl::StatusOr<LaunchWaits> BuildLaunchWaits(int rank, const CopyProgram* program,
                                             const std::vector<int>& guarded_peers,
                                             const std::vector<IncomingSignal>& incoming,
                                             const std::vector<int>& pulled_by,
                                             const ProtocolWords& words, int gate_capacity,
                                             const std::vector<uint64_t>& proxy_epoch_words = {});

// The host's reading of a protocol word awaited at `epoch`, as the kernels' (launch_abi.h,
// kEpochLead): `epoch` or a little past it, never a word left behind.
inline bool EpochReached(uint32_t seen, uint32_t epoch) { return seen - epoch < kEpochLead; }

// `now`, a 32-bit epoch that came after `last` (its 64-bit extension), extended to 64 bits past
// any wraps, for counters that must only grow (the inter-node executor's epochs).
inline uint64_t ExtendEpoch(uint64_t last, uint32_t now) {
  return last + static_cast<uint32_t>(now - static_cast<uint32_t>(last));
}

// Host-epoch copy-engine gates are awaited by cuStreamWaitValue32's cyclic GEQ, which reads a
// gate released more than 2^31 launches ago as released (a bucket idle that long). The gates
// [0, num_gates) whose last release (`released_at`, indexed by gate; missing entries count as
// epoch 0) is at least kGateRefreshAge launches before `epoch`: the host rewrites them to
// epoch - 1 before the launch.
constexpr uint32_t kGateRefreshAge = 1u << 30;
std::vector<int> StaleGates(const std::vector<uint32_t>& released_at, int num_gates,
                            uint32_t epoch);

// The message for a timed-out wait the kernel recorded.
std::string DescribeTimeout(const WaitTimeoutRecord& record);

// The kernels' timeout record as the host reads it, possibly while they still run (launch_abi.h:
// claimed, then filled): OK when no wait timed out, else DeadlineExceeded with DescribeTimeout's
// message. A record claimed but not filled yet is re-read for up to `fill_grace` (filling takes
// microseconds), then reported without the wait's details rather than with half of them.
absl::Status ReadTimeoutRecord(const volatile WaitTimeoutRecord& record,
                               absl::Duration fill_grace = absl::Milliseconds(100));

}  // namespace syncopate::cuda
