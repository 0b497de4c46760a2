// InterNodeKernel: launches a bound fused kernel whose plan spans nodes. The group
// (GroupOptions::nodes) keeps intra-node chunks on the device as for any single-node launch; the
// compiler left the inter-node chunks out of every device program (jit Lower with the node map);
// this class carries them: a UCX transport and a plan executor in device mode run them between
// nodes, and ProxyDeviceSide moves their bytes between the GPU and pinned host memory, waiting
// for the kernel's chunk_ready words and setting the destination's signal words, so the fused
// kernel cannot tell which transport delivered a chunk.
//
//   ASSIGN_OR_RETURN(auto rt, OverlapRuntime::Join({.group_id = "job7", .rank = r, .world_size = 4,
//                                                    .nodes = {0, 0, 1, 1}}));
//   ... AllocateSymmetric, Compile (the node map comes from the group), Bind ...
//   ASSIGN_OR_RETURN(auto k, InterNodeKernel::Create(*rt, *bound, bootstrap, {}));  // collective
//   RETURN_IF_ERROR(k->Launch(stream, {.backend = Backend::kCopyEngine}));
//   RETURN_IF_ERROR(k->Sync(stream));  // errors name the peer (rank and address) that failed
//
// Per launch e: the previous epoch's proxy work is joined, the group launches e on the stream,
// and a proxy thread runs the executor's epoch e (sends: fetch from the device once the kernel
// published the chunk, put with signal; receives: deliver to the device). The kernel's tail
// waits (bounded, BoundKernel::AddProxyEpochWord) for a host-mapped word the proxy thread stores
// with the CPU when epoch e ends (also when it fails), so the launch ends on its stream only
// after every inter-node source was copied out: whatever the caller queues after it (refilling
// inputs, the next kernel) cannot overwrite a source the proxy still reads, and every incoming
// chunk landed (the tail's incoming signals). No stream waits for the proxy: the proxy's copies
// are stream work submitted after the launch, and with one hardware queue per process
// (CUDA_DEVICE_MAX_CONNECTIONS=1, or under MPS) a stream wait on their outcome sat in front of
// them in that queue and deadlocked (seen on the H100: InterNodeFaultTest ran past 200 s).
// Sync() waits for both and reports the proxy's error first (it names the remote peer; the
// kernel's own timeout would only name the chunk that never came).
// The proxy's own copies (fetches and deliveries) are stream work submitted later still, behind
// the launch stream's end-of-launch word and the copy engine's gate waits; so they run in a CUDA
// context of their own (InterNodeOptions::proxy_own_context), whose hardware queues nothing of
// the group's context can block.
// A failed epoch breaks the kernel: later launches fail with FailedPrecondition, as the group's.
//
// Deadlines: LaunchOptions::timeout bounds the kernel's waits, InterNodeOptions::
// transfer_timeout each proxy wait; a chunk that crosses nodes must arrive within the former,
// so keep it at least as long as the latter.
//
// Thread-safety: one thread at a time, like OverlapRuntime; the proxy thread is internal.
#pragma once

#include <cuda.h>

#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/cuda/overlap_runtime.h"
#include "runtime/cuda/proxy_device_side.h"
#include "runtime/ucx/bootstrap.h"
#include "runtime/ucx/plan_executor.h"
#include "runtime/ucx/transport.h"

namespace syncopate::cuda {

struct InterNodeOptions {
  ucx::TransportOptions transport;  // name and UCX settings (e.g. {{"TLS", "tcp"}})
  absl::Duration transfer_timeout = absl::Seconds(10);  // every proxy wait
  absl::Duration connect_timeout = absl::Seconds(30);
  // The proxy's device copies run in a CUDA context of their own, so they never queue behind
  // the launch stream's work (ProxyDeviceSide); false: in the group's context.
  bool proxy_own_context = true;
};

class InterNodeKernel {
 public:
  // Collective over every rank of every node (UCX worker addresses go through `bootstrap`).
  // `runtime` and `bound` must outlive the result.
  static absl::StatusOr<std::unique_ptr<InterNodeKernel>> Create(OverlapRuntime& runtime,
                                                                 BoundKernel& bound,
                                                                 ucx::Bootstrap& bootstrap,
                                                                 const InterNodeOptions& options);
  ~InterNodeKernel();  // Shutdown(), logging its error

  // Chunks this rank sends to / receives from other nodes per launch.
  int num_inter_node_sends() const { return executor_->num_local_transfers(); }
  int num_inter_node_receives() const { return executor_->num_incoming(); }

  absl::Status Launch(CUstream stream, const LaunchOptions& options);
  absl::Status Sync(CUstream stream);
  // Joins the proxy, closes the UCX endpoints. Peers should pass a barrier after it before they
  // exit (as with any UcxTransport). Idempotent.
  absl::Status Shutdown();

 private:
  InterNodeKernel(OverlapRuntime& runtime, BoundKernel& bound)
      : runtime_(runtime), bound_(bound) {}
  absl::Status JoinProxy();
  void StoreEpochDone(uint32_t epoch);

  OverlapRuntime& runtime_;
  BoundKernel& bound_;
  // Declaration order = reverse teardown order: the executor goes first, the transport (which
  // registered the device side's pinned buffers) is shut down before those buffers are freed.
  std::unique_ptr<ucx::UcxTransport> transport_;
  std::unique_ptr<ProxyDeviceSide> device_;
  std::unique_ptr<ucx::PlanExecutor> executor_;
  Event launch_start_;  // recorded on the launch stream right before each launch
  // u32, host-mapped: the last proxy epoch that ended; stored by the proxy thread, waited for by
  // the kernel's tail.
  PinnedHostBuffer epoch_done_;
  bool waits_registered_ = false;  // epoch_done_ is among bound_'s proxy epoch words
  uint64_t executor_epoch_ = 0;    // the group's epoch extended to 64 bits (Launch)
  bool broken_ = false;
  std::thread proxy_;
  absl::Status proxy_status_;
};

}  // namespace syncopate::cuda
