// Serving a unary method from its bytes, so that a request that does not parse gets an answer
// that says so (issue 17 item 6).
//
// Why: with the generated typed callback API, gRPC 1.51 answers a request it cannot parse with
// UNIMPLEMENTED and an empty message (CallbackUnaryHandler::RunHandler finishes the call with its
// UnimplementedUnaryReactor), and libprotobuf prints its own line to stderr. So every method of
// our services is registered raw (the generated WithRawCallbackMethod_<Method>): its handler gets
// the request's bytes, parses them with ParseRequest (INVALID_ARGUMENT naming the method, the
// message type and, for invalid UTF-8, the field) into a RawUnaryCall, runs the typed logic on
// it, and RawUnaryCall::Reply serializes the response into gRPC's buffer before it finishes the
// call's reactor. Nothing here quotes the request's bytes.
//
// The reactor is the handler's choice, as with the typed API: gRPC's DefaultReactor for a call
// with nothing to do on cancel (its OnDone runs inline, while gRPC hands any reactor of ours to
// its executor for OnDone: a thread hop per call, which cost cached Compile 13-35% on 2 cores;
// bench/RESULTS.md, 2026-12-04), or the handler's own reactor, which then owns the RawUnaryCall.
//
// Thread-safety: one RawUnaryCall per call; Reply from any thread, once.
#pragma once

#include <google/protobuf/message_lite.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace syncopate::server {

// Parses a request's bytes into `request`. INVALID_ARGUMENT otherwise: "<method>: the request is
// not a valid <type> (...)", naming the string field when the cause is invalid UTF-8 (known only
// while logging.h's library routing is installed: the daemon's process).
absl::Status ParseRequest(absl::string_view method, const grpc::ByteBuffer& bytes,
                          google::protobuf::MessageLite* request);

// `response` as the call's reply bytes.
grpc::Status SerializeResponse(const google::protobuf::MessageLite& response,
                               grpc::ByteBuffer* out);

// The typed messages of one raw unary call, and its finish. gRPC keeps no reference into it: it
// may go as soon as Reply has returned (or, when the reactor owns it, with the reactor).
template <class Request, class Response>
class RawUnaryCall {
 public:
  // `reactor`: the one the handler returns; `out`: the raw method's response buffer (gRPC's,
  // valid until the call is done).
  RawUnaryCall(grpc::ServerUnaryReactor* reactor, grpc::ByteBuffer* out)
      : reactor_(reactor), out_(out) {}
  RawUnaryCall(RawUnaryCall&&) = default;

  // Parses the call's request bytes into request() (ParseRequest).
  absl::Status Parse(absl::string_view method, const grpc::ByteBuffer& bytes) {
    return ParseRequest(method, bytes, &request_);
  }
  const Request& request() const { return request_; }
  Response* response() { return &response_; }

  // Finishes the call, with response()'s bytes when `status` is OK (gRPC drops the message of a
  // failed call, so none is made). Once. Before the handler has returned is allowed (gRPC keeps
  // the status until it binds the reactor). The reactor may be deleted (OnDone) before this
  // returns: a reactor that owns this call does nothing after it.
  void Reply(grpc::Status status) {
    if (status.ok()) status = SerializeResponse(response_, out_);
    reactor_->Finish(std::move(status));
  }

 private:
  Request request_;
  Response response_;
  grpc::ServerUnaryReactor* reactor_;
  grpc::ByteBuffer* out_;
};

}  // namespace syncopate::server
