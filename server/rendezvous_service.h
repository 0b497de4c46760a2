// syncopate.v1.Rendezvous: Join, Agree and Exchange.
//
// Why the callback API: a Join or Agree call waits for other ranks, for seconds or minutes. With
// the callback API a waiting call is a reactor object, not a blocked thread, so a daemon with
// thousands of waiting ranks needs no thread per rank; the reactor's OnCancel tells us at once
// when a waiting client (or the daemon forwarding for it) went away, which is how a dead rank is
// named to the others. Waits end at their deadline through the registry's TimerQueue.
//
// A call whose leader_address names another daemon is forwarded there (with this daemon's name in
// via_daemon) and the answer relayed; cancelling the local call cancels the forwarded one, so the
// leader learns of a dead rank behind a forwarding daemon too, and a dead forwarding daemon drops
// its connection, cancelling all of its ranks' calls at the leader.
//
// The methods are raw (raw_unary.h): a request that does not parse gets INVALID_ARGUMENT naming
// the method, after the same token check as any other call.
//
// Thread-safety: the service is stateless apart from ServiceEnv; reactors own their call state.
#pragma once

#include "server/service_env.h"
#include "syncopate/v1/service.grpc.pb.h"

namespace syncopate::server {

class RendezvousService final
    : public v1::Rendezvous::WithRawCallbackMethod_Join<v1::Rendezvous::WithRawCallbackMethod_Agree<
          v1::Rendezvous::WithRawCallbackMethod_Exchange<v1::Rendezvous::Service>>> {
 public:
  explicit RendezvousService(ServiceEnv* env) : env_(env) {}

  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Agree(grpc::CallbackServerContext* ctx,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Exchange(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;

 private:
  ServiceEnv* env_;
};

}  // namespace syncopate::server
