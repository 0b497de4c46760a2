// DeviceSide: what PlanExecutor's device mode (ExecutorOptions::device) needs from the GPU that
// a fused launch runs on. In a fused launch the plan's buffers live in device memory, the fused
// kernel and the intra-node backends (CUDA IPC copies) move every intra-node chunk and set its
// signal word on the device, and the executor carries only the chunks that cross nodes, over
// UCX, through its host copies of the buffers (Debian's UCX moves host memory only). This
// interface is the seam between the two: the executor asks for a source chunk once the device
// has produced it (FetchSource), hands over a chunk that landed from another node (Deliver), and
// waits for those hand-overs before it reuses its host memory (Drain). The GPU implementation
// lives with the CUDA runtime; tests use a host-memory fake.
//
// Host addresses: `host` is always the start of the executor's host copy of the whole buffer
// (PlanExecutor::buffer(name)); ByteRange offsets are from the buffer's start and mean the same
// bytes in the host copy and on the device (same dense layout).
//
// Signal words: the device side owns one word per plan signal id on this rank, compared against
// the launch's epoch like every other backend's flags (a word >= epoch means "arrived in this
// launch"). Deliver sets the word of the transfer it delivers; FetchSource waits on the words of
// the transfers in `device_deps`.
//
// Thread-safety: the executor calls FetchSource from several threads at once (one per plan
// channel), concurrently with Deliver and Drain, which it calls from one thread (the one running
// PlanExecutor::Execute). Implementations must not serialize FetchSource against Deliver: a
// FetchSource may be waiting for a device dependency that only a later Deliver satisfies (a
// forward of a chunk that arrived from another node).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/plan/plan.h"
#include "runtime/ucx/segments.h"

namespace syncopate::ucx {

class DeviceSide {
 public:
  virtual ~DeviceSide() = default;

  // Before transfer `t` (run by this rank; its source is on this rank) is sent in `epoch`: wait
  // until the source is ready on the device — produced by this launch's kernel when
  // t.after_compute, and every transfer in `device_deps` (deps that land on this node: their
  // signal words are on the device) has arrived — then copy `ranges` of t.src_buffer from the
  // device into host memory at `host` (the executor's host copy of that buffer: same offsets).
  // Returns once the bytes are in host memory; DeadlineExceeded at `deadline` naming what never
  // became ready; other errors as they come.
  //
  // Called for every transfer the executor sends, also when there is nothing to wait for (the
  // source is then the rank's initial data, which only the device holds). `device_deps` are
  // transfer ids; the executor has already waited for the transfer's other dependencies. The
  // executor cannot interrupt this call: it must return by `deadline`.
  virtual absl::Status FetchSource(const plan::Transfer& t, const std::vector<int>& device_deps,
                                   uint64_t epoch, const std::vector<ByteRange>& ranges,
                                   void* host, absl::Time deadline) = 0;

  // Transfer `t` landed in host memory (`ranges` of t.dst_buffer at `host`): copy them to the
  // device, then set t's signal word on the device to `epoch`, in that order. May return before
  // the copy is done (the kernel sees the signal only after it).
  //
  // The host bytes stay untouched until the next Drain returns (the executor's epoch handshake
  // keeps senders from overwriting them), so an asynchronous copy may read them until then.
  virtual absl::Status Deliver(const plan::Transfer& t, uint64_t epoch,
                               const std::vector<ByteRange>& ranges, const void* host) = 0;

  // Returns once every Deliver so far is complete (its host bytes may be overwritten), or
  // DeadlineExceeded at `deadline`.
  virtual absl::Status Drain(absl::Time deadline) = 0;
};

}  // namespace syncopate::ucx
