// See compile_service.h.
#include "server/compile_service.h"

#include <fstream>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/grpc_status.h"
#include "spdlog/spdlog.h"

namespace syncopate::server {
namespace {

uint64_t ResidentBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "VmRSS:")) {
      uint64_t kb = 0;
      absl::string_view rest = absl::StripAsciiWhitespace(absl::string_view(line).substr(6));
      rest = rest.substr(0, rest.find(' '));
      if (absl::SimpleAtoi(rest, &kb)) return kb * 1024;
    }
  }
  return 0;
}

}  // namespace

absl::Status CompilerService::Admit(const grpc::CallbackServerContext& ctx,
                                    const grpc::ByteBuffer& bytes, Raw& raw) {
  absl::Status status = env_->Authorize(ctx);
  if (status.ok()) status = raw.Parse("Compile", bytes);
  if (status.ok() && env_->draining()) {
    status = absl::UnavailableError(absl::StrCat("daemon ", env_->daemon_name(),
                                                 " is shutting down"));
  }
  if (status.ok()) status = CheckCompileRequest(raw.request(), env_->limits());
  if (status.ok() && backend_ == nullptr) {
    status = absl::UnavailableError(
        absl::StrCat("the kernel cache of daemon ", env_->daemon_name(),
                     " is unavailable: ", backend_status_.message()));
  }
  if (!status.ok()) {
    env_->counters().rejected_calls++;
    spdlog::info("event=rejected rpc=Compile peer={} code={} msg=\"{}\"", ctx.peer(),
                 absl::StatusCodeToString(status.code()), std::string(status.message()));
  }
  return status;
}

grpc::Status CompilerService::Answer(const v1::CompileRequest& request,
                                     absl::StatusOr<CompileOutcome> outcome,
                                     const std::string& peer, v1::CompileResponse* response) {
  env_->counters().compiles++;
  if (!outcome.ok()) {
    env_->counters().compile_errors++;
    spdlog::info("event=compile_failed peer={} code={} msg=\"{}\"", peer,
                 absl::StatusCodeToString(outcome.status().code()),
                 std::string(outcome.status().message().substr(0, 500)));
    return ToGrpcStatus(outcome.status());
  }
  if (outcome->cache_hit) env_->counters().compile_cache_hits++;
  v1::CompiledKernel* kernel = response->mutable_kernel();
  const bool omit = !request.known_cache_key().empty() &&
                    request.known_cache_key() == outcome->cache_key;
  if (omit) {
    response->set_binary_omitted(true);
  } else {
    kernel->set_binary(outcome->kernel->binary);
  }
  kernel->set_is_ptx(outcome->kernel->is_ptx);
  kernel->set_target(outcome->kernel->target);
  kernel->set_log(outcome->kernel->log);
  kernel->set_nvrtc_version(outcome->kernel->nvrtc_version);
  kernel->set_plan_hash(outcome->plan_hash);
  *kernel->mutable_launch() = std::move(outcome->launch);
  response->set_cache_hit(outcome->cache_hit);
  response->set_cache_key(outcome->cache_key);
  return grpc::Status::OK;
}

void CompilerService::Finish(Call& call, absl::StatusOr<CompileOutcome> outcome) {
  call.raw.Reply(Answer(call.raw.request(), std::move(outcome), call.peer, call.raw.response()));
}

void CompilerService::Resume(std::shared_ptr<Call> call, absl::StatusOr<CompileOutcome> outcome) {
  const bool leaders_deadline =
      absl::IsDeadlineExceeded(outcome.status()) || absl::IsCancelled(outcome.status());
  if (leaders_deadline && absl::Now() < call->deadline) {
    {
      absl::MutexLock lock(&call->mu);
      call->state = Call::State::kRunning;
    }
    if (workers_.Submit([this, call] { Run(call); })) return;
    absl::MutexLock lock(&call->mu);
    call->state = Call::State::kDone;
  }
  Finish(*call, std::move(outcome));
}

void CompilerService::Run(std::shared_ptr<Call> call) {
  // Weak: once the deadline's timer has answered the call, the compile it joined must not keep
  // the call (and its request) alive until that compile ends.
  auto joined = [this, weak = std::weak_ptr<Call>(call)](absl::StatusOr<CompileOutcome> outcome) {
    std::shared_ptr<Call> call = weak.lock();
    if (call == nullptr) return;  // answered at its deadline and released
    TimerQueue::TimerId timer = 0;
    {
      absl::MutexLock lock(&call->mu);
      if (call->state == Call::State::kRunning) {  // the worker below has not returned yet
        call->early = std::move(outcome);
        return;
      }
      if (call->state == Call::State::kDone) return;  // the deadline came first
      call->state = Call::State::kDone;  // Resume may set it back to kRunning
      timer = std::exchange(call->deadline_timer, 0);
    }
    timers_.Cancel(timer);  // releases the timer's hold on the call now, not at the deadline
    Resume(call, std::move(outcome));
  };
  std::string key;
  std::optional<absl::StatusOr<CompileOutcome>> outcome =
      backend_->CompileUnlessInFlight(call->raw.request(), call->deadline, joined, &key);
  std::optional<absl::StatusOr<CompileOutcome>> early;
  absl::ReleasableMutexLock lock(&call->mu);
  if (outcome.has_value()) {
    call->state = Call::State::kDone;
    lock.Release();
    Finish(*call, *std::move(outcome));
    return;
  }
  if (call->early.has_value()) {
    early = std::move(call->early);
    call->early.reset();
    call->state = Call::State::kDone;  // Resume may set it back to kRunning
    lock.Release();
    Resume(call, *std::move(early));
    return;
  }
  // Joined: no thread waits for this request; its deadline is the timer's. Scheduled under the
  // call's lock, so the joined compile's answer (which takes that lock) always finds the timer
  // to cancel. The timer queue's lock is taken inside ours, never the other way round: timer
  // callbacks run without it.
  call->state = Call::State::kJoined;
  call->deadline_timer = timers_.Schedule(call->deadline, [this, call, key] {
    {
      absl::MutexLock lock(&call->mu);
      if (call->state != Call::State::kJoined) return;  // answered, or running again
      call->state = Call::State::kDone;
    }
    const pid_t holder = backend_->LockHolderOf(key);
    Finish(*call, absl::DeadlineExceededError(absl::StrCat(
                      "deadline passed waiting for kernel ", key,
                      ", which another request of daemon ", env_->daemon_name(), " is getting",
                      holder > 0 ? absl::StrCat(" (it waits for the compile lock held by pid ",
                                                holder, ")")
                                 : std::string())));
  });
}

grpc::ServerUnaryReactor* CompilerService::Compile(grpc::CallbackServerContext* ctx,
                                                   const grpc::ByteBuffer* bytes,
                                                   grpc::ByteBuffer* out) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  // On the stack while this thread answers (Reply before returning is fine: raw_unary.h).
  Raw raw(reactor, out);
  if (absl::Status status = Admit(*ctx, *bytes, raw); !status.ok()) {
    raw.Reply(ToGrpcStatus(status));
    return reactor;
  }
  if (std::optional<CompileOutcome> hit = backend_->CompileIfServedBefore(raw.request())) {
    raw.Reply(Answer(raw.request(), std::move(*hit), "", raw.response()));
    return reactor;
  }
  auto call = std::make_shared<Call>(std::move(raw), env_->counters().compile_calls_held);
  call->peer = ctx->peer();
  call->deadline = env_->WaitDeadline(*ctx, call->raw.request().timeout_ms());
  const bool queued = workers_.Submit([this, call] { Run(call); });
  if (!queued) {
    env_->counters().rejected_calls++;
    call->raw.Reply(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                absl::StrCat("daemon ", env_->daemon_name(),
                                             ": compile queue is full; retry later")));
  }
  return reactor;
}

grpc::ServerUnaryReactor* DaemonService::Stats(grpc::CallbackServerContext* ctx,
                                               const grpc::ByteBuffer* bytes,
                                               grpc::ByteBuffer* out) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  RawUnaryCall<v1::StatsRequest, v1::StatsResponse> raw(reactor, out);
  absl::Status status = env_->Authorize(*ctx);
  if (status.ok()) status = raw.Parse("Stats", *bytes);
  if (!status.ok()) {
    env_->counters().rejected_calls++;
    spdlog::info("event=rejected rpc=Stats peer={} code={} msg=\"{}\"", ctx->peer(),
                 absl::StatusCodeToString(status.code()), std::string(status.message()));
    raw.Reply(ToGrpcStatus(status));
    return reactor;
  }
  Fill(raw.response());
  raw.Reply(grpc::Status::OK);
  return reactor;
}

void DaemonService::Fill(v1::StatsResponse* response) {
  const RegistryStats stats = env_->registry().Stats();
  const Counters& c = env_->counters();
  response->set_daemon(env_->daemon_name());
  response->set_uptime_ms(absl::ToInt64Milliseconds(absl::Now() - env_->started()));
  response->set_groups_formed(stats.groups_formed);
  response->set_groups_failed(stats.groups_failed);
  response->set_groups_live(stats.groups_live);
  response->set_pending_joins(stats.pending_joins);
  response->set_pending_agreements(stats.pending_agreements);
  response->set_agreements(stats.agreements);
  response->set_agreements_failed(stats.agreements_failed);
  response->set_compiles(c.compiles.load());
  response->set_compile_cache_hits(c.compile_cache_hits.load());
  response->set_compile_errors(c.compile_errors.load());
  response->set_forwarded_calls(c.forwarded_calls.load());
  response->set_rejected_calls(c.rejected_calls.load());
  response->set_rss_bytes(ResidentBytes());
  response->set_draining(env_->draining());
  response->set_compile_calls_held(c.compile_calls_held.load());
  if (compiler_ != nullptr && compiler_->backend() != nullptr) {
    response->set_nvrtc_compiles(compiler_->backend()->CacheStats().compiles);
  }
}

}  // namespace syncopate::server
