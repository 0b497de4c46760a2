// UcxTransport, the data path (see transport.h): Post hands an operation to the progress thread
// and Finish completes it; puts (with or without a signal ordered after the data), word puts and
// gets, flushes, chained through UCX request callbacks; Wait, which fails an operation whose peer
// failed or that passed its deadline.
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/ucx/backoff.h"
#include "runtime/ucx/handles.h"
#include "runtime/ucx/transport.h"
#include "runtime/ucx/transport_internal.h"

namespace syncopate::ucx {

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
#define SYNCOPATE_FINISH_ON_ERROR(s, status)                                                       \
  if ((status) != UCS_OK) {                                                                        \
    Finish((s), UcsError((status), absl::StrCat("rank ", rank_, " -> ", PeerName((s)->peer), ": ", \
                                                (s)->step)));                                      \
    return;                                                                                        \
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

uint64_t UcxTransport::WordResult(const Completion& completion) { return completion.state()->word; }

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

}  // namespace syncopate::ucx
