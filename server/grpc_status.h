// Conversion between absl::Status (used everywhere inside the daemon) and grpc::Status (only at
// the RPC boundary). The numeric codes are the same canonical codes, so the mapping is 1:1.
// Thread-safety: stateless functions.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace syncopate::server {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace syncopate::server
