// UcxTransport: see transport.h. Everything below marked "worker thread" runs only on the
// progress thread, which owns every UCX handle.
#include "runtime/ucx/transport.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "runtime/base/status_macros.h"
#include "runtime/ucx/backoff.h"
#include "runtime/ucx/handles.h"
#include "runtime/ucx/peer_liveness.h"
#include "runtime/ucx/wire.h"
#include "spdlog/spdlog.h"

namespace syncopate::ucx {

struct Completion::State {
  std::atomic<bool> done{false};
  absl::Status status;  // written before `done` is set (release)
  int peer = -1;
  uint64_t word = 0;  // the signal value being put, or the word read by GetWord
  // Worker thread only:
  std::shared_ptr<State> self;  // keeps the state alive while UCX holds a pointer to it
  std::function<void(State*, ucs_status_t)> next;  // continuation of the pending request
  const char* step = "";                            // the request in flight, for errors
};

bool Completion::done() const {
  return state_ != nullptr && state_->done.load(std::memory_order_acquire);
}

namespace {

// How often the progress loop polls same-host peers' pidfds: one poll(2) per interval keeps the
// idle and busy loops as cheap as before, and a peer's exit still fails its waits within about
// a millisecond rather than at their deadline.
constexpr absl::Duration kLivenessInterval = absl::Milliseconds(1);

struct LocalRegion {
  std::string name;
  MemoryKind kind = MemoryKind::kHost;
  MemHandle memh;
  RkeyBuffer rkey;
};

struct RemoteRegion {
  std::string name;
  uint64_t address = 0;
  uint64_t size = 0;
  Rkey rkey;
};

std::string LocalLabel() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "?");
  return absl::StrFormat("%s pid %d", host, getpid());
}

}  // namespace

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

namespace {

// How long an endpoint error of a watched same-host peer waits for the peer's pidfd. A killed
// process's sockets close before the kernel reports its exit (UCX saw the error up to ~0.4 ms
// earlier in tests), so without a grace the error would name only the symptom. Stalls the
// progress thread only when the peer is alive (a dropped connection), once per peer.
constexpr absl::Duration kExitGrace = absl::Milliseconds(20);

// How long Shutdown waits for peers to acknowledge its goodbye word: a healthy peer's worker
// does within microseconds to milliseconds; one that does not is treated as gone.
constexpr absl::Duration kGoodbyeWait = absl::Seconds(1);

// Error handler of every endpoint (PEER mode); runs on the worker thread. When the peer's
// process has exited, say so: that is the cause, UCX's status ("Endpoint timeout",
// "Connection reset by remote peer") only its symptom.
void OnEndpointError(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  auto* pc = static_cast<PeerConn*>(arg);
  absl::Status why = UcsError(status, "endpoint error");
  const bool said_goodbye =
      pc->goodbye != nullptr &&
      std::atomic_ref<uint64_t>(*pc->goodbye).load(std::memory_order_acquire) != 0;
  // While we close our own endpoints every error is the end of the connection, even a peer that
  // crashed in that window: nothing of ours depends on it any more, so nothing is reported.
  if (said_goodbye || (pc->closing != nullptr && *pc->closing)) {
    pc->transport->MarkPeerFailed(
        pc->rank,
        absl::UnavailableError(said_goodbye ? "shut down its transport" : "connection closed"),
        /*expected=*/true);
    return;
  }
  // An already failed peer (dropped by us, say) keeps its first reason: no grace to wait out.
  if (pc->liveness != nullptr && pc->transport->PeerStatus(pc->rank).ok() &&
      pc->liveness->HasExited(pc->rank, kExitGrace)) {
    why = absl::UnavailableError(absl::StrCat("process exited (", why.message(), ")"));
  }
  pc->transport->MarkPeerFailed(pc->rank, std::move(why));
}

}  // namespace

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

  void Enqueue(std::function<void()> fn) {
    absl::MutexLock lock(&mu);
    queue.push_back(std::move(fn));
    has_work.store(true, std::memory_order_release);
  }

  // Runs `fn` on the worker thread and waits for it (setup and teardown steps).
  absl::Status RunSync(std::function<absl::Status()> fn, absl::Time deadline) {
    auto done = std::make_shared<absl::Notification>();
    auto result = std::make_shared<absl::Status>();
    Enqueue([fn = std::move(fn), done, result] {
      *result = fn();
      done->Notify();
    });
    if (!done->WaitForNotificationWithDeadline(deadline)) {
      return absl::DeadlineExceededError("UCX progress thread did not run a setup step in time");
    }
    return *result;
  }

  // Appends a local region whose memory `make` maps or allocates; its index is its id. The
  // handles are made on the worker thread, which owns them.
  absl::StatusOr<int> AddRegion(std::string name, MemoryKind kind,
                                absl::FunctionRef<absl::StatusOr<MemHandle>()> make) {
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

  bool DrainQueue() {
    if (!has_work.load(std::memory_order_acquire)) return false;
    std::vector<std::function<void()>> batch;
    {
      absl::MutexLock lock(&mu);
      batch.swap(queue);
      has_work.store(false, std::memory_order_relaxed);
    }
    for (auto& fn : batch) fn();
    return true;
  }
};

// ---- Construction, progress thread ----

UcxTransport::UcxTransport(const TransportOptions& options)
    : options_(options), impl_(std::make_unique<Impl>()) {}

absl::StatusOr<std::unique_ptr<UcxTransport>> UcxTransport::Create(
    const TransportOptions& options) {
  std::unique_ptr<UcxTransport> t(new UcxTransport(options));
  Impl* impl = t->impl_.get();
  auto ready = std::make_shared<absl::Notification>();
  auto init_status = std::make_shared<absl::Status>();
  UcxTransport* self = t.get();
  impl->thread = std::thread([self, impl, ready, init_status] {
    // The worker is created on the thread that drives it (UCS_THREAD_MODE_SINGLE).
    absl::Status s = [&]() -> absl::Status {
      Context::Options copts;
      copts.name = self->options_.name;
      copts.features = UCP_FEATURE_RMA;
      copts.config = self->options_.ucx_config;
      ASSIGN_OR_RETURN(impl->context, Context::Create(copts));
      ASSIGN_OR_RETURN(self->memory_types_, impl->context.MemoryTypes());
      ASSIGN_OR_RETURN(impl->worker, Worker::Create(impl->context, UCS_THREAD_MODE_SINGLE));
      return absl::OkStatus();
    }();
    *init_status = s;
    ready->Notify();
    if (!s.ok()) return;
    absl::Time last_active = absl::Now();
    const absl::Duration spin = self->options_.spin_window;
    while (!impl->stop.load(std::memory_order_acquire)) {
      bool ran = impl->DrainQueue();
      if (impl->stop.load(std::memory_order_acquire)) break;  // teardown ran in the queue
      if (!impl->liveness.empty()) {
        if (absl::Time now = absl::Now(); now >= impl->next_liveness_check) {
          impl->next_liveness_check = now + kLivenessInterval;
          for (int r : impl->liveness.Exited()) {
            self->MarkPeerFailed(r, absl::UnavailableError("process exited"));
          }
        }
      }
      unsigned progressed = ucp_worker_progress(impl->worker.get());
      if (ran || progressed != 0) {
        last_active = absl::Now();
        continue;
      }
      // Operations in flight (a flush or a get waits on progress) or recent traffic (a target
      // of tcp RMA applies incoming puts only while progressed): keep polling, yielding the
      // core to whoever else is runnable (these machines share 2 cores).
      if (self->in_flight_.load(std::memory_order_relaxed) > 0 ||
          absl::Now() - last_active < spin) {
        std::this_thread::yield();
        continue;
      }
      // Idle (or waiting on a slow peer): sleep briefly, waking early for new commands.
      absl::MutexLock lock(&impl->mu);
      impl->mu.AwaitWithTimeout(absl::Condition(
                                    +[](std::atomic<bool>* w) { return w->load(); },
                                    &impl->has_work),
                                absl::Microseconds(50));
    }
  });
  ready->WaitForNotification();
  if (!init_status->ok()) {
    impl->thread.join();
    t->impl_->stop = true;
    return *init_status;
  }
  return t;
}

UcxTransport::~UcxTransport() {
  absl::Status s = Shutdown();
  if (!s.ok()) spdlog::warn("ucx transport teardown: {}", s.ToString());
}

bool UcxTransport::SupportsMemoryKind(MemoryKind kind) const {
  ucs_memory_type_t type = kind == MemoryKind::kCuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
  return (memory_types_ & (uint64_t{1} << type)) != 0;
}

// ---- Setup ----

absl::StatusOr<int> UcxTransport::RegisterMemory(std::string name, void* address, size_t size,
                                                 MemoryKind kind) {
  if (!SupportsMemoryKind(kind)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "register '", name, "': this UCX build cannot access ",
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

void* UcxTransport::region_address(int region) const {
  return impl_->regions.at(region).memh.address();
}
size_t UcxTransport::region_size(int region) const {
  return impl_->regions.at(region).memh.length();
}
size_t UcxTransport::remote_region_size(int peer, int region) const {
  return impl_->peers.at(peer)->regions.at(region).size;
}

std::string UcxTransport::PeerName(int peer) const {
  if (peer >= 0 && peer < static_cast<int>(labels_.size())) {
    return absl::StrCat("rank ", peer, " (", labels_[peer], ")");
  }
  return absl::StrCat("rank ", peer);
}

absl::Status UcxTransport::Connect(Bootstrap& bootstrap, absl::Time deadline) {
  rank_ = bootstrap.rank();
  world_size_ = bootstrap.world_size();
  {
    absl::MutexLock lock(&fail_mu_);
    peer_status_.assign(world_size_, absl::OkStatus());
  }
  // 0. One word per rank that peers set when they shut down (see PeerConn::goodbye); every
  // rank adds it here, last, so region ids the caller got stay as they were.
  if (goodbye_region_ < 0) {
    ASSIGN_OR_RETURN(goodbye_region_,
                     AllocateMemory("syncopate.goodbye", sizeof(uint64_t) * world_size_));
  }
  // 1. This rank's card: label, process identity (for same-host liveness), worker address,
  // region table.
  std::string card;
  RETURN_IF_ERROR(impl_->RunSync(
      [&]() -> absl::Status {
        ASSIGN_OR_RETURN(WorkerAddress address, WorkerAddress::Query(impl_->worker));
        WireWriter w;
        w.Bytes(LocalLabel());
        ProcessIdentity::Self().Encode(w);
        w.Bytes(address.bytes());
        w.U64(impl_->regions.size());
        for (const LocalRegion& r : impl_->regions) {
          w.Bytes(r.name);
          w.U64(reinterpret_cast<uint64_t>(r.memh.address()));
          w.U64(r.memh.length());
          w.Bytes(r.rkey.bytes());
        }
        card = w.Take();
        return absl::OkStatus();
      },
      deadline));
  ASSIGN_OR_RETURN(std::vector<std::string> cards, bootstrap.AllGather(card, deadline));

  // 2. Parse every card, then create endpoints and unpack keys on the worker thread.
  struct Card {
    std::string label;
    ProcessIdentity identity;
    std::string address;
    std::vector<std::tuple<std::string, uint64_t, uint64_t, std::string>> regions;
  };
  std::vector<Card> parsed(world_size_);
  for (int r = 0; r < world_size_; ++r) {
    WireReader rd(cards[r], absl::StrCat("rank ", r, "'s transport card"));
    ASSIGN_OR_RETURN(absl::string_view label, rd.Bytes());
    ASSIGN_OR_RETURN(parsed[r].identity, ProcessIdentity::Decode(rd));
    ASSIGN_OR_RETURN(absl::string_view address, rd.Bytes());
    ASSIGN_OR_RETURN(uint64_t n, rd.U64());
    parsed[r].label = std::string(label);
    parsed[r].address = std::string(address);
    for (uint64_t i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(absl::string_view name, rd.Bytes());
      ASSIGN_OR_RETURN(uint64_t addr, rd.U64());
      ASSIGN_OR_RETURN(uint64_t size, rd.U64());
      ASSIGN_OR_RETURN(absl::string_view rkey, rd.Bytes());
      parsed[r].regions.emplace_back(std::string(name), addr, size, std::string(rkey));
    }
  }
  labels_.clear();
  for (const Card& c : parsed) labels_.push_back(c.label);
  for (int r = 0; r < world_size_; ++r) {
    if (parsed[r].regions.size() != impl_->regions.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          PeerName(r), " registered ", parsed[r].regions.size(), " memory regions, rank ", rank_,
          " ", impl_->regions.size(), " (each count includes the transport's goodbye region)"));
    }
    for (size_t i = 0; i < impl_->regions.size(); ++i) {
      if (std::get<0>(parsed[r].regions[i]) != impl_->regions[i].name) {
        return absl::FailedPreconditionError(absl::StrCat(
            PeerName(r), " registered region ", i, " as '", std::get<0>(parsed[r].regions[i]),
            "', rank ", rank_, " as '", impl_->regions[i].name, "'"));
      }
    }
  }
  RETURN_IF_ERROR(impl_->RunSync(
      [&]() -> absl::Status {
        // Watch same-host peers from here on, so a peer that dies while its endpoint is wired
        // up already fails the flushes below. Opened after the exchange, a pidfd is checked
        // against the card's start time (the pid may have been reused meanwhile).
        std::vector<ProcessIdentity> identities;
        for (const Card& c : parsed) identities.push_back(c.identity);
        impl_->liveness = PeerLiveness::Watch(parsed[rank_].identity, identities);
        impl_->next_liveness_check = absl::InfinitePast();
        impl_->peers.clear();
        impl_->peers.resize(world_size_);
        for (int r = 0; r < world_size_; ++r) {
          if (r == rank_) continue;
          auto pc = std::make_unique<PeerConn>();
          pc->transport = this;
          pc->rank = r;
          pc->liveness = &impl_->liveness;
          pc->goodbye = static_cast<uint64_t*>(impl_->regions[goodbye_region_].memh.address()) + r;
          pc->closing = &impl_->closing;
          absl::StatusOr<Endpoint> ep = Endpoint::Create(
              impl_->worker, parsed[r].address,
              options_.error_handling == ErrorHandling::kPeer ? &OnEndpointError : nullptr,
              pc.get(),
              absl::StrCat("rank", rank_, "->rank", r));
          if (!ep.ok()) {
            return absl::Status(ep.status().code(),
                                absl::StrCat("connecting to ", PeerName(r), ": ",
                                             ep.status().message()));
          }
          pc->ep = *std::move(ep);
          for (auto& [name, addr, size, rkey] : parsed[r].regions) {
            RemoteRegion rr;
            rr.name = name;
            rr.address = addr;
            rr.size = size;
            ASSIGN_OR_RETURN(rr.rkey, Rkey::Unpack(pc->ep, rkey));
            pc->regions.push_back(std::move(rr));
          }
          impl_->peers[r] = std::move(pc);
        }
        return absl::OkStatus();
      },
      deadline));
  // 3. A flush to every peer completes only once the endpoint is wired up.
  std::vector<Completion> flushes(world_size_);
  for (int r = 0; r < world_size_; ++r) {
    if (r != rank_) flushes[r] = Flush(r);
  }
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_) continue;
    RETURN_IF_ERROR(Wait(flushes[r], deadline, absl::StrCat("connecting to ", PeerName(r))));
  }
  return absl::OkStatus();
}

// ---- Failures ----

void UcxTransport::MarkPeerFailed(int peer, absl::Status why, bool expected) {
  absl::MutexLock lock(&fail_mu_);
  if (peer < 0 || peer >= static_cast<int>(peer_status_.size()) || !peer_status_[peer].ok()) {
    return;
  }
  absl::Status s(why.code() == absl::StatusCode::kOk ? absl::StatusCode::kUnknown : why.code(),
                 absl::StrCat(PeerName(peer), expected ? ": " : " failed: ", why.message()));
  if (expected) {
    spdlog::debug("rank {}: {}", rank_, std::string(s.message()));
  } else {
    spdlog::warn("rank {}: {}", rank_, std::string(s.message()));
    num_broken_.fetch_add(1, std::memory_order_release);
  }
  peer_status_[peer] = s;
  if (!first_failure_.has_value()) first_failure_.emplace(peer, s);
  num_failed_.fetch_add(1, std::memory_order_release);
}

absl::Status UcxTransport::PeerStatus(int peer) const {
  if (num_failed_.load(std::memory_order_acquire) == 0) return absl::OkStatus();
  absl::MutexLock lock(&fail_mu_);
  if (peer < 0 || peer >= static_cast<int>(peer_status_.size())) return absl::OkStatus();
  return peer_status_[peer];
}

std::optional<std::pair<int, absl::Status>> UcxTransport::FirstFailure() const {
  if (num_failed_.load(std::memory_order_acquire) == 0) return std::nullopt;
  absl::MutexLock lock(&fail_mu_);
  return first_failure_;
}

// ---- Operations ----

namespace {

void OnRequestDone(void* request, ucs_status_t status, void* user_data) {
  auto* s = static_cast<Completion::State*>(user_data);
  ucp_request_free(request);
  auto next = std::move(s->next);
  next(s, status);
}

// Hands the result of a non-blocking call to `next`: now when it completed immediately, else
// from OnRequestDone. `param` must have been built by CallbackParam(s).
void Then(Completion::State* s, ucs_status_ptr_t request, const char* step,
          std::function<void(Completion::State*, ucs_status_t)> next) {
  s->step = step;
  if (request == nullptr) {
    next(s, UCS_OK);
  } else if (UCS_PTR_IS_ERR(request)) {
    next(s, UCS_PTR_STATUS(request));
  } else {
    s->next = std::move(next);
  }
}

ucp_request_param_t CallbackParam(Completion::State* s) {
  ucp_request_param_t p = {};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &OnRequestDone;
  p.user_data = s;
  return p;
}

}  // namespace

void UcxTransport::Finish(Completion::State* s, absl::Status status) {
  if (s->done.load(std::memory_order_relaxed)) return;
  impl_->live.erase(s);
  s->status = std::move(status);
  std::shared_ptr<Completion::State> keep = std::move(s->self);
  s->done.store(true, std::memory_order_release);
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
}

Completion UcxTransport::Post(int peer, std::function<void(Completion::State*)> start) {
  auto state = std::make_shared<Completion::State>();
  state->peer = peer;
  Completion c(state);
  auto fail_now = [&](absl::Status s) {
    state->status = std::move(s);
    state->done.store(true, std::memory_order_release);
    return c;
  };
  if (peer < 0 || peer >= world_size_ || peer == rank_) {
    return fail_now(absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, ": no UCX peer ", peer, " (world size ", world_size_, ")")));
  }
  if (absl::Status s = PeerStatus(peer); !s.ok()) return fail_now(s);
  state->self = state;
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  impl_->Enqueue([this, s = state.get(), start = std::move(start)] {
    PeerConn* pc = impl_->peers.empty() ? nullptr : impl_->peers[s->peer].get();
    if (impl_->closing || pc == nullptr || pc->closed) {
      Finish(s, absl::UnavailableError(absl::StrCat(
                    "rank ", rank_, " -> ", PeerName(s->peer),
                    ": endpoint closed (transport shut down or connections dropped)")));
      return;
    }
    impl_->live.insert(s);
    start(s);
  });
  return c;
}

// Builds the continuation that finishes the op, turning a UCX error into one naming the peer.
#define SYNCOPATE_FINISH_ON_ERROR(s, status)                                                  \
  if ((status) != UCS_OK) {                                                                   \
    Finish((s), UcsError((status), absl::StrCat("rank ", rank_, " -> ", PeerName((s)->peer), \
                                                ": ", (s)->step)));                           \
    return;                                                                                   \
  }

namespace {

absl::Status CheckSegments(const std::vector<Segment>& segments, uint64_t local_size,
                           uint64_t remote_size, absl::string_view remote_name) {
  for (const Segment& seg : segments) {
    if (seg.local_offset + seg.length > local_size ||
        seg.remote_offset + seg.length > remote_size) {
      return absl::OutOfRangeError(absl::StrFormat(
          "segment [local %d, remote %d, %d bytes] outside local region (%d bytes) or remote "
          "region '%s' (%d bytes)",
          seg.local_offset, seg.remote_offset, seg.length, local_size, remote_name, remote_size));
    }
  }
  return absl::OkStatus();
}

// Whether the 8-byte `word` lies inside one of the peer's regions; `what` names it in the error.
absl::Status CheckWord(const PeerConn& pc, RemoteWord word, absl::string_view what) {
  if (word.region < 0 || word.region >= static_cast<int>(pc.regions.size()) ||
      word.offset + sizeof(uint64_t) > pc.regions[word.region].size) {
    return absl::OutOfRangeError(
        absl::StrCat(what, " at ", word.offset, " outside region ", word.region));
  }
  return absl::OkStatus();
}

// Posts `rma` (ucp_put_nbx or ucp_get_nbx) for every non-empty segment. No callback: the flush
// (or, with a fence, the signal) that follows completes after the data, so one completion covers
// the chunk; each request is freed at once. A failed post sets `s->step` for the caller, which
// finishes the op. A template because the two differ in the constness of the local buffer.
template <typename Rma>
ucs_status_t PostSegments(Rma rma, Completion::State* s, const char* step, ucp_ep_h ep,
                          const LocalRegion& lr, const RemoteRegion& rr,
                          const std::vector<Segment>& segments) {
  auto* base = static_cast<char*>(lr.memh.address());
  for (const Segment& seg : segments) {
    if (seg.length == 0) continue;
    ucp_request_param_t p = {};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
    p.memh = lr.memh.get();
    ucs_status_ptr_t r = rma(ep, base + seg.local_offset, seg.length,
                             rr.address + seg.remote_offset, rr.rkey.get(), &p);
    if (UCS_PTR_IS_ERR(r)) {
      s->step = step;
      return UCS_PTR_STATUS(r);
    }
    if (r != nullptr) ucp_request_free(r);
  }
  return UCS_OK;
}

// Posts `rma` (ucp_put_nbx or ucp_get_nbx) between `s->word` and `word` on the peer, with the
// callback that continues `s`; `word` has passed CheckWord.
template <typename Rma>
ucs_status_ptr_t PostWord(Rma rma, Completion::State* s, const PeerConn& pc, RemoteWord word) {
  const RemoteRegion& rr = pc.regions[word.region];
  ucp_request_param_t p = CallbackParam(s);
  return rma(pc.ep.get(), &s->word, sizeof s->word, rr.address + word.offset, rr.rkey.get(), &p);
}

}  // namespace

Completion UcxTransport::PutWithSignal(int peer, int local_region, int remote_region,
                                       std::vector<Segment> segments, RemoteWord signal,
                                       uint64_t value) {
  return Post(peer, [this, local_region, remote_region, segments = std::move(segments), signal,
                     value](Completion::State* s) {
    PeerConn* pc = impl_->peers[s->peer].get();
    const LocalRegion& lr = impl_->regions.at(local_region);
    const RemoteRegion& rr = pc->regions.at(remote_region);
    if (absl::Status c = CheckSegments(segments, lr.memh.length(), rr.size, rr.name); !c.ok()) {
      return Finish(s, c);
    }
    if (signal.region >= 0) {
      if (absl::Status c = CheckWord(*pc, signal, "signal word"); !c.ok()) return Finish(s, c);
    }
    ucs_status_t posted = PostSegments(&ucp_put_nbx, s, "put data", pc->ep.get(), lr, rr, segments);
    SYNCOPATE_FINISH_ON_ERROR(s, posted);
    s->word = value;
    auto put_signal = [this, pc, signal](Completion::State* s) {
      Then(s, PostWord(&ucp_put_nbx, s, *pc, signal), "put signal",
           [this](Completion::State* s, ucs_status_t st) {
             SYNCOPATE_FINISH_ON_ERROR(s, st);
             Finish(s, absl::OkStatus());
           });
    };
    if (signal.region < 0) {
      ucp_request_param_t p = CallbackParam(s);
      Then(s, ucp_ep_flush_nbx(pc->ep.get(), &p), "flush data",
           [this](Completion::State* s, ucs_status_t st) {
             SYNCOPATE_FINISH_ON_ERROR(s, st);
             Finish(s, absl::OkStatus());
           });
    } else if (options_.ordering == SignalOrdering::kFence) {
      ucs_status_t st = ucp_worker_fence(impl_->worker.get());
      s->step = "fence";
      SYNCOPATE_FINISH_ON_ERROR(s, st);
      put_signal(s);
    } else {
      ucp_request_param_t p = CallbackParam(s);
      Then(s, ucp_ep_flush_nbx(pc->ep.get(), &p), "flush data before signal",
           [this, put_signal](Completion::State* s, ucs_status_t st) {
             SYNCOPATE_FINISH_ON_ERROR(s, st);
             put_signal(s);
           });
    }
  });
}

Completion UcxTransport::Put(int peer, int local_region, int remote_region,
                             std::vector<Segment> segments) {
  return PutWithSignal(peer, local_region, remote_region, std::move(segments), RemoteWord{}, 0);
}

Completion UcxTransport::PutWord(int peer, RemoteWord word, uint64_t value) {
  return Post(peer, [this, word, value](Completion::State* s) {
    PeerConn* pc = impl_->peers[s->peer].get();
    if (absl::Status c = CheckWord(*pc, word, "word"); !c.ok()) return Finish(s, c);
    s->word = value;
    Then(s, PostWord(&ucp_put_nbx, s, *pc, word), "put word",
         [this](Completion::State* s, ucs_status_t st) {
           SYNCOPATE_FINISH_ON_ERROR(s, st);
           Finish(s, absl::OkStatus());
         });
  });
}

Completion UcxTransport::Get(int peer, int local_region, int remote_region,
                             std::vector<Segment> segments) {
  return Post(peer, [this, local_region, remote_region,
                     segments = std::move(segments)](Completion::State* s) {
    PeerConn* pc = impl_->peers[s->peer].get();
    const LocalRegion& lr = impl_->regions.at(local_region);
    const RemoteRegion& rr = pc->regions.at(remote_region);
    if (absl::Status c = CheckSegments(segments, lr.memh.length(), rr.size, rr.name); !c.ok()) {
      return Finish(s, c);
    }
    ucs_status_t posted = PostSegments(&ucp_get_nbx, s, "get data", pc->ep.get(), lr, rr, segments);
    SYNCOPATE_FINISH_ON_ERROR(s, posted);
    // A get is complete when its data is local; the flush completes after every get.
    ucp_request_param_t p = CallbackParam(s);
    Then(s, ucp_ep_flush_nbx(pc->ep.get(), &p), "flush gets",
         [this](Completion::State* s, ucs_status_t st) {
           SYNCOPATE_FINISH_ON_ERROR(s, st);
           Finish(s, absl::OkStatus());
         });
  });
}

Completion UcxTransport::GetWord(int peer, RemoteWord word) {
  return Post(peer, [this, word](Completion::State* s) {
    PeerConn* pc = impl_->peers[s->peer].get();
    if (absl::Status c = CheckWord(*pc, word, "word"); !c.ok()) return Finish(s, c);
    Then(s, PostWord(&ucp_get_nbx, s, *pc, word), "get word",
         [this](Completion::State* s, ucs_status_t st) {
           SYNCOPATE_FINISH_ON_ERROR(s, st);
           Finish(s, absl::OkStatus());
         });
  });
}

uint64_t UcxTransport::WordResult(const Completion& completion) {
  return completion.state()->word;
}

Completion UcxTransport::Flush(int peer) {
  return Post(peer, [this](Completion::State* s) {
    PeerConn* pc = impl_->peers[s->peer].get();
    ucp_request_param_t p = CallbackParam(s);
    Then(s, ucp_ep_flush_nbx(pc->ep.get(), &p), "flush",
         [this](Completion::State* s, ucs_status_t st) {
           SYNCOPATE_FINISH_ON_ERROR(s, st);
           Finish(s, absl::OkStatus());
         });
  });
}

absl::Status UcxTransport::Wait(const Completion& completion, absl::Time deadline,
                                absl::string_view what) {
  Completion::State* s = completion.state().get();
  if (s == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, ": empty completion"));
  Backoff backoff;
  while (!s->done.load(std::memory_order_acquire)) {
    if (absl::Status ps = PeerStatus(s->peer); !ps.ok()) {
      return absl::Status(ps.code(), absl::StrCat(what, ": ", ps.message()));
    }
    if (absl::Now() > deadline) {
      MarkPeerFailed(s->peer, absl::DeadlineExceededError(absl::StrCat(
                                  "stalled: no completion for '", what, "' by its deadline")));
      return absl::DeadlineExceededError(absl::StrCat(
          what, ": ", PeerName(s->peer), " did not complete it by the deadline (peer stalled)"));
    }
    backoff.Pause();
  }
  if (!s->status.ok()) {
    return absl::Status(s->status.code(), absl::StrCat(what, ": ", s->status.message()));
  }
  return absl::OkStatus();
}

// ---- Teardown ----

namespace {

// Sets this rank's word in the goodbye region of every `healthy` peer and waits (at most
// `timeout`) until each put is flushed, so a peer that sees our endpoint close next knows it was
// a shutdown. Returns, by rank, whose flush completed. Worker thread.
std::vector<bool> SayGoodbye(ucp_worker_h worker,
                             const std::vector<std::unique_ptr<PeerConn>>& peers,
                             const std::vector<bool>& healthy, int region, int rank,
                             absl::Duration timeout) {
  // Static: the put's request is freed before the put completes, so its buffer must outlive us.
  static const uint64_t kGoodbye = 1;
  std::vector<bool> acknowledged(peers.size(), false);
  std::vector<std::pair<int, void*>> pending;
  for (const auto& pc : peers) {
    if (pc == nullptr || pc->closed || !healthy[pc->rank] || region < 0 ||
        region >= static_cast<int>(pc->regions.size())) {
      continue;
    }
    const RemoteRegion& rr = pc->regions[region];
    ucp_request_param_t none = {};
    ucs_status_ptr_t put = ucp_put_nbx(pc->ep.get(), &kGoodbye, sizeof kGoodbye,
                                       rr.address + sizeof(uint64_t) * rank, rr.rkey.get(), &none);
    if (UCS_PTR_IS_ERR(put)) continue;
    if (put != nullptr) ucp_request_free(put);  // the flush below completes after it
    ucs_status_ptr_t flush = ucp_ep_flush_nbx(pc->ep.get(), &none);
    if (flush == nullptr) {
      acknowledged[pc->rank] = true;
    } else if (!UCS_PTR_IS_ERR(flush)) {
      pending.emplace_back(pc->rank, flush);
    }
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (!pending.empty() && absl::Now() <= deadline) {
    if (ucp_worker_progress(worker) == 0) std::this_thread::yield();
    for (auto& [peer, r] : pending) {
      if (r == nullptr) continue;
      ucs_status_t st = ucp_request_check_status(r);
      if (st == UCS_INPROGRESS) continue;
      acknowledged[peer] = st == UCS_OK;
      ucp_request_free(r);
      r = nullptr;
    }
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [](const auto& p) { return p.second == nullptr; }),
                  pending.end());
  }
  for (auto& [peer, r] : pending) ucp_request_free(r);  // completes when the worker goes
  return acknowledged;
}

// Closes the given peers' endpoints under one time bound; worker thread. Returns the peers
// whose close did not finish in time.
std::vector<int> CloseEndpoints(ucp_worker_h worker, std::vector<std::pair<PeerConn*, bool>> eps,
                                absl::Duration timeout) {
  std::vector<std::pair<int, void*>> pending;
  for (auto& [pc, force] : eps) {
    pc->regions.clear();  // remote keys go before their endpoint
    pc->closed = true;
    ucs_status_ptr_t r = pc->ep.StartClose(force);
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) pending.emplace_back(pc->rank, r);
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    bool all_done = true;
    for (auto& [rank, r] : pending) {
      if (r != nullptr && ucp_request_check_status(r) != UCS_INPROGRESS) {
        ucp_request_free(r);
        r = nullptr;
      }
      all_done &= r == nullptr;
    }
    if (all_done || absl::Now() > deadline) break;
    if (ucp_worker_progress(worker) == 0) std::this_thread::yield();
  }
  std::vector<int> late;
  for (auto& [rank, r] : pending) {
    if (r != nullptr) {
      ucp_request_free(r);  // UCX completes the close when the worker is destroyed
      late.push_back(rank);
    }
  }
  return late;
}

}  // namespace

void UcxTransport::DropConnections() {
  for (int r = 0; r < world_size_; ++r) {
    if (r != rank_) {
      MarkPeerFailed(r, absl::UnavailableError(
                            absl::StrCat("rank ", rank_, " dropped its connections")));
    }
  }
  absl::Status s = impl_->RunSync(
      [this]() -> absl::Status {
        std::vector<std::pair<PeerConn*, bool>> eps;
        for (auto& pc : impl_->peers) {
          if (pc != nullptr && !pc->closed) eps.emplace_back(pc.get(), true);
        }
        CloseEndpoints(impl_->worker.get(), std::move(eps), options_.teardown_timeout);
        return absl::OkStatus();
      },
      absl::Now() + options_.teardown_timeout + absl::Seconds(5));
  if (!s.ok()) spdlog::warn("rank {}: dropping connections: {}", rank_, s.ToString());
}

absl::Status UcxTransport::Shutdown() {
  absl::MutexLock lock(&impl_->shutdown_mu);
  if (impl_->shutdown_status.has_value()) return *impl_->shutdown_status;
  if (!impl_->thread.joinable()) {
    impl_->shutdown_status = absl::OkStatus();
    return absl::OkStatus();
  }
  absl::Status result = impl_->RunSync(
      [this]() -> absl::Status {
        Impl& im = *impl_;
        im.closing = true;
        // Peers exit as they finish, so from here on an exit is expected and affects nothing
        // of ours: stop watching (on this thread, so no check runs after this point) and let
        // neither a failure nor a log come of it. A peer that exited before we got here (it
        // finished first) is already marked failed, which only makes the closes below forced:
        // the right thing for an endpoint whose other end is gone (a flush close could wait on
        // it until teardown_timeout), and a forced close completes locally, so Shutdown still
        // returns ok. Only closes that do not finish in time make it fail, never failed peers.
        im.liveness = PeerLiveness();
        // Goodbye to every healthy peer (only PEER mode reports closed endpoints at all); one
        // that does not acknowledge within kGoodbyeWait is stopped or gone, and gets a forced
        // close below instead of a flush that could wait the whole teardown_timeout on it.
        std::vector<bool> healthy(im.peers.size(), false);
        for (size_t r = 0; r < im.peers.size(); ++r) {
          healthy[r] = im.peers[r] != nullptr && PeerStatus(static_cast<int>(r)).ok();
        }
        std::vector<bool> acknowledged(im.peers.size(), false);
        if (options_.error_handling == ErrorHandling::kPeer) {
          acknowledged = SayGoodbye(im.worker.get(), im.peers, healthy, goodbye_region_, rank_,
                                    kGoodbyeWait);
        }
        std::vector<std::pair<PeerConn*, bool>> eps;
        for (auto& pc : im.peers) {
          if (pc == nullptr || pc->closed) continue;
          // Force when flushing is pointless or could wait on a dead or stopped peer: this peer
          // is gone (failed, shut down, or silent to our goodbye), the group is broken (a
          // failure other than a peer's shutdown), or UCX cannot detect failures.
          eps.emplace_back(pc.get(), !healthy[pc->rank] || !acknowledged[pc->rank] ||
                                         num_broken_.load() > 0 ||
                                         options_.error_handling == ErrorHandling::kNone);
        }
        std::vector<int> late =
            CloseEndpoints(im.worker.get(), std::move(eps), options_.teardown_timeout);
        // Requests UCX did not complete (a failed peer's) will never call back now.
        for (Completion::State* s : std::vector<Completion::State*>(im.live.begin(), im.live.end())) {
          Finish(s, absl::CancelledError(absl::StrCat("rank ", rank_, " -> ", PeerName(s->peer),
                                                      ": transport shut down")));
        }
        im.peers.clear();
        im.regions.clear();
        im.worker = Worker();
        im.context = Context();
        im.stop.store(true, std::memory_order_release);
        if (!late.empty()) {
          return absl::DeadlineExceededError(absl::StrCat(
              "rank ", rank_, ": closing endpoints to ", late.size(),
              " peer(s) (first: ", PeerName(late.front()), ") did not finish within ",
              absl::FormatDuration(options_.teardown_timeout), "; released anyway"));
        }
        return absl::OkStatus();
      },
      absl::Now() + kGoodbyeWait + options_.teardown_timeout + absl::Seconds(10));
  impl_->stop.store(true, std::memory_order_release);
  impl_->thread.join();
  // Commands posted while shutting down never ran; finish them so no waiter waits forever.
  absl::MutexLock qlock(&impl_->mu);
  for (auto& fn : impl_->queue) fn();  // each sees `closing` and fails its operation
  impl_->queue.clear();
  impl_->shutdown_status = result;
  return result;
}

}  // namespace syncopate::ucx
