// A rank's chunk-plan buffers in GPU memory for the UCX plan executor (runtime/ucx/
// plan_executor.h) on a UCX build that moves host memory only (Debian's): every plan buffer is
// allocated on the device, with a pinned host copy the executor registers with UCX and runs on;
// this class is the executor's BufferStaging, copying byte ranges between the two as chunks
// leave and land.
//
//   ASSIGN_OR_RETURN(auto buffers, DevicePlanBuffers::Create(ctx, plan));
//   ucx::ExecutorOptions o;  o.staging = buffers.get();  o.run_intra_node = true;
//   ASSIGN_OR_RETURN(auto ex, ucx::PlanExecutor::Create(plan, rank, nodes, transport, o,
//                                                       buffers->host_buffers()));
//   ... kernels write buffers->device("data") on a stream; synchronize that stream ...
//   RETURN_IF_ERROR(ex->StageIn());   // then the barrier that starts the epoch on every rank
//   RETURN_IF_ERROR(ex->Execute(epoch));  // the device buffers hold the result on return
//
// The copies are synchronous on the legacy stream, which does not wait for the project's
// non-blocking streams: a stream that writes the buffers must be synchronized before StageIn.
//
// Thread-safety: ToHost/ToDevice may be called from any thread (each makes the context current
// on the calling thread); the executor calls them one at a time.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/plan.h"
#include "runtime/cuda/handles.h"
#include "runtime/ucx/plan_executor.h"

namespace syncopate::cuda {

class DevicePlanBuffers : public ucx::BufferStaging {
 public:
  // Allocates every buffer of `plan` on the context's device, and its pinned host copy. The
  // context must outlive this object.
  static absl::StatusOr<std::unique_ptr<DevicePlanBuffers>> Create(const Context& context,
                                                                   const plan::Plan& plan);

  // The host copies by buffer name: PlanExecutor::Create's `external`.
  std::map<std::string, void*> host_buffers() const;
  // The device buffer `name` (0 when the plan has none) and its size in bytes.
  CUdeviceptr device(const std::string& name) const;
  size_t bytes(const std::string& name) const;

  absl::Status ToHost(const std::string& buffer,
                      const std::vector<ucx::ByteRange>& ranges) override;
  absl::Status ToDevice(const std::string& buffer,
                        const std::vector<ucx::ByteRange>& ranges) override;

 private:
  struct Buffer {
    DeviceBuffer device;
    PinnedHostBuffer host;
    size_t bytes = 0;
  };
  explicit DevicePlanBuffers(const Context& context) : context_(context) {}
  absl::StatusOr<Buffer*> Find(const std::string& name, const std::vector<ucx::ByteRange>& ranges);

  const Context& context_;
  std::map<std::string, Buffer> buffers_;
};

}  // namespace syncopate::cuda
