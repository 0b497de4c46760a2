// Device copies and slot pinning for the staged UCX path; see staged_copies.h.
#include "runtime/cuda/staged_copies.h"

#include <cstdint>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"

namespace syncopate::cuda {
namespace {

// Makes `ctx` current on this thread for the guard's life and then restores whatever was current
// before (possibly no context). Costs one TLS read when `ctx` is already current.
class ScopedCurrent {
 public:
  ScopedCurrent(const DriverApi& api, CUcontext ctx) : api_(api) {
    CUresult r = api.cuCtxGetCurrent(&previous_);
    if (r != CUDA_SUCCESS) {
      status_ = CuError(r, "cuCtxGetCurrent(&previous)", __FILE__, __LINE__);
      return;
    }
    if (previous_ == ctx) return;
    r = api.cuCtxSetCurrent(ctx);
    if (r != CUDA_SUCCESS) {
      status_ = CuError(r, "cuCtxSetCurrent(staging context)", __FILE__, __LINE__);
      return;
    }
    switched_ = true;
  }
  ~ScopedCurrent() {
    if (switched_) CU_LOG_IF_ERROR(api_.cuCtxSetCurrent(previous_));
  }
  ScopedCurrent(const ScopedCurrent&) = delete;
  ScopedCurrent& operator=(const ScopedCurrent&) = delete;

  const absl::Status& status() const { return status_; }

 private:
  const DriverApi& api_;
  CUcontext previous_ = nullptr;
  bool switched_ = false;
  absl::Status status_;
};

// StagedChunk carries device addresses as void*.
CUdeviceptr DevicePointer(const void* p) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

// The error a copy callback returns: which copy (direction, size, addresses) and the driver's
// status, which names the call and the CUresult.
absl::Status CopyError(const char* direction, void* dst, const void* src, size_t bytes,
                       const absl::Status& cause) {
  return absl::Status(cause.code(),
                      absl::StrFormat("staged copy %s of %d bytes (%p -> %p) failed: %s",
                                      direction, bytes, src, dst, cause.message()));
}

}  // namespace

// ---- HostRegistration ----

absl::StatusOr<HostRegistration> HostRegistration::Register(const Context& context,
                                                            void* address, size_t bytes) {
  if (address == nullptr || bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot page-lock %d bytes at %p: empty range", bytes, address));
  }
  const DriverApi& api = context.api();
  ScopedCurrent current(api, context.get());
  RETURN_IF_ERROR(current.status());
  const CUresult res = api.cuMemHostRegister(address, bytes, CU_MEMHOSTREGISTER_PORTABLE);
  if (res != CUDA_SUCCESS) {
    absl::Status e = CuError(res, "cuMemHostRegister(address, bytes, CU_MEMHOSTREGISTER_PORTABLE)",
                             __FILE__, __LINE__);
    // Its own code, so callers can tell "pinned already" from "cannot pin".
    if (res == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
      return absl::AlreadyExistsError(e.message());
    }
    return e;
  }
  HostRegistration r;
  r.api_ = &api;
  r.ctx_ = context.get();
  r.address_ = address;
  r.bytes_ = bytes;
  return r;
}

HostRegistration& HostRegistration::operator=(HostRegistration&& o) noexcept {
  if (this != &o) {
    Reset();
    api_ = o.api_;
    ctx_ = std::exchange(o.ctx_, nullptr);
    address_ = std::exchange(o.address_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

HostRegistration::~HostRegistration() { Reset(); }

void HostRegistration::Reset() {
  if (address_ == nullptr) return;
  // cuMemHostUnregister needs a current context, and the destroying thread may have none: use
  // the one that registered the memory.
  ScopedCurrent current(*api_, ctx_);
  if (!current.status().ok()) {
    std::fprintf(stderr, "syncopate: not unpinning %zu bytes at %p: %s\n", bytes_, address_,
                 current.status().ToString().c_str());
  } else {
    CU_LOG_IF_ERROR(api_->cuMemHostUnregister(address_));
  }
  address_ = nullptr;
  bytes_ = 0;
  ctx_ = nullptr;
}

// ---- DeviceStaging ----

absl::StatusOr<std::unique_ptr<DeviceStaging>> DeviceStaging::Create(int device_ordinal) {
  std::unique_ptr<DeviceStaging> s(new DeviceStaging());
  ASSIGN_OR_RETURN(s->context_, Context::Retain(device_ordinal));  // current on this thread now
  ASSIGN_OR_RETURN(s->d2h_stream_, Stream::Create(s->context_.api()));
  ASSIGN_OR_RETURN(s->h2d_stream_, Stream::Create(s->context_.api()));
  return s;
}

DeviceStaging::~DeviceStaging() {
  if (context_.get() == nullptr) return;
  // Unpin and destroy the streams here, with the context current, rather than in the member
  // destructors, which might run on a thread where it is not.
  ScopedCurrent current(context_.api(), context_.get());
  if (!current.status().ok()) {
    std::fprintf(stderr, "syncopate: ~DeviceStaging: %s\n", current.status().ToString().c_str());
  }
  pins_.clear();
  h2d_stream_ = Stream();
  d2h_stream_ = Stream();
}

ucx::CopyFn DeviceStaging::DeviceToHost() {
  return [this](void* dst, const void* src, size_t bytes) {
    return CopyDeviceToHost(dst, src, bytes);
  };
}

ucx::CopyFn DeviceStaging::HostToDevice() {
  return [this](void* dst, const void* src, size_t bytes) {
    return CopyHostToDevice(dst, src, bytes);
  };
}

void DeviceStaging::Install(ucx::StagingOptions& options) {
  options.device_to_host = DeviceToHost();
  options.host_to_device = HostToDevice();
}

absl::Status DeviceStaging::CopyDeviceToHost(void* dst, const void* src, size_t bytes) {
  const DriverApi& api = context_.api();
  return Copy("device -> host", dst, src, bytes, d2h_stream_.get(), [&]() -> absl::Status {
    CU_RETURN_IF_ERROR(api.cuMemcpyDtoHAsync(dst, DevicePointer(src), bytes, d2h_stream_.get()));
    return absl::OkStatus();
  });
}

absl::Status DeviceStaging::CopyHostToDevice(void* dst, const void* src, size_t bytes) {
  const DriverApi& api = context_.api();
  return Copy("host -> device", dst, src, bytes, h2d_stream_.get(), [&]() -> absl::Status {
    CU_RETURN_IF_ERROR(api.cuMemcpyHtoDAsync(DevicePointer(dst), src, bytes, h2d_stream_.get()));
    return absl::OkStatus();
  });
}

absl::Status DeviceStaging::Copy(const char* direction, void* dst, const void* src, size_t bytes,
                                 CUstream stream, absl::FunctionRef<absl::Status()> enqueue) {
  if (bytes == 0) return absl::OkStatus();
  const DriverApi& api = context_.api();
  ScopedCurrent current(api, context_.get());
  absl::Status s = current.status();
  if (s.ok()) s = enqueue();
  if (s.ok()) {
    s = [&]() -> absl::Status {
      CU_RETURN_IF_ERROR(api.cuStreamSynchronize(stream));
      return absl::OkStatus();
    }();
  }
  if (!s.ok()) return CopyError(direction, dst, src, bytes, s);
  return absl::OkStatus();
}

absl::Status DeviceStaging::PinHostMemory(void* address, size_t bytes) {
  absl::StatusOr<HostRegistration> r = HostRegistration::Register(context_, address, bytes);
  if (r.ok()) {
    pins_.push_back(*std::move(r));
    ++pinned_ranges_;
    return absl::OkStatus();
  }
  // Pinned by someone else already (an overlapping registration): the copies get the DMA path
  // all the same; that registration's owner unpins it.
  if (r.status().code() == absl::StatusCode::kAlreadyExists) {
    ++pinned_ranges_;
    return absl::OkStatus();
  }
  absl::Status error(r.status().code(),
                     absl::StrFormat("page-locking %d bytes of staging memory at %p failed (the "
                                     "copies fall back to pageable memory): %s",
                                     bytes, address, r.status().message()));
  if (pin_status_.ok()) pin_status_ = error;
  return error;
}

absl::Status DeviceStaging::PinRegion(const ucx::UcxTransport& transport, int region) {
  return PinHostMemory(transport.region_address(region), transport.region_size(region));
}

}  // namespace syncopate::cuda
