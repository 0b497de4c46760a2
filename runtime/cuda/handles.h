// Move-only RAII owners for every CUDA driver handle Syncopate uses: the primary context, streams,
// events, modules, device memory, host-mapped pinned memory and virtual-memory (cuMemCreate)
// allocations with POSIX-fd export/import. The one place these are defined; other files use them.
//
// Destructors log failures (CU_LOG_IF_ERROR) and never throw. Every wrapper keeps the driver
// table it was made with. Driver calls need the owning context current on the calling thread:
// Context::MakeCurrent() does that.
// Thread-safety: a wrapper is owned by one thread at a time; the handles themselves are
// driver objects and may be used from any thread with the context current.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "core/base/scoped_fd.h"
#include "jit/nvrtc/nvrtc_compiler.h"
#include "runtime/cuda/driver.h"

namespace syncopate::cuda {

// Why retaining a context may fail with CUDA_ERROR_OUT_OF_MEMORY on a device with memory to
// spare: under MPS the server's clients share one pool of connections, each taking
// CUDA_DEVICE_MAX_CONNECTIONS (`connections_env`, null when unset) of them, so fewer clients fit
// when it is high (measured on an H100: the 4th client at 32 is refused). Empty for other results.
std::string RetainFailureHint(CUresult result, const char* connections_env);

// A retained primary context of one device, or a context of its own (Create); made current on
// the creating thread.
class Context {
 public:
  static absl::StatusOr<Context> Retain(int device_ordinal);
  // A new context on the device, apart from the primary one: its streams get hardware queues of
  // their own, so no work of the primary context's streams is ever queued in front of them
  // (under MPS it is one more client). Device memory mapped for the device (cuMemMap) and
  // portable pinned host memory are reachable from both; copies may name either's pointers.
  static absl::StatusOr<Context> Create(int device_ordinal);
  Context() = default;
  Context(Context&& o) noexcept { *this = std::move(o); }
  Context& operator=(Context&& o) noexcept;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();

  absl::Status MakeCurrent() const;
  CUcontext get() const { return ctx_; }
  CUdevice device() const { return device_; }
  int ordinal() const { return ordinal_; }
  int sm_count() const { return sm_count_; }
  int compute_capability() const { return cc_; }  // 90 for sm_90
  const DriverApi& api() const { return *api_; }

 private:
  // api_, ordinal_ and device_ of a visible device; no context yet.
  static absl::StatusOr<Context> ForDevice(int device_ordinal);
  // Fills sm_count_ and cc_ and makes ctx_ current.
  absl::Status Describe();
  void Release();

  const DriverApi* api_ = nullptr;
  CUcontext ctx_ = nullptr;
  bool primary_ = true;  // released with cuDevicePrimaryCtxRelease, else cuCtxDestroy
  CUdevice device_ = 0;
  int ordinal_ = -1;
  int sm_count_ = 0;
  int cc_ = 0;
};

class Stream {
 public:
  // CU_STREAM_NON_BLOCKING by default: never serialises with the legacy default stream.
  static absl::StatusOr<Stream> Create(const DriverApi& api,
                                       unsigned flags = CU_STREAM_NON_BLOCKING);
  Stream() = default;
  Stream(Stream&& o) noexcept
      : api_(o.api_), stream_(std::exchange(o.stream_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();
  CUstream get() const { return stream_; }
  absl::Status Synchronize() const;

 private:
  const DriverApi* api_ = nullptr;
  CUstream stream_ = nullptr;
};

// Whether work issued to `stream` now goes into a CUDA graph being captured (any capture
// status but none), rather than running.
absl::StatusOr<bool> StreamIsCapturing(const DriverApi& api, CUstream stream);

class Event {
 public:
  // CU_EVENT_DISABLE_TIMING by default (cheaper); CU_EVENT_DEFAULT for timing.
  static absl::StatusOr<Event> Create(const DriverApi& api,
                                      unsigned flags = CU_EVENT_DISABLE_TIMING);
  Event() = default;
  Event(Event&& o) noexcept : api_(o.api_), event_(std::exchange(o.event_, nullptr)) {}
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();
  CUevent get() const { return event_; }
  absl::Status Record(CUstream stream) const;
  // Milliseconds from `start` to this event (both recorded with timing enabled).
  absl::StatusOr<float> ElapsedMsSince(const Event& start) const;

 private:
  const DriverApi* api_ = nullptr;
  CUevent event_ = nullptr;
};

// A CUDA graph (what a stream capture recorded, adopted from cuStreamEndCapture) and, once
// instantiated, its executable; both destroyed with it.
class Graph {
 public:
  Graph() = default;
  Graph(const DriverApi& api, CUgraph graph) : api_(&api), graph_(graph) {}
  Graph(Graph&& o) noexcept
      : api_(o.api_),
        graph_(std::exchange(o.graph_, nullptr)),
        exec_(std::exchange(o.exec_, nullptr)) {}
  Graph& operator=(Graph&& o) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();
  absl::Status Instantiate();
  CUgraph get() const { return graph_; }
  CUgraphExec exec() const { return exec_; }  // null until Instantiate

 private:
  void Reset();
  const DriverApi* api_ = nullptr;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

// A loaded module (cubin, fatbin or PTX image) and lookups of its kernels.
class Module {
 public:
  static absl::StatusOr<Module> Load(const DriverApi& api, std::span<const char> image);
  // An NVRTC result: a cubin as is, PTX with the NUL terminator cuModuleLoadData needs.
  static absl::StatusOr<Module> LoadCompiled(const DriverApi& api,
                                             const nvrtc::CompiledKernel& compiled);
  Module() = default;
  Module(Module&& o) noexcept : api_(o.api_), module_(std::exchange(o.module_, nullptr)) {}
  Module& operator=(Module&& o) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ~Module();
  CUmodule get() const { return module_; }
  // The function stays valid while this module lives. NotFound names the entry.
  absl::StatusOr<CUfunction> Function(const std::string& name) const;

 private:
  const DriverApi* api_ = nullptr;
  CUmodule module_ = nullptr;
};

// cuMemAlloc'ed device memory (not shareable across processes; see VmmAllocation for that).
class DeviceBuffer {
 public:
  static absl::StatusOr<DeviceBuffer> Allocate(const DriverApi& api, size_t bytes);
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : api_(o.api_), ptr_(std::exchange(o.ptr_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  CUdeviceptr get() const { return ptr_; }
  size_t size() const { return bytes_; }

 private:
  const DriverApi* api_ = nullptr;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

// Pinned host memory mapped into the device address space (CU_MEMHOSTALLOC_DEVICEMAP), e.g. for
// the WaitTimeoutRecord the kernel writes and the host reads after a launch. Zero-filled.
class PinnedHostBuffer {
 public:
  static absl::StatusOr<PinnedHostBuffer> Allocate(const DriverApi& api, size_t bytes);
  PinnedHostBuffer() = default;
  PinnedHostBuffer(PinnedHostBuffer&& o) noexcept
      : api_(o.api_),
        host_(std::exchange(o.host_, nullptr)),
        device_(std::exchange(o.device_, 0)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  PinnedHostBuffer& operator=(PinnedHostBuffer&& o) noexcept;
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;
  ~PinnedHostBuffer();
  void* host() const { return host_; }
  CUdeviceptr device() const { return device_; }
  size_t size() const { return bytes_; }

 private:
  const DriverApi* api_ = nullptr;
  void* host_ = nullptr;
  CUdeviceptr device_ = 0;
  size_t bytes_ = 0;
};

// Virtual-memory allocation: physical memory from cuMemCreate (POSIX-fd shareable), mapped at a
// reserved address range with read/write access for `device`. Either created here (Create) or
// imported from another process's exported fd (Import); the two look alike to users.
class VmmAllocation {
 public:
  // `bytes` is rounded up to the allocation granularity.
  static absl::StatusOr<VmmAllocation> Create(const DriverApi& api, CUdevice device,
                                              size_t bytes);
  // Maps memory another process exported (fd from ExportFd, size as that side reported).
  static absl::StatusOr<VmmAllocation> Import(const DriverApi& api, CUdevice device, int fd,
                                              size_t bytes);
  static absl::StatusOr<size_t> Granularity(const DriverApi& api, CUdevice device);

  VmmAllocation() = default;
  VmmAllocation(VmmAllocation&& o) noexcept { *this = std::move(o); }
  VmmAllocation& operator=(VmmAllocation&& o) noexcept;
  VmmAllocation(const VmmAllocation&) = delete;
  VmmAllocation& operator=(const VmmAllocation&) = delete;
  ~VmmAllocation();

  // A new fd for the physical memory (the caller owns it; send it with SCM_RIGHTS).
  absl::StatusOr<ScopedFd> ExportFd() const;
  CUdeviceptr get() const { return ptr_; }
  size_t size() const { return bytes_; }

 private:
  static absl::StatusOr<VmmAllocation> MapHandle(const DriverApi& api, CUdevice device,
                                                 CUmemGenericAllocationHandle handle,
                                                 size_t bytes);
  void Reset();
  const DriverApi* api_ = nullptr;
  CUmemGenericAllocationHandle handle_ = 0;
  bool has_handle_ = false;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
  bool mapped_ = false;
};

}  // namespace syncopate::cuda
