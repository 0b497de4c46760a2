// Conversion of absl::Status (used everywhere inside the daemon) to grpc::Status (only at the RPC
// boundary). The numeric codes are the same canonical codes, so the mapping is 1:1.
// Thread-safety: a stateless function.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace syncopate::server {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace syncopate::server
