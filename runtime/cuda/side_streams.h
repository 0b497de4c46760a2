// The copy-engine backend's side streams (group.h, protocol step 3): one per plan channel,
// forked from the launch stream before the fused kernel and joined back into it after the copy
// program. Each step waits only for its gate word (host-mapped, released by this process's
// kernel or host) and the steps it names, copies, then writes its destination's signal word
// (and the drained word of a pull). Never a wait on another process (group.h says why).
//
// Thread-safety: used by one thread at a time (the group's launching thread).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cuda/copy_program.h"
#include "runtime/cuda/handles.h"

namespace syncopate::cuda {

// Where a launch's copy steps wait and write (device addresses, as this process maps them).
struct CopyStepWords {
  std::function<CUdeviceptr(int gate)> gate;                 // host-mapped gate word
  std::function<CUdeviceptr(int owner, int index)> signal;   // signals[index] of `owner`
  std::function<CUdeviceptr(int owner, int about)> drained;  // drained[about] of `owner`
  CUdeviceptr fence_scratch = 0;  // a word for fenced writes (device-counted launches)
};

// How the side streams learn the launch's epoch e. Host epoch: `value`; each step waits for its
// gate to reach e and writes e into the signal and drained words. Device epoch (the kernel counts
// launches, as in a graph the caller replays, where a value in the stream would be the same at
// every replay): `source_gates` is set; the gates were zeroed before the kernel, each step waits
// for its gate to be nonzero (the kernel wrote e), and copies e into the words from the gate
// word source_gates[i] (copy_program.h's EpochSourceGates), after a fenced write.
struct StepEpoch {
  uint32_t value = 0;
  const std::vector<int>* source_gates = nullptr;
};

class SideStreams {
 public:
  static absl::StatusOr<SideStreams> Create(const DriverApi& api);
  SideStreams() = default;

  // Creates the side streams and events a launch of `channels` channels and `steps` copy steps
  // uses, if they do not exist yet (Fork and Issue grow them on demand; a launch prepared
  // ahead calls this so that its first issue, perhaps under a CUDA-graph capture, creates no
  // CUDA objects).
  absl::Status Reserve(int channels, size_t steps);
  // Before the kernel: `channels` side streams exist, and none starts before what `stream`
  // holds so far.
  absl::Status Fork(CUstream stream, int channels);
  // After the kernel: `program`'s steps (step i gated by step_gates[i] >= 0), each signal and
  // drained word set to the epoch (StepEpoch says how), then `stream` joins every side stream.
  // `batch_copies`: a step's contiguous ranges as one cuMemcpyBatchAsync preferring the copy
  // engines, where the driver has it (else one cuMemcpyAsync each, which the driver may run on
  // the SMs).
  absl::Status Issue(const CopyProgram& program, const std::vector<int>& step_gates,
                     CUstream stream, const StepEpoch& epoch, bool batch_copies,
                     const CopyStepWords& words, int me);

 private:
  explicit SideStreams(const DriverApi& api) : api_(&api) {}
  absl::Status IssueStepCopies(const CopyStep& step, CUstream s, bool batch) const;
  // Sets the word at `dst` to the epoch on `s` after the step's copies (StepEpoch).
  absl::Status WriteEpoch(CUstream s, CUdeviceptr dst, const StepEpoch& epoch, size_t step,
                          const CopyStepWords& words) const;

  const DriverApi* api_ = nullptr;
  std::vector<Stream> streams_;  // one per channel (grown on demand)
  std::vector<Event> joins_;     // one per side stream
  std::vector<Event> steps_;     // one per copy step others depend on (grown on demand)
  Event fork_;
};

}  // namespace syncopate::cuda
