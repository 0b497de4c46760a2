// syncopate.v1.Compiler and syncopate.v1.Daemon (Stats).
//
// Compile uses the callback API with a fast path: a request served before whose kernel is at
// hand (every rank of every step after the first) is answered inline on gRPC's thread, with no
// thread hop (the request checks run inline too: they are bounded by the request limits);
// anything else (codegen, the cache's disk, NVRTC) goes to a WorkerPool, since gRPC's callback
// threads must not block. Stats is a few atomic reads: the sync API is simplest.
//
// Thread-safety: handlers run concurrently; state lives in ServiceEnv and CompileBackend.
#pragma once

#include <memory>

#include "server/compile_backend.h"
#include "server/service_env.h"
#include "server/worker_pool.h"
#include "syncopate/v1/service.grpc.pb.h"

namespace syncopate::server {

class CompilerService final : public v1::Compiler::CallbackService {
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
                                    const v1::CompileRequest* request,
                                    v1::CompileResponse* response) override;
  CompileBackend* backend() { return backend_.get(); }

 private:
  absl::Status Admit(const grpc::CallbackServerContext& ctx, const v1::CompileRequest& request);
  grpc::Status Answer(const v1::CompileRequest& request, absl::StatusOr<CompileOutcome> outcome,
                      const std::string& peer, v1::CompileResponse* response);

  ServiceEnv* env_;
  std::unique_ptr<CompileBackend> backend_;
  absl::Status backend_status_;
  WorkerPool workers_;  // last: joined (running what is queued) before the backend goes
};

class DaemonService final : public v1::Daemon::Service {
 public:
  DaemonService(ServiceEnv* env, CompilerService* compiler) : env_(env), compiler_(compiler) {}
  grpc::Status Stats(grpc::ServerContext* ctx, const v1::StatsRequest* request,
                     v1::StatsResponse* response) override;

 private:
  ServiceEnv* env_;
  CompilerService* compiler_;
};

}  // namespace syncopate::server
