// RAII owners for UCX handles; see handles.h.
#include "runtime/ucx/handles.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace syncopate::ucx {

absl::Status UcsError(ucs_status_t status, absl::string_view what) {
  std::string message = absl::StrCat(what, ": ", ucs_status_string(status));
  switch (status) {
    case UCS_OK:
      return absl::OkStatus();
    case UCS_ERR_TIMED_OUT:
      return absl::DeadlineExceededError(message);
    case UCS_ERR_ENDPOINT_TIMEOUT:  // the peer stopped answering: it is gone, not slow
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_REJECTED:
    case UCS_ERR_IO_ERROR:
    case UCS_ERR_NOT_CONNECTED:
      return absl::UnavailableError(message);
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_NO_RESOURCE:
    case UCS_ERR_EXCEEDS_LIMIT:
      return absl::ResourceExhaustedError(message);
    case UCS_ERR_UNSUPPORTED:
    case UCS_ERR_NOT_IMPLEMENTED:
      return absl::UnimplementedError(message);
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_INVALID_ADDR:
      return absl::InvalidArgumentError(message);
    case UCS_ERR_CANCELED:
      return absl::CancelledError(message);
    default:
      return absl::InternalError(message);
  }
}

// ---- Context ----

absl::StatusOr<Context> Context::Create(const Options& options) {
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) return UcsError(status, "ucp_config_read");
  for (const auto& [key, value] : options.config) {
    status = ucp_config_modify(config, key.c_str(), value.c_str());
    if (status != UCS_OK) {
      ucp_config_release(config);
      return UcsError(status, absl::StrCat("ucp_config_modify(", key, "=", value, ")"));
    }
  }
  ucp_params_t params = {};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                      UCP_PARAM_FIELD_NAME;
  params.features = options.features;
  // One worker per context, driven by one thread: no context-level locking needed.
  params.mt_workers_shared = 0;
  params.name = options.name.c_str();
  ucp_context_h h = nullptr;
  status = ucp_init(&params, config, &h);
  ucp_config_release(config);
  if (status != UCS_OK) return UcsError(status, "ucp_init");
  return Context(h);
}

Context& Context::operator=(Context&& other) noexcept {
  if (this != &other) {
    if (h_ != nullptr) ucp_cleanup(h_);
    h_ = std::exchange(other.h_, nullptr);
  }
  return *this;
}

Context::~Context() {
  if (h_ != nullptr) ucp_cleanup(h_);
}

absl::StatusOr<uint64_t> Context::MemoryTypes() const {
  ucp_context_attr_t attr = {};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  ucs_status_t status = ucp_context_query(h_, &attr);
  if (status != UCS_OK) return UcsError(status, "ucp_context_query(MEMORY_TYPES)");
  return attr.memory_types;
}

// ---- Worker ----

absl::StatusOr<Worker> Worker::Create(const Context& context, ucs_thread_mode_t mode) {
  ucp_worker_params_t params = {};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = mode;
  ucp_worker_h h = nullptr;
  ucs_status_t status = ucp_worker_create(context.get(), &params, &h);
  if (status != UCS_OK) return UcsError(status, "ucp_worker_create");
  return Worker(h);
}

Worker& Worker::operator=(Worker&& other) noexcept {
  if (this != &other) {
    if (h_ != nullptr) ucp_worker_destroy(h_);
    h_ = std::exchange(other.h_, nullptr);
  }
  return *this;
}

Worker::~Worker() {
  if (h_ != nullptr) ucp_worker_destroy(h_);
}

// ---- WorkerAddress ----

absl::StatusOr<WorkerAddress> WorkerAddress::Query(const Worker& worker) {
  ucp_address_t* addr = nullptr;
  size_t size = 0;
  ucs_status_t status = ucp_worker_get_address(worker.get(), &addr, &size);
  if (status != UCS_OK) return UcsError(status, "ucp_worker_get_address");
  WorkerAddress out;
  out.worker_ = worker.get();
  out.addr_ = addr;
  out.size_ = size;
  return out;
}

void WorkerAddress::Release() {
  if (addr_ != nullptr) ucp_worker_release_address(worker_, addr_);
  addr_ = nullptr;
  size_ = 0;
}

WorkerAddress& WorkerAddress::operator=(WorkerAddress&& other) noexcept {
  if (this != &other) {
    Release();
    worker_ = std::exchange(other.worker_, nullptr);
    addr_ = std::exchange(other.addr_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

WorkerAddress::~WorkerAddress() { Release(); }

// ---- Endpoint ----

absl::StatusOr<Endpoint> Endpoint::Create(const Worker& worker, absl::string_view remote_address,
                                          ucp_err_handler_cb_t on_error, void* error_arg,
                                          absl::string_view name) {
  std::string name_z(name);
  ucp_ep_params_t params = {};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_NAME;
  params.address = reinterpret_cast<const ucp_address_t*>(remote_address.data());
  // PEER mode: a dead or unreachable peer completes outstanding requests with an error and calls
  // `on_error` instead of leaving them pending forever.
  params.err_mode = on_error != nullptr ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  if (on_error != nullptr) {
    params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.err_handler.cb = on_error;
    params.err_handler.arg = error_arg;
  }
  params.name = name_z.c_str();
  ucp_ep_h h = nullptr;
  ucs_status_t status = ucp_ep_create(worker.get(), &params, &h);
  if (status != UCS_OK) return UcsError(status, absl::StrCat("ucp_ep_create(", name, ")"));
  Endpoint out;
  out.worker_ = worker.get();
  out.h_ = h;
  return out;
}

ucs_status_ptr_t Endpoint::StartClose(bool force) {
  if (h_ == nullptr) return nullptr;
  ucp_ep_h ep = std::exchange(h_, nullptr);
  ucp_request_param_t param = {};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  return ucp_ep_close_nbx(ep, &param);
}

absl::Status Endpoint::Close(bool force, absl::Duration timeout) {
  if (h_ == nullptr) return absl::OkStatus();
  ucs_status_ptr_t request = StartClose(force);
  if (request == nullptr) return absl::OkStatus();
  if (UCS_PTR_IS_ERR(request)) {
    return UcsError(UCS_PTR_STATUS(request), force ? "ucp_ep_close_nbx(force)"
                                                   : "ucp_ep_close_nbx(flush)");
  }
  const absl::Time deadline = absl::Now() + timeout;
  ucs_status_t status = UCS_INPROGRESS;
  while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) {
    if (ucp_worker_progress(worker_) == 0) {
      if (absl::Now() > deadline) break;
      std::this_thread::yield();
    }
  }
  ucp_request_free(request);  // UCX finishes an unfinished close itself, at worker destroy
  if (status == UCS_INPROGRESS) {
    return absl::DeadlineExceededError(
        absl::StrCat("ucp_ep_close_nbx did not finish within ", absl::FormatDuration(timeout)));
  }
  // A peer that already failed makes a flush-close end with its error; the endpoint is gone
  // either way, which is what close is for.
  if (status != UCS_OK && status != UCS_ERR_CANCELED && status != UCS_ERR_CONNECTION_RESET &&
      status != UCS_ERR_ENDPOINT_TIMEOUT) {
    return UcsError(status, "ucp_ep_close_nbx");
  }
  return absl::OkStatus();
}

Endpoint& Endpoint::operator=(Endpoint&& other) noexcept {
  if (this != &other) {
    if (h_ != nullptr) {
      absl::Status status = Close(/*force=*/true, absl::Seconds(1));
      if (!status.ok()) spdlog::warn("ucx endpoint: {}", status.ToString());
    }
    worker_ = std::exchange(other.worker_, nullptr);
    h_ = std::exchange(other.h_, nullptr);
  }
  return *this;
}

Endpoint::~Endpoint() {
  if (h_ != nullptr) {
    absl::Status status = Close(/*force=*/true, absl::Seconds(1));
    if (!status.ok()) spdlog::warn("ucx endpoint: {}", status.ToString());
  }
}

// ---- MemHandle ----

absl::StatusOr<MemHandle> MemHandle::Map(const Context& context, void* address, size_t length,
                                         ucs_memory_type_t memory_type) {
  ucp_mem_map_params_t params = {};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
  params.address = address;
  params.length = length;
  params.memory_type = memory_type;
  ucp_mem_h h = nullptr;
  ucs_status_t status = ucp_mem_map(context.get(), &params, &h);
  if (status != UCS_OK) {
    return UcsError(status, absl::StrCat("ucp_mem_map(", length, " bytes, memory type ",
                                         ucs_memory_type_names[memory_type], ")"));
  }
  MemHandle out;
  out.context_ = context.get();
  out.h_ = h;
  out.address_ = address;
  out.length_ = length;
  return out;
}

absl::StatusOr<MemHandle> MemHandle::Allocate(const Context& context, size_t length) {
  ucp_mem_map_params_t params = {};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  params.address = nullptr;
  params.length = length;
  params.flags = UCP_MEM_MAP_ALLOCATE;
  ucp_mem_h h = nullptr;
  ucs_status_t status = ucp_mem_map(context.get(), &params, &h);
  if (status != UCS_OK) {
    return UcsError(status, absl::StrCat("ucp_mem_map(allocate ", length, " bytes)"));
  }
  ucp_mem_attr_t attr = {};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  status = ucp_mem_query(h, &attr);
  if (status != UCS_OK) {
    ucp_mem_unmap(context.get(), h);
    return UcsError(status, "ucp_mem_query");
  }
  MemHandle out;
  out.context_ = context.get();
  out.h_ = h;
  out.address_ = attr.address;
  out.length_ = length;
  return out;
}

void MemHandle::Release() {
  if (h_ != nullptr) {
    ucs_status_t status = ucp_mem_unmap(context_, h_);
    if (status != UCS_OK) spdlog::warn("ucp_mem_unmap: {}", ucs_status_string(status));
  }
  h_ = nullptr;
  address_ = nullptr;
  length_ = 0;
}

MemHandle& MemHandle::operator=(MemHandle&& other) noexcept {
  if (this != &other) {
    Release();
    context_ = std::exchange(other.context_, nullptr);
    h_ = std::exchange(other.h_, nullptr);
    address_ = std::exchange(other.address_, nullptr);
    length_ = std::exchange(other.length_, 0);
  }
  return *this;
}

MemHandle::~MemHandle() { Release(); }

// ---- RkeyBuffer ----

absl::StatusOr<RkeyBuffer> RkeyBuffer::Pack(const Context& context, const MemHandle& memh) {
  void* data = nullptr;
  size_t size = 0;
  ucs_status_t status = ucp_rkey_pack(context.get(), memh.get(), &data, &size);
  if (status != UCS_OK) return UcsError(status, "ucp_rkey_pack");
  RkeyBuffer out;
  out.data_ = data;
  out.size_ = size;
  return out;
}

RkeyBuffer& RkeyBuffer::operator=(RkeyBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ucp_rkey_buffer_release(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

RkeyBuffer::~RkeyBuffer() {
  if (data_ != nullptr) ucp_rkey_buffer_release(data_);
}

// ---- Rkey ----

absl::StatusOr<Rkey> Rkey::Unpack(const Endpoint& ep, absl::string_view packed) {
  ucp_rkey_h h = nullptr;
  ucs_status_t status = ucp_ep_rkey_unpack(ep.get(), packed.data(), &h);
  if (status != UCS_OK) return UcsError(status, "ucp_ep_rkey_unpack");
  return Rkey(h);
}

Rkey& Rkey::operator=(Rkey&& other) noexcept {
  if (this != &other) {
    if (h_ != nullptr) ucp_rkey_destroy(h_);
    h_ = std::exchange(other.h_, nullptr);
  }
  return *this;
}

Rkey::~Rkey() {
  if (h_ != nullptr) ucp_rkey_destroy(h_);
}

}  // namespace syncopate::ucx
