// See peer_channels.h.
#include "server/peer_channels.h"

#include <fstream>
#include <sstream>

#include "server/service_env.h"

namespace syncopate::server {
namespace {

std::string ReadFileOrEmpty(const std::string& path) {
  if (path.empty()) return "";
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

PeerChannels::PeerChannels(const DaemonConfig& config) : token_(config.token) {
  if (!config.tls_cert.empty()) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = ReadFileOrEmpty(config.tls_ca);
    // Peers present the same kind of certificate; ours doubles as the client certificate.
    options.pem_cert_chain = ReadFileOrEmpty(config.tls_cert);
    options.pem_private_key = ReadFileOrEmpty(config.tls_key);
    credentials_ = grpc::SslCredentials(options);
  } else {
    credentials_ = grpc::InsecureChannelCredentials();
  }
  const int half = static_cast<int>(std::max<int64_t>(50, config.peer_timeout_ms / 2));
  args_.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, half);
  args_.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, half);
  args_.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args_.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // A leader that restarts should be reachable again quickly, not after minutes of backoff.
  args_.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args_.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args_.SetMaxReceiveMessageSize(static_cast<int>(config.max_message_bytes));
  args_.SetMaxSendMessageSize(static_cast<int>(config.max_message_bytes));
}

v1::Rendezvous::Stub* PeerChannels::Rendezvous(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto& stub = stubs_[address];
  if (!stub) {
    stub = v1::Rendezvous::NewStub(grpc::CreateCustomChannel(address, credentials_, args_));
  }
  return stub.get();
}

void PeerChannels::Prepare(grpc::ClientContext& ctx) const {
  if (!token_.empty()) ctx.AddMetadata(kTokenMetadataKey, token_);
}

}  // namespace syncopate::server
