// See service_env.h.
#include "server/service_env.h"

#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/tcp_auth.h"

namespace syncopate::server {
namespace {

RequestLimits LimitsFrom(const DaemonConfig& config) {
  RequestLimits limits;
  limits.max_world_size = config.max_world_size;
  return limits;
}

GroupRegistry::Options RegistryOptions(const DaemonConfig& config, const std::string& name) {
  GroupRegistry::Options options;
  options.daemon_name = name;
  options.max_groups = config.max_groups;
  options.group_idle_ttl = absl::Milliseconds(config.group_idle_ttl_ms);
  return options;
}

bool IsInfinite(std::chrono::system_clock::time_point deadline) {
  return deadline - std::chrono::system_clock::now() > std::chrono::hours(24 * 365);
}

}  // namespace

ServiceEnv::ServiceEnv(DaemonConfig config)
    : config_(std::move(config)),
      daemon_name_(config_.node_name),
      limits_(LimitsFrom(config_)),
      started_(absl::Now()),
      peers_(config_),
      registry_(RegistryOptions(config_, config_.node_name)) {}

std::string ServiceEnv::daemon_name() const {
  absl::MutexLock lock(&name_mu_);
  return daemon_name_;
}

void ServiceEnv::set_daemon_name(std::string name) {
  absl::MutexLock lock(&name_mu_);
  daemon_name_ = std::move(name);
}

absl::Status ServiceEnv::Authorize(const grpc::ServerContextBase& ctx) const {
  const std::string peer = ctx.peer();
  const bool remote = absl::StartsWith(peer, "ipv4:") || absl::StartsWith(peer, "ipv6:");
  if (!remote) return absl::OkStatus();
  if (config_.token.empty() && config_.insecure_no_token) return absl::OkStatus();
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find(kTokenMetadataKey);
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(absl::StrCat("metadata ", kTokenMetadataKey,
                                                   ": missing; TCP calls from ", peer,
                                                   " need the daemon's shared token"));
  }
  if (!SameSecret(absl::string_view(it->second.data(), it->second.size()), config_.token)) {
    return absl::UnauthenticatedError(
        absl::StrCat("metadata ", kTokenMetadataKey, ": wrong token from ", peer));
  }
  return absl::OkStatus();
}

absl::Time ServiceEnv::WaitDeadline(const grpc::ServerContextBase& ctx,
                                    uint32_t timeout_ms) const {
  int64_t wait_ms = timeout_ms > 0 ? timeout_ms : config_.default_wait_ms;
  wait_ms = std::min(wait_ms, config_.max_wait_ms);
  const absl::Time now = absl::Now();
  absl::Time deadline = now + absl::Milliseconds(wait_ms);
  if (!IsInfinite(ctx.deadline())) {
    const absl::Time call_deadline = absl::FromChrono(ctx.deadline());
    const absl::Duration margin =
        std::min(absl::Milliseconds(250), std::max(absl::ZeroDuration(), (call_deadline - now) / 10));
    deadline = std::min(deadline, call_deadline - margin);
  }
  return deadline;
}

std::chrono::system_clock::time_point ServiceEnv::ForwardDeadline(
    const grpc::CallbackServerContext& ctx, uint32_t timeout_ms) const {
  const auto now = std::chrono::system_clock::now();
  int64_t wait_ms = timeout_ms > 0 ? timeout_ms : config_.default_wait_ms;
  wait_ms = std::min(wait_ms, config_.max_wait_ms);
  // The leader answers at the wait deadline; allow it time to get the answer back.
  auto deadline = now + std::chrono::milliseconds(wait_ms) + std::chrono::seconds(2);
  if (!IsInfinite(ctx.deadline())) {
    const auto left = ctx.deadline() - now;
    deadline = std::min(deadline, ctx.deadline() - std::min<std::chrono::system_clock::duration>(
                                                       std::chrono::milliseconds(100), left / 20));
  }
  return deadline;
}

bool ServiceEnv::IsSelf(const std::string& address) const {
  const int port = tcp_port_.load();
  if (port == 0) return false;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  int their_port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &their_port) || their_port != port) return false;
  std::string host = address.substr(0, colon);
  if (absl::StartsWith(host, "ipv4:")) host = host.substr(5);
  char hostname[256] = {};
  gethostname(hostname, sizeof(hostname) - 1);
  if (host == "127.0.0.1" || host == "localhost" || host == "[::1]" || host == "0.0.0.0" ||
      host == "[::]" || host == hostname || host == config_.node_name) {
    return true;
  }
  if (!config_.advertise_address.empty()) {
    return config_.advertise_address.substr(0, config_.advertise_address.rfind(':')) == host;
  }
  return false;
}

}  // namespace syncopate::server
