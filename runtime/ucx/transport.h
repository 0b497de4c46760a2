// UcxTransport: one process's UCX chunk transport. It owns a UCX context and worker, a progress
// thread, an endpoint per peer (error handling mode PEER), the memory regions it exposes and the
// remote keys of every peer's regions. It moves chunks with RMA: a chunk is put segment by
// segment, then a signal word on the destination is written, ordered after the data, so arrival
// sets the destination's flag exactly as the other backends do.
//
// Threading model (chosen so UCX needs no locks): every UCX call happens on the transport's
// progress thread; the worker runs in UCS_THREAD_MODE_SINGLE. Public methods post commands to
// that thread and return Completion handles; any thread may post and wait. The progress thread
// polls (yielding) while work is in flight or data arrived recently and sleeps in short steps
// once idle (targets of tcp RMA need their worker progressed to apply incoming puts). The cost
// of this design is one thread handoff per operation, visible in small-chunk latency.
//
// Faults: three things mark a peer failed. (1) Its process exited, for peers on this host (same
// kernel boot and pid namespace; any UCX transport): Connect opens a pidfd per such peer and the
// progress thread polls them every millisecond (peer_liveness.h), so waits on a dead same-host
// peer fail within about a millisecond, not at their deadline. (2) An endpoint error
// (ErrorHandling::kPeer: peer process died, connection dropped), named as an exit when the
// peer's pidfd says so within 20 ms (a dead process's sockets close just before the kernel
// reports its exit). (3) A Wait that passes its deadline (peer stalled, or a peer on another
// host died where UCX cannot tell). Whatever the cause, every later operation to that peer
// fails at once with an error naming the peer ("rank 3 (host pid 812) failed: process
// exited"). Teardown stops watching first (peers exit as they finish; that is no fault),
// force-closes every endpoint once any peer failed, and is bounded by
// Options::teardown_timeout; a peer that exited after its work was done thus makes teardown
// forced, never failed.
//
// Thread-safety: all public methods are thread-safe except Register*/Allocate*/Connect, which
// one thread calls during setup, before any transfer.
//
// Where the parts live (one class; its internal state, Impl and the per-peer structs, is in
// transport_internal.h): transport.cc construction and the progress thread; transport_memory.cc
// memory kinds, region registration and sizes; transport_connect.cc Connect (card exchange,
// endpoints, remote keys); transport_failure.cc peer naming, failure state and the endpoint
// error handler; transport_ops.cc the data path (Post, puts, signals, gets, flushes, Wait);
// transport_shutdown.cc Shutdown and DropConnections.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/ucx/bootstrap.h"

namespace syncopate::ucx {

struct PeerCard;  // transport_internal.h
struct PeerConn;  // transport_internal.h

enum class MemoryKind : uint8_t { kHost, kCuda };

// How a chunk's signal put is ordered after its data puts.
enum class SignalOrdering : uint8_t {
  // ucp_ep_flush_nbx (remote completion of the data) then the signal put. Always correct, one
  // extra round trip per chunk; chunks of one peer still pipeline (the next chunk's data is
  // posted while this chunk's flush is in flight).
  kFlush,
  // ucp_worker_fence between data and signal: no round trip. Relies on UCX ordering the fence
  // across every lane the data used; measured in the benchmark, not the default.
  kFence,
};

// Endpoint error handling. kPeer (the default, and what every fault test over tcp relies on):
// UCX reports a dead or disconnected peer through the endpoint's error callback. kNone exists
// because Debian's UCX 1.13 shared-memory transports (posix, sysv) have no peer failure handler,
// so UCX_TLS=shm with kPeer finds no usable lane; with kNone UCX reports nothing (a dead peer's
// puts may even "succeed" into its orphaned segment) and teardown force-closes. Shared memory
// implies a peer on this host, whose exit the pidfd watch (see Faults) reports at once; what it
// cannot see (a stopped peer, a pidfd-less kernel) is caught by deadlines.
enum class ErrorHandling : uint8_t { kPeer, kNone };

struct TransportOptions {
  std::string name = "syncopate";
  // UCX configuration on top of the UCX_* environment, e.g. {{"TLS", "tcp"}}.
  std::vector<std::pair<std::string, std::string>> ucx_config;
  SignalOrdering ordering = SignalOrdering::kFlush;
  ErrorHandling error_handling = ErrorHandling::kPeer;
  // Upper bound on closing every endpoint at teardown.
  absl::Duration teardown_timeout = absl::Seconds(2);
  // Idle progress: keep polling this long after the last activity (or while operations are in
  // flight), then sleep in 50 us steps until a command or traffic arrives.
  absl::Duration spin_window = absl::Milliseconds(20);
};

// One contiguous piece of a chunk: bytes [local_offset, +length) of the local region and
// [remote_offset, +length) of the remote region.
struct Segment {
  uint64_t local_offset = 0;
  uint64_t remote_offset = 0;
  uint64_t length = 0;
};

// A word on a peer: byte `offset` of region `region`.
struct RemoteWord {
  int region = -1;
  uint64_t offset = 0;
};

// Handle to one asynchronous operation. Copyable; wait with UcxTransport::Wait.
class Completion {
 public:
  struct State;
  Completion() = default;
  explicit Completion(std::shared_ptr<State> state) : state_(std::move(state)) {}
  bool done() const;
  const std::shared_ptr<State>& state() const { return state_; }

 private:
  std::shared_ptr<State> state_;
};

class UcxTransport {
 public:
  static absl::StatusOr<std::unique_ptr<UcxTransport>> Create(const TransportOptions& options);
  ~UcxTransport();  // Shutdown(), logging its error
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  // Whether UCX here can reach memory of `kind` directly (UCP_ATTR_FIELD_MEMORY_TYPES). Where it
  // cannot (Debian's build: host only), device chunks go through StagedPipeline.
  bool SupportsMemoryKind(MemoryKind kind) const;
  uint64_t memory_types() const { return memory_types_; }

  // ---- Setup (before Connect; every rank registers the same names in the same order) ----
  // Registers caller memory; returns the region id (dense, in registration order).
  absl::StatusOr<int> RegisterMemory(std::string name, void* address, size_t size,
                                     MemoryKind kind);
  // Allocates host memory through UCX (reachable by shared-memory transports without copies).
  absl::StatusOr<int> AllocateMemory(std::string name, size_t size);
  void* region_address(int region) const;
  size_t region_size(int region) const;

  // Exchanges worker addresses and region tables with every rank through `bootstrap`, creates an
  // endpoint to every peer and waits until each is wired up. Errors name unreachable peers.
  absl::Status Connect(Bootstrap& bootstrap, absl::Time deadline);

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  // "rank 3 (host pid 812)": how errors name a peer.
  std::string PeerName(int peer) const;
  size_t remote_region_size(int peer, int region) const;

  // ---- Transfers (after Connect) ----
  // Puts `segments` of local region `local_region` into region `remote_region` of `peer`, then,
  // ordered after the data, writes the 8-byte `value` to `signal` on the peer. Done when the
  // signal put completed locally (the data is then remotely complete).
  Completion PutWithSignal(int peer, int local_region, int remote_region,
                           std::vector<Segment> segments, RemoteWord signal, uint64_t value);
  // Puts data only (no signal); done on remote completion (includes a flush).
  Completion Put(int peer, int local_region, int remote_region, std::vector<Segment> segments);
  // Writes `value` to `word` on `peer`, ordered after everything posted to that peer before.
  Completion PutWord(int peer, RemoteWord word, uint64_t value);
  // Reads remote bytes into a local region (segment.local_offset <- segment.remote_offset).
  Completion Get(int peer, int local_region, int remote_region, std::vector<Segment> segments);
  // Reads an 8-byte word from `peer`; WordResult() gives the value once done.
  Completion GetWord(int peer, RemoteWord word);
  static uint64_t WordResult(const Completion& completion);
  // Remote completion of everything posted to `peer` so far.
  Completion Flush(int peer);

  // Waits for `completion`. Fails at once when the peer failed; at `deadline` marks the peer
  // stalled (failed) and returns DeadlineExceeded naming it. `what` describes the operation.
  absl::Status Wait(const Completion& completion, absl::Time deadline, absl::string_view what);

  // ---- Failures ----
  absl::Status PeerStatus(int peer) const;
  // The first peer that failed, with why; nullopt while every peer is healthy.
  std::optional<std::pair<int, absl::Status>> FirstFailure() const;
  // `expected`: the peer's connection ended as connections end (it shut down, or we are): the
  // peer is failed for later operations all the same, but nothing is logged above debug.
  void MarkPeerFailed(int peer, const absl::Status& why, bool expected = false);
  // Force-closes every endpoint now (abort, fault injection); later operations fail.
  void DropConnections();
  // Tells every healthy peer it is shutting down (a word in their memory, so their endpoint
  // error afterwards reads "shut down its transport", without a warning; waits up to a second
  // for them to acknowledge), closes endpoints (flushing to peers that acknowledged while no
  // peer broke, forcing otherwise), releases remote keys, memory, worker and context; stops the
  // progress thread. Bounded by teardown_timeout plus a second plus a small margin. Idempotent.
  absl::Status Shutdown();

  // Operations posted but not completed (for tests: zero after teardown means none leaked).
  int64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

 private:
  struct Impl;
  explicit UcxTransport(const TransportOptions& options);

  // Data path (transport_ops.cc): Post runs `start` on the progress thread unless the peer is
  // unknown or failed; Finish (worker thread) completes an operation once.
  Completion Post(int peer, std::function<void(Completion::State*)> start);
  void Finish(Completion::State* state, absl::Status status);
  // Connect's steps (transport_connect.cc); the last two run on the progress thread.
  absl::Status CheckRegionTables(const std::vector<PeerCard>& cards) const;
  absl::Status CreateEndpoints(const std::vector<PeerCard>& cards);
  absl::StatusOr<std::unique_ptr<PeerConn>> ConnectPeer(int peer, const PeerCard& card);
  // Shutdown's work on the progress thread (transport_shutdown.cc).
  absl::Status TeardownOnWorker();

  const TransportOptions options_;
  std::unique_ptr<Impl> impl_;
  uint64_t memory_types_ = 0;
  int rank_ = -1;
  int world_size_ = 0;
  int goodbye_region_ = -1;  // allocated by Connect
  std::vector<std::string> labels_;  // per rank, set by Connect
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int> num_failed_{0};  // peers failed for any reason (ops to them fail)
  std::atomic<int> num_broken_{0};  // of those, failures other than a peer's clean shutdown
  mutable absl::Mutex fail_mu_;
  std::vector<absl::Status> peer_status_ ABSL_GUARDED_BY(fail_mu_);
  std::optional<std::pair<int, absl::Status>> first_failure_ ABSL_GUARDED_BY(fail_mu_);
};

}  // namespace syncopate::ucx
