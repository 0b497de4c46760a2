// See rendezvous_service.h.
#include "server/rendezvous_service.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/grpc_status.h"
#include "server/raw_unary.h"
#include "spdlog/spdlog.h"

namespace syncopate::server {
namespace {

constexpr char kCancelledWhy[] =
    "its call was cancelled (the client process, or the daemon it came through, went away)";

// One waiting Join, Agree or Exchange call, served locally (registry) or forwarded to the leader
// daemon. It owns the call's parsed request and its response (`call_`, raw_unary.h).
//
// Finish (call_.Reply) is called exactly once, never under the reactor's lock, and only after the
// constructor has finished (a completion that arrives while the constructor still runs is parked
// in `result_`), because gRPC may delete the reactor (OnDone) as soon as Finish is called.
template <class Request, class Response>
class GroupCallReactor : public grpc::ServerUnaryReactor {
 public:
  GroupCallReactor(ServiceEnv* env, grpc::CallbackServerContext* ctx, grpc::ByteBuffer* out)
      : call_(this, out),
        env_(env),
        ctx_(ctx),
        request_(&call_.request()),
        response_(call_.response()) {}

  void OnCancel() override {
    GroupRegistry::WaiterId waiter = 0;
    bool forwarding = false;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      waiter = waiter_;
      forwarding = forwarding_;
    }
    if (forwarding) forward_ctx_.TryCancel();
    if (waiter != 0) env_->registry().Cancel(waiter, kCancelledWhy);
  }

  void OnDone() override { delete this; }

 protected:
  // Runs the call: checks, then forward or local. Called at the end of the derived constructor
  // with the call's request bytes, parsed after the token check (TCP checks it before reading
  // too: tcp_auth.h) and before anything reads a field.
  void Begin(const std::string& what, const grpc::ByteBuffer& bytes) {
    absl::Status status = env_->Authorize(*ctx_);
    if (status.ok()) status = call_.Parse(what, bytes);
    if (status.ok() && env_->draining()) {
      status = absl::UnavailableError(
          absl::StrCat("daemon ", env_->daemon_name(), " is shutting down"));
    }
    if (status.ok()) status = Check();
    if (!status.ok()) {
      env_->counters().rejected_calls++;
      spdlog::info("event=rejected rpc={} peer={} code={} msg=\"{}\"", what, ctx_->peer(),
                   absl::StatusCodeToString(status.code()), std::string(status.message()));
      Complete(ToGrpcStatus(status));
    } else if (!request_->via_daemon().empty() || request_->leader_address().empty() ||
               env_->IsSelf(request_->leader_address())) {
      const GroupRegistry::WaiterId id = StartLocal();
      bool cancel_now = false;
      {
        absl::MutexLock lock(&mu_);
        waiter_ = id;
        cancel_now = cancelled_;
      }
      // OnCancel may have run before the waiter id was known.
      if (cancel_now && id != 0) env_->registry().Cancel(id, kCancelledWhy);
    } else {
      Forward();
    }
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      constructed_ = true;
      finish = TakeFinishLocked();
    }
    if (finish) call_.Reply(*finish);  // may delete this (OnDone): nothing after it
  }

  // Completes the call (from any thread, once).
  void Complete(grpc::Status status) {
    if (status.ok()) OnSucceeded();
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      result_ = std::move(status);
      finish = TakeFinishLocked();
    }
    if (finish) call_.Reply(*finish);  // may delete this (OnDone): nothing after it
  }

  virtual absl::Status Check() = 0;
  // The call succeeded and `response_` is complete (local or forwarded); runs before Finish.
  virtual void OnSucceeded() {}
  virtual GroupRegistry::WaiterId StartLocal() = 0;
  virtual void StartForward(v1::Rendezvous::Stub* stub, grpc::ClientContext* ctx,
                            const Request* forwarded, Response* response,
                            std::function<void(grpc::Status)> done) = 0;

  RawUnaryCall<Request, Response> call_;  // first: request_ and response_ point into it
  ServiceEnv* env_;
  grpc::CallbackServerContext* ctx_;
  const Request* const request_;  // parsed by Begin
  Response* const response_;

 private:
  // The status to Finish with, once both the constructor and the call's work are done. Finish
  // itself is called without the lock: it may run OnDone (delete this) before returning.
  std::optional<grpc::Status> TakeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (constructed_ && result_.has_value() && !finished_) {
      finished_ = true;
      return result_;
    }
    return std::nullopt;
  }

  void Forward() {
    const std::string& leader = request_->leader_address();
    forwarded_ = *request_;
    forwarded_.set_via_daemon(env_->daemon_name());
    forward_ctx_.set_deadline(env_->ForwardDeadline(*ctx_, request_->timeout_ms()));
    env_->peers().Prepare(forward_ctx_);
    env_->counters().forwarded_calls++;
    {
      absl::MutexLock lock(&mu_);
      forwarding_ = true;
    }
    forward_stub_ = env_->peers().Rendezvous(leader);  // held until this call ends
    StartForward(forward_stub_.get(), &forward_ctx_, &forwarded_, response_,
                 [this, leader](grpc::Status status) {
                   if (!status.ok() && (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                                        status.error_code() == grpc::StatusCode::UNKNOWN)) {
                     status = grpc::Status(
                         grpc::StatusCode::UNAVAILABLE,
                         absl::StrCat("leader daemon at ", leader,
                                      " is unreachable or went away: ", status.error_message()));
                   } else if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
                              status.error_message() == "Deadline Exceeded") {
                     status = grpc::Status(
                         grpc::StatusCode::DEADLINE_EXCEEDED,
                         absl::StrCat("leader daemon at ", leader, " did not answer in time"));
                   }
                   Complete(std::move(status));
                 });
  }

  absl::Mutex mu_;
  bool constructed_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool forwarding_ ABSL_GUARDED_BY(mu_) = false;
  GroupRegistry::WaiterId waiter_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<grpc::Status> result_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<v1::Rendezvous::Stub> forward_stub_;
  grpc::ClientContext forward_ctx_;
  Request forwarded_;
};

class JoinReactor final : public GroupCallReactor<v1::JoinRequest, v1::JoinResponse> {
 public:
  JoinReactor(ServiceEnv* env, grpc::CallbackServerContext* ctx, const grpc::ByteBuffer& bytes,
              grpc::ByteBuffer* out)
      : GroupCallReactor(env, ctx, out) {
    Begin("Join", bytes);
  }

 private:
  absl::Status Check() override { return CheckJoinRequest(*request_, env_->limits()); }

  GroupRegistry::WaiterId StartLocal() override {
    MemberInfo member;
    member.rank = request_->rank();
    member.node_name = request_->node_name();
    member.gpu_arch = request_->gpu_arch();
    member.daemon = request_->via_daemon().empty() ? env_->daemon_name() : request_->via_daemon();
    return env_->registry().Join(
        request_->job_id(), request_->world_size(), std::move(member),
        env_->WaitDeadline(*ctx_, request_->timeout_ms()),
        [this](absl::StatusOr<GroupInfo> group) {
          if (!group.ok()) {
            Complete(ToGrpcStatus(group.status()));
            return;
          }
          response_->set_group_id(group->group_id);
          response_->set_job_id(group->job_id);
          response_->set_world_size(group->world_size);
          response_->set_rank(request_->rank());
          response_->set_leader_daemon(env_->daemon_name());
          response_->set_leader_address(request_->leader_address());
          for (const MemberInfo& m : group->members) {
            v1::Member* out = response_->add_members();
            out->set_rank(m.rank);
            out->set_node_name(m.node_name);
            out->set_gpu_arch(m.gpu_arch);
            out->set_daemon(m.daemon);
          }
          Complete(grpc::Status::OK);
        });
  }

  void StartForward(v1::Rendezvous::Stub* stub, grpc::ClientContext* ctx,
                    const v1::JoinRequest* forwarded, v1::JoinResponse* response,
                    std::function<void(grpc::Status)> done) override {
    stub->async()->Join(ctx, forwarded, response, std::move(done));
  }
};

class AgreeReactor final : public GroupCallReactor<v1::AgreeRequest, v1::AgreeResponse> {
 public:
  AgreeReactor(ServiceEnv* env, grpc::CallbackServerContext* ctx, const grpc::ByteBuffer& bytes,
               grpc::ByteBuffer* out)
      : GroupCallReactor(env, ctx, out) {
    Begin("Agree", bytes);
  }

 private:
  absl::Status Check() override { return CheckAgreeRequest(*request_, env_->limits()); }

  // Whether decided here or forwarded from the leader, the agreed plan is what this node's ranks
  // compile next: keep it so their Compile calls can name it by hash.
  void OnSucceeded() override { env_->plans().Remember(response_->plan_hash(), response_->plan()); }

  GroupRegistry::WaiterId StartLocal() override {
    return env_->registry().Agree(
        request_->group_id(), request_->rank(), request_->proposal(),
        env_->WaitDeadline(*ctx_, request_->timeout_ms()),
        [this](absl::StatusOr<AgreeOutcome> outcome) {
          if (!outcome.ok()) {
            Complete(ToGrpcStatus(outcome.status()));
            return;
          }
          response_->set_plan_hash(outcome->result->plan_hash);
          response_->set_kernel_hash(outcome->result->kernel_hash);
          *response_->mutable_plan() = outcome->result->plan;
          response_->set_round(outcome->round);
          Complete(grpc::Status::OK);
        });
  }

  void StartForward(v1::Rendezvous::Stub* stub, grpc::ClientContext* ctx,
                    const v1::AgreeRequest* forwarded, v1::AgreeResponse* response,
                    std::function<void(grpc::Status)> done) override {
    stub->async()->Agree(ctx, forwarded, response, std::move(done));
  }
};

// Bounds one Exchange blob: the leader holds every rank's blob of a round at once and sends them
// all to every rank, so a round costs world_size^2 blobs of traffic.
constexpr size_t kMaxExchangeBlobBytes = size_t{1} << 20;
constexpr size_t kMaxExchangeKeyBytes = 256;

absl::Status CheckExchangeRequest(const v1::ExchangeRequest& request,
                                  const RequestLimits& limits) {
  if (absl::Status s = CheckGroupId(request.group_id(), "group_id"); !s.ok()) return s;
  if (request.rank() < 0 || request.rank() >= limits.max_world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank: ", request.rank(),
                                                   " is out of range [0, ",
                                                   limits.max_world_size, ")"));
  }
  if (request.key().empty() || request.key().size() > kMaxExchangeKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key: must be 1..", kMaxExchangeKeyBytes, " bytes, is ", request.key().size()));
  }
  if (request.leader_address().size() > 512) {
    return absl::InvalidArgumentError("leader_address: is longer than 512 bytes");
  }
  if (request.blob().size() > kMaxExchangeBlobBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "blob: ", request.blob().size(), " bytes from rank ", request.rank(),
        " exceed the exchange limit of ", kMaxExchangeBlobBytes, " bytes"));
  }
  return absl::OkStatus();
}

class ExchangeReactor final
    : public GroupCallReactor<v1::ExchangeRequest, v1::ExchangeResponse> {
 public:
  ExchangeReactor(ServiceEnv* env, grpc::CallbackServerContext* ctx,
                  const grpc::ByteBuffer& bytes, grpc::ByteBuffer* out)
      : GroupCallReactor(env, ctx, out) {
    Begin("Exchange", bytes);
  }

 private:
  absl::Status Check() override { return CheckExchangeRequest(*request_, env_->limits()); }

  GroupRegistry::WaiterId StartLocal() override {
    return env_->registry().Exchange(
        request_->group_id(), request_->rank(), request_->key(), request_->blob(),
        env_->WaitDeadline(*ctx_, request_->timeout_ms()),
        [this](absl::StatusOr<ExchangeOutcome> outcome) {
          if (!outcome.ok()) {
            Complete(ToGrpcStatus(outcome.status()));
            return;
          }
          for (const std::string& blob : *outcome->blobs) response_->add_blobs(blob);
          response_->set_round(outcome->round);
          Complete(grpc::Status::OK);
        });
  }

  void StartForward(v1::Rendezvous::Stub* stub, grpc::ClientContext* ctx,
                    const v1::ExchangeRequest* forwarded, v1::ExchangeResponse* response,
                    std::function<void(grpc::Status)> done) override {
    stub->async()->Exchange(ctx, forwarded, response, std::move(done));
  }
};

}  // namespace

grpc::ServerUnaryReactor* RendezvousService::Exchange(grpc::CallbackServerContext* ctx,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  return new ExchangeReactor(env_, ctx, *request, response);
}

grpc::ServerUnaryReactor* RendezvousService::Join(grpc::CallbackServerContext* ctx,
                                                  const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) {
  return new JoinReactor(env_, ctx, *request, response);
}

grpc::ServerUnaryReactor* RendezvousService::Agree(grpc::CallbackServerContext* ctx,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) {
  return new AgreeReactor(env_, ctx, *request, response);
}

}  // namespace syncopate::server
