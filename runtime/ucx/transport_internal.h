// UcxTransport's internal state, shared by its implementation files (transport.h says which part
// lives where); nothing outside runtime/ucx/transport*.cc includes this. Everything marked
// "worker thread" is touched only on the progress thread, which owns every UCX handle.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/ucx/handles.h"
#include "runtime/ucx/peer_liveness.h"
#include "runtime/ucx/transport.h"

namespace syncopate::ucx {

struct Completion::State {
  std::atomic<bool> done{false};
  absl::Status status;  // written before `done` is set (release)
  int peer = -1;
  uint64_t word = 0;  // the signal value being put, or the word read by GetWord
  // Worker thread only:
  std::shared_ptr<State> self;  // keeps the state alive while UCX holds a pointer to it
  std::function<void(State*, ucs_status_t)> next;  // continuation of the pending request
  const char* step = "";                           // the request in flight, for errors
};

// A region this rank exposes (RegisterMemory, AllocateMemory); its index is its id.
struct LocalRegion {
  std::string name;
  MemoryKind kind = MemoryKind::kHost;
  MemHandle memh;
  RkeyBuffer rkey;
};

// A peer's region as its transport card described it, with the key unpacked for its endpoint.
struct RemoteRegion {
  std::string name;
  uint64_t address = 0;
  uint64_t size = 0;
  Rkey rkey;
};

// What a rank tells every other one in Connect (transport_connect.cc encodes and decodes it).
struct PeerCard {
  std::string label;  // "host pid 812", for PeerName
  ProcessIdentity identity;
  std::string address;  // UCX worker address
  struct Region {
    std::string name;
    uint64_t address = 0;
    uint64_t size = 0;
    std::string rkey;  // packed
  };
  std::vector<Region> regions;
};

// One peer's endpoint and remote regions; worker thread. Also the argument of its endpoint's
// error handler (OnEndpointError).
struct PeerConn {
  UcxTransport* transport = nullptr;
  int rank = -1;
  Endpoint ep;
  bool closed = false;
  std::vector<RemoteRegion> regions;
  const PeerLiveness* liveness = nullptr;  // the transport's, to name an exit as such
  // This rank's word that the peer sets before it closes its endpoints (Shutdown), and whether
  // this rank is closing its own: an endpoint error after either is the end of the connection,
  // not a failure, and is said so without a warning.
  uint64_t* goodbye = nullptr;
  const bool* closing = nullptr;
};

// Error handler of every endpoint in PEER mode (transport_failure.cc); worker thread.
void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);

struct UcxTransport::Impl {
  // Worker thread only (after the thread started):
  Context context;
  Worker worker;
  std::vector<LocalRegion> regions;
  std::vector<std::unique_ptr<PeerConn>> peers;  // by rank; nullptr for this rank
  absl::flat_hash_set<Completion::State*> live;  // posted, not finished
  bool closing = false;
  // Same-host peers' processes (set by Connect, dropped when teardown starts), checked every
  // kLivenessInterval by the progress loop.
  PeerLiveness liveness;
  absl::Time next_liveness_check = absl::InfinitePast();

  std::thread thread;
  absl::Mutex mu;
  std::vector<std::function<void()>> queue ABSL_GUARDED_BY(mu);
  std::atomic<bool> has_work{false};
  std::atomic<bool> stop{false};

  absl::Mutex shutdown_mu;
  std::optional<absl::Status> shutdown_status ABSL_GUARDED_BY(shutdown_mu);

  // ---- Progress thread (transport.cc) ----
  // Creates the context and worker on the thread that drives them; sets t's memory_types_.
  absl::Status Init(UcxTransport& t);
  // Runs commands, progresses the worker and watches peers' processes until `stop`.
  void ProgressLoop(UcxTransport& t);
  void Enqueue(std::function<void()> fn);
  // Runs `fn` on the worker thread and waits for it (setup and teardown steps).
  absl::Status RunSync(std::function<absl::Status()> fn, absl::Time deadline);
  // Runs the queued commands; whether there were any. Worker thread.
  bool DrainQueue();

  // ---- Memory (transport_memory.cc) ----
  // Appends a local region whose memory `make` maps or allocates; its index is its id. The
  // handles are made on the worker thread, which owns them.
  absl::StatusOr<int> AddRegion(std::string name, MemoryKind kind,
                                absl::FunctionRef<absl::StatusOr<MemHandle>()> make);
};

}  // namespace syncopate::ucx
