// RAII owners of CUDA driver handles; see handles.h.
#include "runtime/cuda/handles.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace syncopate::cuda {

// ---- Context ----
std::string RetainFailureHint(CUresult result, const char* connections_env) {
  // Out of memory is what a client that finds the pool full usually gets; the driver names the
  // pool itself at other times (seen with 8 clients at 32 connections on an H100).
  if (result != CUDA_ERROR_OUT_OF_MEMORY && result != CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED) {
    return "";
  }
  return absl::StrCat(
      " (if this process is an MPS client: the MPS server's clients share one pool of "
      "connections and each takes CUDA_DEVICE_MAX_CONNECTIONS=",
      connections_env != nullptr ? connections_env : "8 (unset)",
      " of them, so fewer clients fit; lower it or run fewer ranks per GPU)");
}

namespace {

// A failed context creation, with the MPS connection pool named where it may be the cause.
absl::Status ContextFailure(CUresult result, const char* call, int line) {
  absl::Status failed = CuError(result, call, __FILE__, line);
  return absl::Status(
      failed.code(),
      absl::StrCat(failed.message(),
                   RetainFailureHint(result, std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"))));
}

}  // namespace

absl::StatusOr<Context> Context::ForDevice(int device_ordinal) {
  ASSIGN_OR_RETURN(const DriverApi* api, Driver());
  int count = 0;
  CU_RETURN_IF_ERROR(api->cuDeviceGetCount(&count));
  if (device_ordinal < 0 || device_ordinal >= count) {
    return absl::InvalidArgumentError(absl::StrCat("GPU ordinal ", device_ordinal,
                                                   " out of range: ", count, " visible"));
  }
  Context c;
  c.api_ = api;
  c.ordinal_ = device_ordinal;
  CU_RETURN_IF_ERROR(api->cuDeviceGet(&c.device_, device_ordinal));
  return c;
}

absl::StatusOr<Context> Context::Retain(int device_ordinal) {
  ASSIGN_OR_RETURN(Context c, ForDevice(device_ordinal));
  if (CUresult r = c.api_->cuDevicePrimaryCtxRetain(&c.ctx_, c.device_); r != CUDA_SUCCESS) {
    return ContextFailure(r, "cuDevicePrimaryCtxRetain", __LINE__);
  }
  RETURN_IF_ERROR(c.Describe());
  return c;
}

absl::StatusOr<Context> Context::Create(int device_ordinal) {
  ASSIGN_OR_RETURN(Context c, ForDevice(device_ordinal));
  c.primary_ = false;
  if (CUresult r = c.api_->cuCtxCreate(&c.ctx_, nullptr, 0, c.device_); r != CUDA_SUCCESS) {
    c.ctx_ = nullptr;
    return ContextFailure(r, "cuCtxCreate", __LINE__);
  }
  RETURN_IF_ERROR(c.Describe());
  return c;
}

absl::Status Context::Describe() {
  CU_RETURN_IF_ERROR(api_->cuCtxSetCurrent(ctx_));
  int major = 0, minor = 0;
  CU_RETURN_IF_ERROR(
      api_->cuDeviceGetAttribute(&sm_count_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device_));
  CU_RETURN_IF_ERROR(
      api_->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_));
  CU_RETURN_IF_ERROR(
      api_->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_));
  cc_ = major * 10 + minor;
  return absl::OkStatus();
}

void Context::Release() {
  if (ctx_ == nullptr) return;
  if (primary_) {
    CU_LOG_IF_ERROR(api_->cuDevicePrimaryCtxRelease(device_));
  } else {
    CU_LOG_IF_ERROR(api_->cuCtxDestroy(ctx_));
  }
  ctx_ = nullptr;
}

Context& Context::operator=(Context&& o) noexcept {
  if (this != &o) {
    Release();
    api_ = o.api_;
    primary_ = o.primary_;
    ctx_ = std::exchange(o.ctx_, nullptr);
    device_ = o.device_;
    ordinal_ = o.ordinal_;
    sm_count_ = o.sm_count_;
    cc_ = o.cc_;
  }
  return *this;
}

Context::~Context() { Release(); }

absl::Status Context::MakeCurrent() const {
  if (ctx_ == nullptr) return absl::FailedPreconditionError("no CUDA context retained");
  CU_RETURN_IF_ERROR(api_->cuCtxSetCurrent(ctx_));
  return absl::OkStatus();
}

// ---- Stream ----
absl::StatusOr<Stream> Stream::Create(const DriverApi& api, unsigned flags) {
  Stream s;
  s.api_ = &api;
  CU_RETURN_IF_ERROR(api.cuStreamCreate(&s.stream_, flags));
  return s;
}
Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (stream_) CU_LOG_IF_ERROR(api_->cuStreamDestroy(stream_));
    api_ = o.api_;
    stream_ = std::exchange(o.stream_, nullptr);
  }
  return *this;
}
Stream::~Stream() {
  if (stream_) CU_LOG_IF_ERROR(api_->cuStreamDestroy(stream_));
}
absl::Status Stream::Synchronize() const {
  CU_RETURN_IF_ERROR(api_->cuStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::StatusOr<bool> StreamIsCapturing(const DriverApi& api, CUstream stream) {
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  CU_RETURN_IF_ERROR(api.cuStreamIsCapturing(stream, &capture));
  return capture != CU_STREAM_CAPTURE_STATUS_NONE;
}

// ---- Event ----
absl::StatusOr<Event> Event::Create(const DriverApi& api, unsigned flags) {
  Event e;
  e.api_ = &api;
  CU_RETURN_IF_ERROR(api.cuEventCreate(&e.event_, flags));
  return e;
}
Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (event_) CU_LOG_IF_ERROR(api_->cuEventDestroy(event_));
    api_ = o.api_;
    event_ = std::exchange(o.event_, nullptr);
  }
  return *this;
}
Event::~Event() {
  if (event_) CU_LOG_IF_ERROR(api_->cuEventDestroy(event_));
}
absl::Status Event::Record(CUstream stream) const {
  CU_RETURN_IF_ERROR(api_->cuEventRecord(event_, stream));
  return absl::OkStatus();
}
absl::StatusOr<float> Event::ElapsedMsSince(const Event& start) const {
  float ms = 0;
  CU_RETURN_IF_ERROR(api_->cuEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

// ---- Graph ----
Graph& Graph::operator=(Graph&& o) noexcept {
  if (this != &o) {
    Reset();
    api_ = o.api_;
    graph_ = std::exchange(o.graph_, nullptr);
    exec_ = std::exchange(o.exec_, nullptr);
  }
  return *this;
}
Graph::~Graph() { Reset(); }
void Graph::Reset() {
  if (exec_) CU_LOG_IF_ERROR(api_->cuGraphExecDestroy(exec_));
  if (graph_) CU_LOG_IF_ERROR(api_->cuGraphDestroy(graph_));
  exec_ = nullptr;
  graph_ = nullptr;
}
absl::Status Graph::Instantiate() {
  CU_RETURN_IF_ERROR(api_->cuGraphInstantiateWithFlags(&exec_, graph_, 0));
  return absl::OkStatus();
}

// ---- Module ----
absl::StatusOr<Module> Module::Load(const DriverApi& api, std::span<const char> image) {
  if (image.empty()) return absl::InvalidArgumentError("empty module image");
  Module m;
  m.api_ = &api;
  CU_RETURN_IF_ERROR(api.cuModuleLoadData(&m.module_, image.data()));
  return m;
}
absl::StatusOr<Module> Module::LoadCompiled(const DriverApi& api,
                                            const nvrtc::CompiledKernel& compiled) {
  if (!compiled.is_ptx) return Load(api, compiled.binary);
  std::string ptx = compiled.binary;
  ptx.push_back('\0');
  return Load(api, ptx);
}

Module& Module::operator=(Module&& o) noexcept {
  if (this != &o) {
    if (module_) CU_LOG_IF_ERROR(api_->cuModuleUnload(module_));
    api_ = o.api_;
    module_ = std::exchange(o.module_, nullptr);
  }
  return *this;
}
Module::~Module() {
  if (module_) CU_LOG_IF_ERROR(api_->cuModuleUnload(module_));
}
absl::StatusOr<CUfunction> Module::Function(const std::string& name) const {
  CUfunction f = nullptr;
  CUresult r = api_->cuModuleGetFunction(&f, module_, name.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) {
    return absl::NotFoundError(absl::StrCat("kernel '", name, "' not found in module"));
  }
  CU_RETURN_IF_ERROR(r);
  return f;
}

// ---- DeviceBuffer ----
absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(const DriverApi& api, size_t bytes) {
  DeviceBuffer b;
  b.api_ = &api;
  if (bytes == 0) return b;
  CU_RETURN_IF_ERROR(api.cuMemAlloc(&b.ptr_, bytes));
  b.bytes_ = bytes;
  return b;
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) CU_LOG_IF_ERROR(api_->cuMemFree(ptr_));
    api_ = o.api_;
    ptr_ = std::exchange(o.ptr_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_) CU_LOG_IF_ERROR(api_->cuMemFree(ptr_));
}

// ---- PinnedHostBuffer ----
absl::StatusOr<PinnedHostBuffer> PinnedHostBuffer::Allocate(const DriverApi& api, size_t bytes) {
  PinnedHostBuffer b;
  b.api_ = &api;
  CU_RETURN_IF_ERROR(
      api.cuMemHostAlloc(&b.host_, bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  b.bytes_ = bytes;
  std::memset(b.host_, 0, bytes);
  CU_RETURN_IF_ERROR(api.cuMemHostGetDevicePointer(&b.device_, b.host_, 0));
  return b;
}
PinnedHostBuffer& PinnedHostBuffer::operator=(PinnedHostBuffer&& o) noexcept {
  if (this != &o) {
    if (host_) CU_LOG_IF_ERROR(api_->cuMemFreeHost(host_));
    api_ = o.api_;
    host_ = std::exchange(o.host_, nullptr);
    device_ = std::exchange(o.device_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}
PinnedHostBuffer::~PinnedHostBuffer() {
  if (host_) CU_LOG_IF_ERROR(api_->cuMemFreeHost(host_));
}

// ---- VmmAllocation ----
namespace {
CUmemAllocationProp DeviceProp(CUdevice device) {
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}
}  // namespace

absl::StatusOr<size_t> VmmAllocation::Granularity(const DriverApi& api, CUdevice device) {
  CUmemAllocationProp prop = DeviceProp(device);
  size_t granularity = 0;
  CU_RETURN_IF_ERROR(api.cuMemGetAllocationGranularity(&granularity, &prop,
                                                       CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  return granularity;
}

absl::StatusOr<VmmAllocation> VmmAllocation::MapHandle(const DriverApi& api, CUdevice device,
                                                       CUmemGenericAllocationHandle handle,
                                                       size_t bytes) {
  VmmAllocation a;
  a.api_ = &api;
  a.handle_ = handle;  // owned from here on: released by ~VmmAllocation on any error below
  a.has_handle_ = true;
  a.bytes_ = bytes;
  CU_RETURN_IF_ERROR(api.cuMemAddressReserve(&a.ptr_, bytes, 0, 0, 0));
  CU_RETURN_IF_ERROR(api.cuMemMap(a.ptr_, bytes, 0, handle, 0));
  a.mapped_ = true;
  CUmemAccessDesc access;
  std::memset(&access, 0, sizeof(access));
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU_RETURN_IF_ERROR(api.cuMemSetAccess(a.ptr_, bytes, &access, 1));
  return a;
}

absl::StatusOr<VmmAllocation> VmmAllocation::Create(const DriverApi& api, CUdevice device,
                                                    size_t bytes) {
  ASSIGN_OR_RETURN(size_t granularity, Granularity(api, device));
  size_t rounded = (std::max<size_t>(bytes, 1) + granularity - 1) / granularity * granularity;
  CUmemAllocationProp prop = DeviceProp(device);
  CUmemGenericAllocationHandle handle = 0;
  CU_RETURN_IF_ERROR(api.cuMemCreate(&handle, rounded, &prop, 0));
  return MapHandle(api, device, handle, rounded);
}

absl::StatusOr<VmmAllocation> VmmAllocation::Import(const DriverApi& api, CUdevice device, int fd,
                                                    size_t bytes) {
  CUmemGenericAllocationHandle handle = 0;
  // The POSIX-fd handle type takes the fd itself, cast to a pointer-sized value.
  CU_RETURN_IF_ERROR(api.cuMemImportFromShareableHandle(
      &handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  return MapHandle(api, device, handle, bytes);
}

absl::StatusOr<ScopedFd> VmmAllocation::ExportFd() const {
  int fd = -1;
  CU_RETURN_IF_ERROR(api_->cuMemExportToShareableHandle(
      &fd, handle_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  return ScopedFd(fd);
}

void VmmAllocation::Reset() {
  if (api_ == nullptr) return;
  if (mapped_) CU_LOG_IF_ERROR(api_->cuMemUnmap(ptr_, bytes_));
  if (ptr_) CU_LOG_IF_ERROR(api_->cuMemAddressFree(ptr_, bytes_));
  if (has_handle_) CU_LOG_IF_ERROR(api_->cuMemRelease(handle_));
  mapped_ = false;
  ptr_ = 0;
  has_handle_ = false;
  handle_ = 0;
  bytes_ = 0;
}

VmmAllocation& VmmAllocation::operator=(VmmAllocation&& o) noexcept {
  if (this != &o) {
    Reset();
    api_ = o.api_;
    handle_ = std::exchange(o.handle_, 0);
    has_handle_ = std::exchange(o.has_handle_, false);
    ptr_ = std::exchange(o.ptr_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
    mapped_ = std::exchange(o.mapped_, false);
  }
  return *this;
}

VmmAllocation::~VmmAllocation() { Reset(); }

}  // namespace syncopate::cuda
