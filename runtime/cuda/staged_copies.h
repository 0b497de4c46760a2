// The GPU side of the staged UCX path (runtime/ucx/staged_channel.h): Debian's UCX moves host
// memory only, so a device chunk is copied into a host slot, put over UCX, and copied into device
// memory on the other end. DeviceStaging supplies those two copies for one device as the
// channel's ucx::CopyFn callbacks, and page-locks the slots so the copies are DMA transfers
// straight from/to the slots rather than bounces through the driver's own pinned buffer.
//
// Copies: cuMemcpyDtoHAsync / cuMemcpyHtoDAsync on a copy stream of this object, then
// cuStreamSynchronize, because the CopyFn contract is "return once the bytes are in place" (the
// channel puts the slot, or credits it, right after). One stream per direction, so a rank that
// sends on one channel and receives on another from two threads keeps both copy engines busy
// instead of serialising the directions on one stream.
//
// Contexts: StagedChannel calls the callbacks from whatever thread calls Send/Receive, which need
// not have this device's context current. Each callback makes the context current for the copy
// and restores the thread's previous context (often none) afterwards, so it leaves no trace on the
// caller's thread.
//
// Lifetime: destroy a DeviceStaging after every channel holding its callbacks (they capture it)
// and before the memory it pinned is freed (for a channel's slots: before the UcxTransport that
// allocated them shuts down). Declaring transport, staging, channel in that order does both.
//
// Thread-safety: the callbacks may run concurrently on different threads (streams are
// thread-safe). Channels of the same direction share that direction's stream: correct, but their
// copies then serialise; give each concurrently used channel of a direction its own DeviceStaging
// to overlap them. PinHostMemory / PinRegion are setup calls for one thread, before any transfer.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/handles.h"
#include "runtime/ucx/staged_channel.h"
#include "runtime/ucx/transport.h"

namespace syncopate::cuda {

// Page-locks caller-owned host memory (cuMemHostRegister, CU_MEMHOSTREGISTER_PORTABLE: pinned
// for every context) until destroyed. The memory must stay mapped, and `context` retained, for
// the registration's life. A range overlapping an existing registration fails with
// AlreadyExists (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED); other failures keep CuError's codes.
class HostRegistration {
 public:
  static absl::StatusOr<HostRegistration> Register(const Context& context, void* address,
                                                   size_t bytes);
  HostRegistration() = default;
  HostRegistration(HostRegistration&& o) noexcept { *this = std::move(o); }
  HostRegistration& operator=(HostRegistration&& o) noexcept;
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  ~HostRegistration();

  void* address() const { return address_; }
  size_t size() const { return bytes_; }

 private:
  void Reset();
  const DriverApi* api_ = nullptr;
  CUcontext ctx_ = nullptr;
  void* address_ = nullptr;
  size_t bytes_ = 0;
};

class DeviceStaging {
 public:
  // Retains device `device_ordinal`'s primary context (it becomes current on this thread, as
  // with Context::Retain) and creates the copy streams in it.
  static absl::StatusOr<std::unique_ptr<DeviceStaging>> Create(int device_ordinal);
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  // The sender's copy-out: dst is host memory (a slot), src a device address as void*
  // (reinterpret_cast of a CUdeviceptr, as StagedChunk::device holds it).
  ucx::CopyFn DeviceToHost();
  // The receiver's copy-in: dst a device address as void*, src host memory.
  ucx::CopyFn HostToDevice();
  // Sets options.device_to_host and options.host_to_device to the two above.
  void Install(ucx::StagingOptions& options);

  // Page-locks [address, +bytes) for this object's life. Failure is not fatal: the copies still
  // work from pageable memory (the driver stages them through its own pinned buffer, so they are
  // slower and synchronous with the host), and the error comes back here and in pin_status().
  // Memory another registration already pinned counts as pinned (and is not unpinned by us).
  absl::Status PinHostMemory(void* address, size_t bytes);
  // PinHostMemory on the whole of region `region` of `transport` (e.g. a channel's slots).
  absl::Status PinRegion(const ucx::UcxTransport& transport, int region);
  // True when at least one range was pinned and no PinHostMemory failed.
  bool fully_pinned() const { return pinned_ranges_ > 0 && pin_status_.ok(); }
  // The first pinning error; OK while none failed.
  const absl::Status& pin_status() const { return pin_status_; }

  const Context& context() const { return context_; }

 private:
  DeviceStaging() = default;
  absl::Status CopyDeviceToHost(void* dst, const void* src, size_t bytes);
  absl::Status CopyHostToDevice(void* dst, const void* src, size_t bytes);
  // Makes the context current, runs `enqueue` (the async copy on `stream`), waits for `stream`,
  // restores the thread's context; errors name `direction` and the addresses.
  absl::Status Copy(const char* direction, void* dst, const void* src, size_t bytes,
                    CUstream stream, absl::FunctionRef<absl::Status()> enqueue);

  // Destroyed in reverse: pins and streams go while the context is still retained.
  Context context_;
  Stream d2h_stream_;
  Stream h2d_stream_;
  std::vector<HostRegistration> pins_;
  int pinned_ranges_ = 0;
  absl::Status pin_status_;
};

}  // namespace syncopate::cuda
