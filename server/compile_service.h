// syncopate.v1.Compiler and syncopate.v1.Daemon (Stats).
//
// Compile uses the callback API with a fast path: a request served before whose kernel is at
// hand (every rank of every step after the first) is answered inline on gRPC's thread, with no
// thread hop (the request checks run inline too: they are bounded by the request limits);
// anything else (codegen, the cache's disk, NVRTC) goes to a WorkerPool, since gRPC's callback
// threads must not block. Stats is a few atomic reads, answered inline.
//
// Both methods are raw (raw_unary.h): a request that does not parse gets INVALID_ARGUMENT naming
// the method, after the token check. Both finish gRPC's DefaultReactor (nothing to do on cancel;
// its OnDone runs inline, with no executor hop per call); the typed messages live on the
// handler's stack when it answers inline, in a Call when a worker answers.
//
// A request for a kernel that another request of this daemon is already getting holds no worker
// thread: it waits as a callback on that compile (CompileBackend::CompileUnlessInFlight), and
// its deadline fires from a TimerQueue. So a compile stuck behind another process's lock (a
// stopped daemon on the same cache_dir) occupies one worker for that kernel, however many
// requests wait for it, and other kernels keep compiling.
//
// Thread-safety: handlers run concurrently; state lives in ServiceEnv and CompileBackend.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/compile_backend.h"
#include "server/raw_unary.h"
#include "server/service_env.h"
#include "server/timer_queue.h"
#include "server/worker_pool.h"
#include "syncopate/v1/service.grpc.pb.h"

namespace syncopate::server {

class CompilerService final
    : public v1::Compiler::WithRawCallbackMethod_Compile<v1::Compiler::Service> {
 public:
  // `backend` may be null when the kernel cache could not be opened; Compile then answers
  // Unavailable with the reason.
  CompilerService(ServiceEnv* env, std::unique_ptr<CompileBackend> backend,
                  absl::Status backend_status)
      : env_(env),
        backend_(std::move(backend)),
        backend_status_(std::move(backend_status)),
        workers_(env->config().compile_threads * 2, 4096) {}

  grpc::ServerUnaryReactor* Compile(grpc::CallbackServerContext* ctx,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  CompileBackend* backend() { return backend_.get(); }

 private:
  using Raw = RawUnaryCall<v1::CompileRequest, v1::CompileResponse>;

  // One Compile answered off gRPC's thread. Finished exactly once: a worker runs it (kRunning),
  // or it waits on a compile it joined (kJoined: then that compile's callback, or the deadline's
  // timer, whichever comes first, finishes it or hands it back to a worker).
  struct Call {
    enum class State { kRunning, kJoined, kDone };
    Call(Raw r, std::atomic<uint64_t>& held_count) : raw(std::move(r)), held(held_count) { ++held; }
    ~Call() { --held; }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;
    Raw raw;  // the request, the response, and the call's default reactor
    std::string peer;
    absl::Time deadline;
    absl::Mutex mu;
    State state ABSL_GUARDED_BY(mu) = State::kRunning;
    // The joined compile ended while the worker had not yet seen that it joined.
    std::optional<absl::StatusOr<CompileOutcome>> early ABSL_GUARDED_BY(mu);
    // While kJoined: the deadline's timer, cancelled when the joined compile answers first (the
    // timer holds the call, whose request may be megabytes, until it runs or is cancelled).
    TimerQueue::TimerId deadline_timer ABSL_GUARDED_BY(mu) = 0;
    std::atomic<uint64_t>& held;  // Counters::compile_calls_held
  };
  // On a worker: compile, or join the compile of the same kernel in flight.
  void Run(std::shared_ptr<Call> call);
  // The joined compile's outcome for a call that is no longer running: answer, or (the compile
  // ended at its own deadline, ours is later) run it again.
  void Resume(std::shared_ptr<Call> call, absl::StatusOr<CompileOutcome> outcome);
  void Finish(Call& call, absl::StatusOr<CompileOutcome> outcome);
  // The token, then parsing `bytes` into raw's request, then the request's checks.
  absl::Status Admit(const grpc::CallbackServerContext& ctx, const grpc::ByteBuffer& bytes,
                     Raw& raw);
  grpc::Status Answer(const v1::CompileRequest& request, absl::StatusOr<CompileOutcome> outcome,
                      const std::string& peer, v1::CompileResponse* response);

  ServiceEnv* env_;
  std::unique_ptr<CompileBackend> backend_;
  absl::Status backend_status_;
  TimerQueue timers_;   // deadlines of joined requests; stopped after the workers, before the backend
  WorkerPool workers_;  // last: joined (running what is queued) before the backend goes
};

class DaemonService final : public v1::Daemon::WithRawCallbackMethod_Stats<v1::Daemon::Service> {
 public:
  DaemonService(ServiceEnv* env, CompilerService* compiler) : env_(env), compiler_(compiler) {}
  grpc::ServerUnaryReactor* Stats(grpc::CallbackServerContext* ctx,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;

 private:
  void Fill(v1::StatsResponse* response);

  ServiceEnv* env_;
  CompilerService* compiler_;
};

}  // namespace syncopate::server
