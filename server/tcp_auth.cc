// See tcp_auth.h.
#include "server/tcp_auth.h"

#include <grpc/grpc_security.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/service_env.h"
#include "spdlog/spdlog.h"

namespace syncopate::server {
namespace {

constexpr absl::string_view kHealthPrefix = "/grpc.health.v1.Health/";

absl::string_view View(const grpc_slice& slice) {
  return absl::string_view(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(slice)),
                           GRPC_SLICE_LENGTH(slice));
}

struct ProcessorState {
  std::string token;
  std::atomic<uint64_t>* rejected;
};

// grpc_auth_metadata_processor::process. Runs on the call's initial metadata, before its message
// is read; answers synchronously (the check is a string compare).
void ProcessTcpCall(void* state, grpc_auth_context* /*context*/, const grpc_metadata* md,
                    size_t num_md, grpc_process_auth_metadata_done_cb done, void* user_data) {
  const auto* s = static_cast<const ProcessorState*>(state);
  absl::string_view method;
  std::optional<absl::string_view> token;
  for (size_t i = 0; i < num_md; ++i) {
    const absl::string_view key = View(md[i].key);
    if (key == ":path") method = View(md[i].value);
    if (key == kTokenMetadataKey) token = View(md[i].value);
  }
  const absl::Status status = CheckTcpCall(method, token, s->token);
  if (status.ok()) {
    done(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_OK, nullptr);
    return;
  }
  s->rejected->fetch_add(1);
  const std::string message(status.message());
  spdlog::info("event=rejected rpc={} transport=tcp code=UNAUTHENTICATED msg=\"{}\"",
               std::string(method), message);
  // gRPC copies the details before this returns.
  done(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_UNAUTHENTICATED, message.c_str());
}

void DestroyState(void* state) { delete static_cast<ProcessorState*>(state); }

// grpc::ServerCredentials over a core grpc_server_credentials (owned), so that a core auth
// metadata processor can be attached to insecure credentials too.
class CoreServerCredentials final : public grpc::ServerCredentials {
 public:
  explicit CoreServerCredentials(grpc_server_credentials* creds) : creds_(creds) {}
  ~CoreServerCredentials() override { grpc_server_credentials_release(creds_); }

  // The processor is attached to the core credentials (TcpServerCredentials); gRPC C++'s
  // wrapper type is not used here.
  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& /*processor*/) override {
    spdlog::error("event=bug msg=\"CoreServerCredentials takes a core processor only\"");
  }

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    return grpc_server_add_http2_port(server, addr.c_str(), creds_);
  }

  grpc_server_credentials* const creds_;
};

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* key) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(key, ": cannot read ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

absl::StatusOr<grpc_server_credentials*> CoreCredentials(const DaemonConfig& config) {
  if (config.tls_cert.empty()) return grpc_insecure_server_credentials_create();
  absl::StatusOr<std::string> cert = ReadPem(config.tls_cert, "tls_cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(config.tls_key, "tls_key");
  if (!key.ok()) return key.status();
  std::string ca;
  if (!config.tls_ca.empty()) {
    absl::StatusOr<std::string> read = ReadPem(config.tls_ca, "tls_ca");
    if (!read.ok()) return read.status();
    ca = *read;
  }
  grpc_ssl_pem_key_cert_pair pair{key->c_str(), cert->c_str()};
  // The shared token authenticates peers; TLS gives confidentiality and server identity.
  grpc_server_credentials* creds = grpc_ssl_server_credentials_create_ex(
      ca.empty() ? nullptr : ca.c_str(), &pair, 1, GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
      nullptr);
  if (creds == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("tls_cert ", config.tls_cert, " / tls_key ",
                                                   config.tls_key, ": not usable for TLS"));
  }
  return creds;
}

}  // namespace

bool SameSecret(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

absl::Status CheckTcpCall(absl::string_view method, std::optional<absl::string_view> token,
                          absl::string_view expected) {
  if (absl::StartsWith(method, kHealthPrefix)) return absl::OkStatus();
  if (!token.has_value()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "metadata ", kTokenMetadataKey, ": missing; TCP calls need the daemon's shared token (",
        method.empty() ? "unknown method" : method, ")"));
  }
  if (!SameSecret(*token, expected)) {
    return absl::UnauthenticatedError(
        absl::StrCat("metadata ", kTokenMetadataKey, ": wrong token (", method, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TcpServerCredentials(
    const DaemonConfig& config, std::atomic<uint64_t>* rejected) {
  absl::StatusOr<grpc_server_credentials*> creds = CoreCredentials(config);
  if (!creds.ok()) return creds.status();
  if (!config.token.empty()) {
    grpc_auth_metadata_processor processor{};
    processor.process = ProcessTcpCall;
    processor.destroy = DestroyState;
    processor.state = new ProcessorState{config.token, rejected};
    grpc_server_credentials_set_auth_metadata_processor(*creds, processor);
  }
  return std::make_shared<CoreServerCredentials>(*creds);
}

}  // namespace syncopate::server
