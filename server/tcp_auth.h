// Credentials for the TCP listener that check the shared token before a call's message is read.
//
// Why not in the handlers: gRPC reads and parses a unary call's whole message before the handler
// runs, so a handler's token check lets an unauthenticated caller make the daemon hold and parse
// max-size messages. An auth metadata processor runs in gRPC core's server-auth filter on the
// call's initial metadata; a call it rejects never reaches the server's request matching, so its
// message is never read into a buffer nor parsed (measured in tests/server/tcp_admission_test.cc).
// gRPC C++'s InsecureServerCredentials refuses a processor, so the listener uses core credentials
// (insecure or TLS) wrapped here.
//
// What passes without the token: grpc.health.v1.Health only (load balancers and probes). Server
// reflection and every syncopate service need it.
//
// Thread-safety: the credentials are built once before the server starts; the processor runs on
// gRPC's threads and only reads immutable state and atomics.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/config.h"

namespace syncopate::server {

// Constant-time comparison, so the token cannot be guessed byte by byte from timing.
bool SameSecret(absl::string_view a, absl::string_view b);

// Whether a TCP call to `method` ("/pkg.Service/Method"; empty when unknown) carrying `token`
// (nullopt: no token metadata) may proceed, given the daemon's `expected` token.
absl::Status CheckTcpCall(absl::string_view method, std::optional<absl::string_view> token,
                          absl::string_view expected);

// Insecure or TLS (tls_cert/tls_key/tls_ca) server credentials; with a token configured, calls are
// checked by CheckTcpCall before their messages are read. `rejected` counts refused calls.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TcpServerCredentials(
    const DaemonConfig& config, std::atomic<uint64_t>* rejected);

}  // namespace syncopate::server
