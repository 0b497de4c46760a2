// LaunchWatch: the host side of a group's bounded waits (group.h's protocol). Owns the
// host-mapped words (the kernels' timeout record, the host abort flag, the progress words and
// the copy-engine gates: control_block.h's HostWords), the gate watch and the event after the
// last launch issued. Sync's watch lives here: it polls that event while sampling the gates
// and the progress words (host memory, no stream involved, so it works whatever the GPU's
// queues are blocked on); when progress stops for 4x the wait deadline + 2 s it names what
// happened and unblocks the device (host abort flag, every gate released).
//
// Thread-safety: one thread (the group's), except RecordedTimeout and abort_raised (any).
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/cuda/control_block.h"
#include "runtime/cuda/gate_watch.h"
#include "runtime/cuda/handles.h"

namespace syncopate::cuda {

class LaunchWatch {
 public:
  // Allocates the host-mapped words (zeroed) and the launch-done event.
  static absl::StatusOr<LaunchWatch> Create(const DriverApi& api);
  LaunchWatch() = default;

  HostWords& words() const { return *static_cast<HostWords*>(words_.host()); }
  // The device address of the byte at `offset` in HostWords.
  CUdeviceptr WordDevice(size_t offset) const { return words_.device() + offset; }
  // Whether the watch gave up on a launch and unblocked the device: the words it wrote to do so
  // hold the epoch without their data, so nobody may act on them from then on.
  bool abort_raised() const {
    return static_cast<const volatile HostWords*>(words_.host())->abort_flag != 0;
  }
  // DeadlineExceeded from the kernels' timeout record; OK when no device wait timed out.
  // Sticky: the record is written once per group.
  absl::Status RecordedTimeout() const;

  // The launch Watch() will follow has these copy-engine gates (null: not a copy-engine launch).
  void Arm(WatchedGates gates) { gates_.Arm(std::move(gates)); }
  // A launch was issued on `stream` with device waits of `wait`: what Watch() waits for.
  absl::Status Issued(CUstream stream, absl::Duration wait);
  // The device wait deadline of the last launch issued.
  absl::Duration last_wait() const { return last_wait_; }
  // A launch the caller's graph replays waits up to `wait` on the device: the watch must not
  // call a stall before that (it only lengthens, so a launch in flight keeps its margin).
  void ExtendWait(absl::Duration wait) { last_wait_ = std::max(last_wait_, wait); }
  // Polls until the last launch issued has ended. When its progress stops for 4x its wait
  // deadline + 2 s: DeadlineExceeded naming rank `rank`'s launch `epoch` and what stalled,
  // after unblocking the device (Internal if even that fails). Other errors: the failing call.
  absl::Status Watch(int rank, uint32_t epoch);
  // What the gates looked like before launch `epoch` failed ("" when none were watched).
  std::string DescribeGates(uint32_t epoch) const { return gates_.Describe(epoch); }

 private:
  explicit LaunchWatch(const DriverApi& api) : api_(&api) {}
  absl::Status Diagnose(int rank, uint32_t epoch, absl::Duration waited) const;
  // Host writes only: kernels see the abort flag within kHostAbortPollSpins spin rounds, side
  // streams see their gates. Then waits (bounded) for the last launch to end.
  absl::Status Unblock(uint32_t epoch);

  const DriverApi* api_ = nullptr;
  PinnedHostBuffer words_;                       // HostWords
  Event launch_done_;                            // recorded after the last launch issued
  absl::Duration last_wait_ = absl::Seconds(2);  // the last launch's device wait deadline
  GateWatch gates_;  // the last copy-engine launch's gates, sampled while watching
};

}  // namespace syncopate::cuda
