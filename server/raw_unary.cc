// See raw_unary.h.
#include "server/raw_unary.h"

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/logging.h"

namespace syncopate::server {
namespace {

// The field libprotobuf names in its invalid-UTF-8 message ("String field
// 'syncopate.v1.JoinRequest.job_id' contains invalid UTF-8 data when parsing a protocol
// buffer..."): a name from the descriptor, never the request's bytes. Empty when it is not that
// message.
std::string InvalidUtf8Field(absl::string_view message) {
  if (!absl::StrContains(message, "invalid UTF-8")) return "";
  const size_t open = message.find('\'');
  if (open == absl::string_view::npos) return "";
  const size_t close = message.find('\'', open + 1);
  if (close == absl::string_view::npos || close - open > 256) return "";
  return std::string(message.substr(open + 1, close - open - 1));
}

}  // namespace

absl::Status ParseRequest(absl::string_view method, const grpc::ByteBuffer& bytes,
                          google::protobuf::MessageLite* request) {
  if (!bytes.Valid()) {
    return absl::InvalidArgumentError(absl::StrCat(
        method, ": the call carried no request message (expected ", request->GetTypeName(), ")"));
  }
  bool parsed = false;
  ProtobufMessagesOnThisThread messages;
  {
    // The reader only reads; it takes a mutable buffer because gRPC's C reader API does.
    grpc::ProtoBufferReader reader(const_cast<grpc::ByteBuffer*>(&bytes));
    parsed = reader.status().ok() && request->ParseFromZeroCopyStream(&reader);
  }
  if (parsed) return absl::OkStatus();
  const std::string type = request->GetTypeName();
  const std::string field = InvalidUtf8Field(messages.first());
  if (!field.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(method, ": the request is not a valid ", type,
                                                   ": string field ", field,
                                                   " is not valid UTF-8"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      method, ": the request is not a valid ", type,
      " (not protobuf, a field of the wrong type, nested too deep, or invalid UTF-8 in a string "
      "field)"));
}

grpc::Status SerializeResponse(const google::protobuf::MessageLite& response,
                               grpc::ByteBuffer* out) {
  bool own_buffer = false;
  grpc::Status status = grpc::SerializationTraits<google::protobuf::MessageLite>::Serialize(
      response, out, &own_buffer);
  if (status.ok()) return status;
  return grpc::Status(grpc::StatusCode::INTERNAL,
                      absl::StrCat("the ", response.GetTypeName(),
                                   " answer could not be serialized: ", status.error_message()));
}

}  // namespace syncopate::server
