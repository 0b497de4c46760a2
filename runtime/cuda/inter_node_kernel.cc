// Launches of a fused kernel spanning nodes; see inter_node_kernel.h.
#include "runtime/cuda/inter_node_kernel.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "runtime/cuda/launch_waits.h"
#include "spdlog/spdlog.h"

namespace syncopate::cuda {

absl::StatusOr<std::unique_ptr<InterNodeKernel>> InterNodeKernel::Create(
    OverlapRuntime& runtime, BoundKernel& bound, ucx::Bootstrap& bootstrap,
    const InterNodeOptions& options) {
  Group& group = runtime.group();
  const plan::Plan& plan = bound.kernel().plan();
  const int me = group.rank();
  if (bootstrap.world_size() != group.world_size() || bootstrap.rank() != me) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bootstrap is rank ", bootstrap.rank(), " of ", bootstrap.world_size(), ", the group rank ",
        me, " of ", group.world_size()));
  }
  std::unique_ptr<InterNodeKernel> k(new InterNodeKernel(runtime, bound));
  std::map<std::string, CUdeviceptr> addresses;
  for (const auto& [buffer, per_rank] : bound.buffer_addresses()) addresses[buffer] = per_rank[me];
  std::map<int, int> ready_chunk;
  const jit::LaunchMetadata& md = bound.kernel().metadata();
  if (me < static_cast<int>(md.outgoing_transfers.size())) {
    const std::vector<int>& outgoing = md.outgoing_transfers[me];
    for (size_t c = 0; c < outgoing.size(); ++c) ready_chunk[outgoing[c]] = static_cast<int>(c);
  }
  ASSIGN_OR_RETURN(k->transport_, ucx::UcxTransport::Create(options.transport));
  ASSIGN_OR_RETURN(
      k->device_, ProxyDeviceSide::Create(group, plan, std::move(addresses), std::move(ready_chunk),
                                          options.proxy_own_context));
  ucx::ExecutorOptions eo;
  eo.run_intra_node = false;  // the device backends own every intra-node chunk
  eo.transfer_timeout = options.transfer_timeout;
  eo.device = k->device_.get();
  ASSIGN_OR_RETURN(k->executor_,
                   ucx::PlanExecutor::Create(plan, me, group.nodes(), k->transport_.get(), eo,
                                             k->device_->host_buffers()));
  ASSIGN_OR_RETURN(k->launch_start_, Event::Create(group.api()));
  ASSIGN_OR_RETURN(k->epoch_done_, PinnedHostBuffer::Allocate(group.api(), sizeof(uint32_t)));
  k->StoreEpochDone(group.epoch());
  k->executor_epoch_ = group.epoch();
  RETURN_IF_ERROR(k->transport_->Connect(bootstrap, absl::Now() + options.connect_timeout));
  // Only now: a kernel that failed to be created must leave no word in `bound`'s launches.
  bound.AddProxyEpochWord(k->epoch_done_.device());
  k->waits_registered_ = true;
  return k;
}

InterNodeKernel::~InterNodeKernel() {
  absl::Status s = Shutdown();
  if (!s.ok()) spdlog::warn("inter-node kernel shutdown: {}", s.ToString());
}

absl::Status InterNodeKernel::JoinProxy() {
  if (!proxy_.joinable()) return absl::OkStatus();
  proxy_.join();
  return proxy_status_;
}

absl::Status InterNodeKernel::Launch(CUstream stream, const LaunchOptions& options) {
  if (executor_ == nullptr) return absl::FailedPreconditionError("inter-node kernel is shut down");
  if (broken_) {
    return absl::FailedPreconditionError(
        "inter-node kernel is broken after a failed epoch (its ranks are out of step)");
  }
  // One proxy epoch at a time: the previous one ends once its chunks left and arrived.
  if (absl::Status previous = JoinProxy(); !previous.ok()) {
    broken_ = true;
    // The group diagnoses and unblocks its streams too (bounded), so nothing stays queued.
    (void)runtime_.Sync(stream);
    return previous;
  }
  Group& group = runtime_.group();
  RETURN_IF_ERROR(group.context().MakeCurrent());
  RETURN_IF_ERROR(launch_start_.Record(stream));
  RETURN_IF_ERROR(device_->BeginEpoch(launch_start_.get()));
  RETURN_IF_ERROR(runtime_.Launch(bound_, stream, options));
  // The executor's epochs only grow (it refuses one that does not): the group's 32-bit count,
  // extended past its wraps. Every rank extends the same sequence alike.
  executor_epoch_ = ExtendEpoch(executor_epoch_, group.epoch());
  const uint64_t epoch = executor_epoch_;
  proxy_status_ = absl::OkStatus();
  proxy_ = std::thread([this, epoch] {
    proxy_status_ = executor_->Execute(epoch);
    // Also after a failure: the kernel's tail must not wait out its deadline for this word
    // (the failure itself reaches the caller through Sync).
    StoreEpochDone(static_cast<uint32_t>(epoch));
  });
  return absl::OkStatus();
}

void InterNodeKernel::StoreEpochDone(uint32_t epoch) {
  // A release store to pinned host memory, read by the kernel with a system-scope acquire: the
  // proxy's device -> host copies completed (their events were awaited) before it.
  std::atomic_ref<uint32_t>(*static_cast<uint32_t*>(epoch_done_.host()))
      .store(epoch, std::memory_order_release);
}

absl::Status InterNodeKernel::Sync(CUstream stream) {
  absl::Status launch = runtime_.Sync(stream);
  absl::Status proxy = JoinProxy();
  if (!proxy.ok() || !launch.ok()) broken_ = true;
  if (proxy.ok()) return launch;
  if (launch.ok()) return proxy;
  return absl::Status(proxy.code(), absl::StrCat(proxy.message(), " (and the launch: ",
                                                 launch.message(), ")"));
}

absl::Status InterNodeKernel::Shutdown() {
  (void)JoinProxy();  // a failed epoch was reported by Sync
  proxy_status_ = absl::OkStatus();
  if (waits_registered_) {
    // Later launches of `bound` (directly through the runtime) must not wait for this word.
    bound_.RemoveProxyEpochWord(epoch_done_.device());
    waits_registered_ = false;
  }
  executor_.reset();
  // Freeing the pinned buffers needs the context current on this thread.
  if (device_ != nullptr) (void)runtime_.group().context().MakeCurrent();
  absl::Status down = transport_ != nullptr ? transport_->Shutdown() : absl::OkStatus();
  // Pinned host buffers go only after the transport released its registrations of them.
  transport_.reset();
  device_.reset();  // with the proxy's own context, which was current during its teardown
  if (runtime_.group().context().get() != nullptr) (void)runtime_.group().context().MakeCurrent();
  return down;
}

}  // namespace syncopate::cuda
