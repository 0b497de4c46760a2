// UcxTransport, memory (see transport.h): which memory kinds this UCX build reaches, registering
// and allocating the regions this rank exposes (mapped on the progress thread, with their remote
// keys packed for Connect's card), and the sizes of local and remote regions.
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "runtime/ucx/transport.h"
#include "runtime/ucx/transport_internal.h"

namespace syncopate::ucx {

bool UcxTransport::SupportsMemoryKind(MemoryKind kind) const {
  ucs_memory_type_t type = kind == MemoryKind::kCuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
  return (memory_types_ & (uint64_t{1} << type)) != 0;
}

absl::StatusOr<int> UcxTransport::RegisterMemory(std::string name, void* address, size_t size,
                                                 MemoryKind kind) {
  if (!SupportsMemoryKind(kind)) {
    return absl::FailedPreconditionError(
        absl::StrCat("register '", name, "': this UCX build cannot access ",
                     kind == MemoryKind::kCuda ? "CUDA" : "host",
                     " memory (UCP_ATTR_FIELD_MEMORY_TYPES); stage it through StagedPipeline"));
  }
  if (size == 0) return absl::InvalidArgumentError(absl::StrCat("register '", name, "': size 0"));
  ucs_memory_type_t type = kind == MemoryKind::kCuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
  return impl_->AddRegion(std::move(name), kind,
                          [&] { return MemHandle::Map(impl_->context, address, size, type); });
}

absl::StatusOr<int> UcxTransport::AllocateMemory(std::string name, size_t size) {
  if (size == 0) return absl::InvalidArgumentError(absl::StrCat("allocate '", name, "': size 0"));
  return impl_->AddRegion(std::move(name), MemoryKind::kHost, [&]() -> absl::StatusOr<MemHandle> {
    ASSIGN_OR_RETURN(MemHandle memh, MemHandle::Allocate(impl_->context, size));
    std::memset(memh.address(), 0, size);
    return memh;
  });
}

absl::StatusOr<int> UcxTransport::Impl::AddRegion(
    std::string name, MemoryKind kind, absl::FunctionRef<absl::StatusOr<MemHandle>()> make) {
  int id = -1;
  RETURN_IF_ERROR(RunSync(
      [&]() -> absl::Status {
        LocalRegion r;
        r.name = std::move(name);
        r.kind = kind;
        ASSIGN_OR_RETURN(r.memh, make());
        ASSIGN_OR_RETURN(r.rkey, RkeyBuffer::Pack(context, r.memh));
        id = static_cast<int>(regions.size());
        regions.push_back(std::move(r));
        return absl::OkStatus();
      },
      absl::InfiniteFuture()));
  return id;
}

void* UcxTransport::region_address(int region) const {
  return impl_->regions.at(region).memh.address();
}
size_t UcxTransport::region_size(int region) const {
  return impl_->regions.at(region).memh.length();
}
size_t UcxTransport::remote_region_size(int peer, int region) const {
  return impl_->peers.at(peer)->regions.at(region).size;
}

}  // namespace syncopate::ucx
