// See peer_channels.h.
#include "server/peer_channels.h"

#include <fstream>
#include <iterator>
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

PeerChannels::PeerChannels(const DaemonConfig& config, Bounds bounds)
    : bounds_(bounds), token_(config.token) {
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

std::shared_ptr<v1::Rendezvous::Stub> PeerChannels::Rendezvous(const std::string& address) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  if (auto it = stubs_.find(address); it != stubs_.end()) {
    it->second.last_used = now;
    // Held by this copy before evicting, so the eviction can neither drop it nor free `it`'s
    // entry under the return.
    std::shared_ptr<v1::Rendezvous::Stub> stub = it->second.stub;
    EvictLocked(now, bounds_.max_cached);
    return stub;
  }
  // Room for the new one first, so it is never the one dropped.
  EvictLocked(now, bounds_.max_cached > 0 ? bounds_.max_cached - 1 : 0);
  std::shared_ptr<v1::Rendezvous::Stub> stub =
      v1::Rendezvous::NewStub(grpc::CreateCustomChannel(address, credentials_, args_));
  stubs_[address] = Cached{.stub = stub, .last_used = now};
  return stub;
}

void PeerChannels::EvictLocked(absl::Time now, size_t keep) {
  auto unheld = [](const Cached& c) { return c.stub.use_count() == 1; };
  for (auto it = stubs_.begin(); it != stubs_.end();) {
    it = unheld(it->second) && now - it->second.last_used >= bounds_.idle ? stubs_.erase(it)
                                                                          : std::next(it);
  }
  while (stubs_.size() > keep) {
    auto oldest = stubs_.end();
    for (auto it = stubs_.begin(); it != stubs_.end(); ++it) {
      if (unheld(it->second) &&
          (oldest == stubs_.end() || it->second.last_used < oldest->second.last_used)) {
        oldest = it;
      }
    }
    if (oldest == stubs_.end()) return;  // every one is in use: calls bound how many there are
    stubs_.erase(oldest);
  }
}

size_t PeerChannels::cached() const {
  absl::MutexLock lock(&mu_);
  return stubs_.size();
}

void PeerChannels::Prepare(grpc::ClientContext& ctx) const {
  if (!token_.empty()) ctx.AddMetadata(kTokenMetadataKey, token_);
}

}  // namespace syncopate::server
