// Move-only RAII owners for every UCX (ucp) handle Syncopate uses: context, worker, worker
// address, endpoint, registered memory (memh), packed remote key buffer and unpacked remote key.
// This is the only place these handles are created and released.
//
// Thread-safety: none. Each wrapper is owned by one thread at a time; the transport creates and
// destroys them all on its progress thread (the worker runs in UCS_THREAD_MODE_SINGLE). Destructors
// never throw; failures while releasing are logged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ucp/api/ucp.h>

#include "absl/strings/string_view.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace syncopate::ucx {

// absl::Status for a failed UCX call: `what` names the call and its subject, the message adds
// UCX's own text ("Connection reset by remote peer"). Codes: timeouts -> DeadlineExceeded,
// peer/connection failures (including endpoint timeouts) -> Unavailable, no resources -> ResourceExhausted, unsupported ->
// Unimplemented, invalid params -> InvalidArgument, canceled -> Cancelled, others Internal.
absl::Status UcsError(ucs_status_t status, absl::string_view what);

class Context {
 public:
  struct Options {
    uint64_t features = UCP_FEATURE_RMA | UCP_FEATURE_AM;
    std::string name = "syncopate";
    // Variables applied on top of the UCX_* environment ("TLS" -> "tcp"), e.g. for tests.
    std::vector<std::pair<std::string, std::string>> config;
  };
  static absl::StatusOr<Context> Create(const Options& options);

  Context() = default;
  Context(Context&& other) noexcept : h_(std::exchange(other.h_, nullptr)) {}
  Context& operator=(Context&& other) noexcept;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();

  ucp_context_h get() const { return h_; }
  // Bitmask of UCS_MEMORY_TYPE_* values UCX can access (UCP_ATTR_FIELD_MEMORY_TYPES).
  absl::StatusOr<uint64_t> MemoryTypes() const;

 private:
  explicit Context(ucp_context_h h) : h_(h) {}
  ucp_context_h h_ = nullptr;
};

class Worker {
 public:
  static absl::StatusOr<Worker> Create(const Context& context, ucs_thread_mode_t mode);

  Worker() = default;
  Worker(Worker&& other) noexcept : h_(std::exchange(other.h_, nullptr)) {}
  Worker& operator=(Worker&& other) noexcept;
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker();

  ucp_worker_h get() const { return h_; }

 private:
  explicit Worker(ucp_worker_h h) : h_(h) {}
  ucp_worker_h h_ = nullptr;
};

// The worker's packed address, to hand to peers out of band.
class WorkerAddress {
 public:
  static absl::StatusOr<WorkerAddress> Query(const Worker& worker);

  WorkerAddress() = default;
  WorkerAddress(WorkerAddress&& other) noexcept
      : worker_(std::exchange(other.worker_, nullptr)),
        addr_(std::exchange(other.addr_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  WorkerAddress& operator=(WorkerAddress&& other) noexcept;
  WorkerAddress(const WorkerAddress&) = delete;
  WorkerAddress& operator=(const WorkerAddress&) = delete;
  ~WorkerAddress();

  absl::string_view bytes() const {
    return {reinterpret_cast<const char*>(addr_), size_};
  }

 private:
  void Release();
  ucp_worker_h worker_ = nullptr;
  ucp_address_t* addr_ = nullptr;
  size_t size_ = 0;
};

// An endpoint to a peer worker, error handling mode PEER. Close() is the orderly way out; the
// destructor force-closes an endpoint that was not closed, progressing the worker for a bounded
// time (UCX needs progress to finish a close) and logging when that bound is hit.
class Endpoint {
 public:
  // With `on_error` set: error handling mode PEER, and `on_error(arg, ep, status)` runs on the
  // worker's progress thread when the peer fails. Without: mode NONE (for transports that have
  // no peer failure support).
  static absl::StatusOr<Endpoint> Create(const Worker& worker, absl::string_view remote_address,
                                         ucp_err_handler_cb_t on_error, void* error_arg,
                                         absl::string_view name);

  Endpoint() = default;
  Endpoint(Endpoint&& other) noexcept
      : worker_(std::exchange(other.worker_, nullptr)), h_(std::exchange(other.h_, nullptr)) {}
  Endpoint& operator=(Endpoint&& other) noexcept;
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;
  ~Endpoint();

  ucp_ep_h get() const { return h_; }
  // Closes the endpoint: flushes outstanding operations first unless `force` (a failed or
  // stalled peer). Progresses the worker until done or `timeout`; the handle is released either
  // way (on timeout UCX finishes the close when the worker is destroyed).
  absl::Status Close(bool force, absl::Duration timeout);
  // Starts closing and releases the handle; the caller progresses the worker until the returned
  // request (nullptr: already closed; UCS_PTR_IS_ERR: failed) completes, then frees it. Used to
  // close many endpoints under one time bound.
  ucs_status_ptr_t StartClose(bool force);

 private:
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h h_ = nullptr;
};

// Memory registered with (or allocated by) UCX for RMA.
class MemHandle {
 public:
  // Registers [address, address + length). `memory_type` is a ucs_memory_type_t.
  static absl::StatusOr<MemHandle> Map(const Context& context, void* address, size_t length,
                                       ucs_memory_type_t memory_type);
  // Allocates `length` bytes of host memory through UCX (shared-memory transports can reach it
  // directly, so puts need no copy through a bounce buffer).
  static absl::StatusOr<MemHandle> Allocate(const Context& context, size_t length);

  MemHandle() = default;
  MemHandle(MemHandle&& other) noexcept
      : context_(std::exchange(other.context_, nullptr)),
        h_(std::exchange(other.h_, nullptr)),
        address_(std::exchange(other.address_, nullptr)),
        length_(std::exchange(other.length_, 0)) {}
  MemHandle& operator=(MemHandle&& other) noexcept;
  MemHandle(const MemHandle&) = delete;
  MemHandle& operator=(const MemHandle&) = delete;
  ~MemHandle();

  ucp_mem_h get() const { return h_; }
  void* address() const { return address_; }
  size_t length() const { return length_; }

 private:
  void Release();
  ucp_context_h context_ = nullptr;
  ucp_mem_h h_ = nullptr;
  void* address_ = nullptr;
  size_t length_ = 0;
};

// A packed remote key: bytes a peer unpacks into an Rkey to reach a MemHandle's memory.
class RkeyBuffer {
 public:
  static absl::StatusOr<RkeyBuffer> Pack(const Context& context, const MemHandle& memh);

  RkeyBuffer() = default;
  RkeyBuffer(RkeyBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  RkeyBuffer& operator=(RkeyBuffer&& other) noexcept;
  RkeyBuffer(const RkeyBuffer&) = delete;
  RkeyBuffer& operator=(const RkeyBuffer&) = delete;
  ~RkeyBuffer();

  absl::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// An unpacked remote key, valid with the endpoint it was unpacked on. Destroy before that
// endpoint is closed.
class Rkey {
 public:
  static absl::StatusOr<Rkey> Unpack(const Endpoint& ep, absl::string_view packed);

  Rkey() = default;
  Rkey(Rkey&& other) noexcept : h_(std::exchange(other.h_, nullptr)) {}
  Rkey& operator=(Rkey&& other) noexcept;
  Rkey(const Rkey&) = delete;
  Rkey& operator=(const Rkey&) = delete;
  ~Rkey();

  ucp_rkey_h get() const { return h_; }

 private:
  explicit Rkey(ucp_rkey_h h) : h_(h) {}
  ucp_rkey_h h_ = nullptr;
};

}  // namespace syncopate::ucx
