// ProxyDeviceSide: the GPU end of the inter-node proxy. A fused launch of a group spanning nodes
// keeps every intra-node chunk on the device (the kernel, CUDA IPC copies); the UCX plan executor
// in device mode (runtime/ucx/device_side.h) carries the inter-node ones through pinned host
// copies of the plan buffers, which this class owns, and asks it to
//  - fetch a chunk's source: the calling thread reads the kernel's chunk_ready word (when the
//    chunk is computed) and the signal words of its dependencies on this node until they reach
//    the epoch, then copies the source ranges device -> host on a proxy stream. The words are
//    polled from the host rather than waited on by the stream: a stream blocked on a peer's word
//    could only be released by that peer (Group::Unblock writes this rank's words only), and a
//    dead peer would leave it, and teardown, blocked for good. A kernel that never publishes the
//    chunk turns into an error naming the word at the executor's deadline; a launch the group
//    aborted (Group::abort_raised: its words were forced to the epoch) fails the fetch instead
//    of sending data that was never produced;
//  - deliver a chunk that landed: host -> device copies, then the chunk's signal word is written
//    with the epoch on the same stream (the write carries a fence), so the kernel's tile sees the
//    chunk exactly as if a local backend had delivered it.
//
// Hardware queues: the proxy's copies and signal writes are stream work submitted while the
// launch they feed runs, after whatever the caller queued behind that launch on its stream (at
// least the group's end-of-launch word, which waits for the kernel). In the group's context they
// could share a hardware queue with that work (always with CUDA_DEVICE_MAX_CONNECTIONS=1; with
// more, whenever the streams outnumber the queues) and wait behind it while the kernel waits for
// them: measured on an H100, every inter-node launch timed out with one queue, on both backends.
// So by default the proxy runs in a context of its own (Context::Create), whose streams have
// queues of their own; `own_context` false keeps the group's (one MPS client fewer).
//
// Epochs: BeginEpoch(e) takes an event recorded on the launch stream right before launch e, and
// every proxy copy of epoch e waits for it: a fetch must not read a source the caller is still
// writing on that stream, and a delivery must not land in buffers launch e-1 may still read (a
// forward out of a chunk, a tile) or the caller is still resetting.
//
// Thread-safety: FetchSource may run on several executor threads at once (one proxy stream per
// plan channel); Deliver and Drain come from one thread; BeginEpoch between epochs.
#pragma once

#include <cuda.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/plan/plan.h"
#include "runtime/cuda/group.h"
#include "runtime/cuda/handles.h"
#include "runtime/ucx/device_side.h"

namespace syncopate::cuda {

class ProxyDeviceSide : public ucx::DeviceSide {
 public:
  // `addresses`: this rank's device address of every plan buffer the inter-node chunks touch.
  // `ready_chunk`: transfer id -> index of its chunk_ready word (this rank's outgoing chunks of
  // the fused kernel). `group` and `plan` must outlive this object. `own_context`: see the file
  // comment. Leaves the group's context current on the calling thread.
  static absl::StatusOr<std::unique_ptr<ProxyDeviceSide>> Create(
      Group& group, const plan::Plan& plan, std::map<std::string, CUdeviceptr> addresses,
      std::map<int, int> ready_chunk, bool own_context = true);
  ~ProxyDeviceSide() override;

  // The pinned host copies by buffer name: PlanExecutor::Create's `external`.
  std::map<std::string, void*> host_buffers() const;

  // The next epoch's copies wait for `launch_start` (see the file comment). The event must stay
  // alive; it may be re-recorded after the epoch's FetchSource calls returned.
  absl::Status BeginEpoch(CUevent launch_start);

  absl::Status FetchSource(const plan::Transfer& t, const std::vector<int>& device_deps,
                           uint64_t epoch, const std::vector<ucx::ByteRange>& ranges, void* host,
                           absl::Time deadline) override;
  absl::Status Deliver(const plan::Transfer& t, uint64_t epoch,
                       const std::vector<ucx::ByteRange>& ranges, const void* host) override;
  absl::Status Drain(absl::Time deadline) override;

 private:
  struct FetchLane {
    Stream stream;
    Event done;
    PinnedHostBuffer words;  // readback of the words a fetch waits for
  };
  struct WaitedWord {
    CUdeviceptr word;
    std::string what;
  };
  ProxyDeviceSide(Group& group, const plan::Plan& plan) : group_(group), plan_(plan) {}
  // The context of every stream, event and buffer below.
  const Context& context() const {
    return own_context_.get() != nullptr ? own_context_ : group_.context();
  }
  absl::StatusOr<CUdeviceptr> Address(const std::string& buffer, const plan::Transfer& t) const;
  // Reads `words` (on `lane`) until each is >= epoch; DeadlineExceeded naming the first that is
  // not by `deadline`, Aborted once the group aborted the launch.
  absl::Status AwaitWords(FetchLane& lane, const std::vector<WaitedWord>& words, uint32_t epoch,
                          absl::Time deadline, const std::string& what);
  // Polls `event` until it completes or `deadline`.
  absl::Status AwaitEvent(CUevent event, absl::Time deadline, const std::string& what);

  Context own_context_;  // first: destroyed after everything created in it
  Group& group_;
  const plan::Plan& plan_;
  std::vector<const plan::Transfer*> by_id_;
  std::map<std::string, CUdeviceptr> addresses_;
  std::map<int, int> ready_chunk_;
  std::map<std::string, PinnedHostBuffer> host_;
  absl::Mutex lanes_mu_;
  std::map<int, std::unique_ptr<FetchLane>> lanes_;  // by plan channel
  Stream deliver_stream_;
  Event delivered_;
  CUevent launch_start_ = nullptr;  // BeginEpoch's
};

}  // namespace syncopate::cuda
