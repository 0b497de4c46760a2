// Serving a unary method from its bytes, so that a request that does not parse gets an answer
// that says so (issue 17 item 6).
//
// Why: with the generated typed callback API, gRPC 1.51 answers a request it cannot parse with
// UNIMPLEMENTED and an empty message (CallbackUnaryHandler::RunHandler finishes the call with its
// UnimplementedUnaryReactor), and libprotobuf prints its own line to stderr. So every method of
// our services is registered raw (the generated WithRawCallbackMethod_<Method>): its handler gets
// the request's bytes, parses them with ParseRequest (INVALID_ARGUMENT naming the method, the
// message type and, for invalid UTF-8, the field) and runs the typed logic on a RawUnaryReactor,
// which owns the typed request and response and serializes the response into gRPC's buffer when
// it finishes. Nothing here quotes the request's bytes.
//
// Lifetime is gRPC's own rule: Reply (Finish) exactly once; the reactor, and with it the request
// and response, is deleted at OnDone, which may run as soon as Reply is called. Reply before the
// handler has returned the reactor is allowed (gRPC keeps the status until it binds the call).
//
// Thread-safety: one reactor per call; Reply from any thread, once.
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

// A raw unary call's reactor, holding the typed messages. Deletes itself at OnDone.
template <class Request, class Response>
class RawUnaryReactor : public grpc::ServerUnaryReactor {
 public:
  // `out`: the raw method's response buffer (gRPC's, valid until OnDone).
  explicit RawUnaryReactor(grpc::ByteBuffer* out) : out_(out) {}

  // Parses the call's request bytes into request() (ParseRequest).
  absl::Status Parse(absl::string_view method, const grpc::ByteBuffer& bytes) {
    return ParseRequest(method, bytes, &request_);
  }
  const Request& request() const { return request_; }
  Response* response() { return &response_; }

  // Finishes the call, with response()'s bytes when `status` is OK (gRPC drops the message of a
  // failed call, so none is made). Once; may delete this (OnDone): nothing after it.
  void Reply(grpc::Status status) {
    if (status.ok()) status = SerializeResponse(response_, out_);
    Finish(std::move(status));
  }

  void OnDone() override { delete this; }

 private:
  Request request_;
  Response response_;
  grpc::ByteBuffer* const out_;
};

}  // namespace syncopate::server
