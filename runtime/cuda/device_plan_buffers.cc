// Device plan buffers staged for the UCX plan executor; see device_plan_buffers.h.
#include "runtime/cuda/device_plan_buffers.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "runtime/ucx/segments.h"

namespace syncopate::cuda {

absl::StatusOr<std::unique_ptr<DevicePlanBuffers>> DevicePlanBuffers::Create(
    const Context& context, const plan::Plan& plan) {
  RETURN_IF_ERROR(context.MakeCurrent());
  std::unique_ptr<DevicePlanBuffers> b(new DevicePlanBuffers(context));
  for (const plan::BufferSpec& spec : plan.buffers) {
    // The executor registers at least 8 bytes per buffer; the copies match it.
    const size_t bytes = std::max<uint64_t>(ucx::BufferBytes(spec), 8);
    Buffer buffer;
    buffer.bytes = bytes;
    ASSIGN_OR_RETURN(buffer.device, DeviceBuffer::Allocate(context.api(), bytes));
    ASSIGN_OR_RETURN(buffer.host, PinnedHostBuffer::Allocate(context.api(), bytes));
    b->buffers_.emplace(spec.name, std::move(buffer));
  }
  return b;
}

std::map<std::string, void*> DevicePlanBuffers::host_buffers() const {
  std::map<std::string, void*> out;
  for (const auto& [name, b] : buffers_) out[name] = b.host.host();
  return out;
}

CUdeviceptr DevicePlanBuffers::device(const std::string& name) const {
  auto it = buffers_.find(name);
  return it == buffers_.end() ? 0 : it->second.device.get();
}

size_t DevicePlanBuffers::bytes(const std::string& name) const {
  auto it = buffers_.find(name);
  return it == buffers_.end() ? 0 : it->second.bytes;
}

absl::StatusOr<DevicePlanBuffers::Buffer*> DevicePlanBuffers::Find(
    const std::string& name, const std::vector<ucx::ByteRange>& ranges) {
  auto it = buffers_.find(name);
  if (it == buffers_.end()) {
    return absl::NotFoundError(absl::StrCat("no device buffer '", name, "'"));
  }
  for (const ucx::ByteRange& r : ranges) {
    if (r.offset + r.length > it->second.bytes) {
      return absl::OutOfRangeError(absl::StrCat("bytes [", r.offset, ", ", r.offset + r.length,
                                                ") outside device buffer '", name, "' of ",
                                                it->second.bytes));
    }
  }
  RETURN_IF_ERROR(context_.MakeCurrent());  // the executor's threads start with none
  return &it->second;
}

absl::Status DevicePlanBuffers::ToHost(const std::string& buffer,
                                       const std::vector<ucx::ByteRange>& ranges) {
  ASSIGN_OR_RETURN(Buffer * b, Find(buffer, ranges));
  auto* host = static_cast<char*>(b->host.host());
  for (const ucx::ByteRange& r : ranges) {
    CU_RETURN_IF_ERROR(
        context_.api().cuMemcpyDtoH(host + r.offset, b->device.get() + r.offset, r.length));
  }
  return absl::OkStatus();
}

absl::Status DevicePlanBuffers::ToDevice(const std::string& buffer,
                                         const std::vector<ucx::ByteRange>& ranges) {
  ASSIGN_OR_RETURN(Buffer * b, Find(buffer, ranges));
  const auto* host = static_cast<const char*>(b->host.host());
  for (const ucx::ByteRange& r : ranges) {
    CU_RETURN_IF_ERROR(
        context_.api().cuMemcpyHtoD(b->device.get() + r.offset, host + r.offset, r.length));
  }
  return absl::OkStatus();
}

}  // namespace syncopate::cuda
