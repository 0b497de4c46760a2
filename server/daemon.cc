// See daemon.h.
#include "server/daemon.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "server/compile_service.h"
#include "server/rendezvous_service.h"
#include "server/tcp_auth.h"
#include "server/unix_socket_claim.h"
#include "spdlog/spdlog.h"

namespace syncopate::server {
namespace {

// What both listeners share: keepalive both ways (a forwarding daemon that dies silently, no FIN,
// is noticed, and peers' keepalive pings are welcome) and one resource quota.
void CommonOptions(const DaemonConfig& config, grpc::ResourceQuota& quota,
                   grpc::ServerBuilder& builder) {
  const int half = static_cast<int>(std::max<int64_t>(50, config.peer_timeout_ms / 2));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, half);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, half);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.SetResourceQuota(quota);
}

}  // namespace

void Daemon::CreateServices(const DaemonConfig& config) {
  CompileBackend::Options compile_options;
  compile_options.cache_dir = config.cache_dir;
  compile_options.cache_max_bytes = config.cache_max_bytes;
  compile_options.compile_threads = config.compile_threads;
  compile_options.cuda_include_dir = config.cuda_include_dir;
  compile_options.plans = &env_->plans();
  absl::StatusOr<std::unique_ptr<CompileBackend>> backend = CompileBackend::Create(compile_options);
  absl::Status backend_status = backend.status();
  if (!backend.ok()) {
    // Rendezvous and agreement still work without a cache; Compile answers with the reason.
    spdlog::error("event=cache_unavailable dir={} msg=\"{}\"", config.cache_dir,
                  std::string(backend.status().message()));
  }
  rendezvous_ = std::make_unique<RendezvousService>(env_.get());
  compiler_ = std::make_unique<CompilerService>(
      env_.get(), backend.ok() ? std::move(*backend) : nullptr, backend_status);
  stats_ = std::make_unique<DaemonService>(env_.get(), compiler_.get());
}

// Two servers, because gRPC's message size limit is per server, not per port: the Unix socket
// and in-process channel serve local clients (max_message_bytes); TCP serves peer daemons and
// strangers (tcp_max_message_bytes on what it reads, and the token checked before reading).
absl::Status Daemon::ServeLocally(const DaemonConfig& config, grpc::ResourceQuota& quota) {
  grpc::ServerBuilder local;
  local.SetMaxReceiveMessageSize(static_cast<int>(config.max_message_bytes));
  local.SetMaxSendMessageSize(static_cast<int>(config.max_message_bytes));
  CommonOptions(config, quota, local);
  if (!config.unix_socket.empty()) {
    std::error_code ignored;
    std::filesystem::create_directories(std::filesystem::path(config.unix_socket).parent_path(),
                                        ignored);
    // Refuses a path a live daemon listens on; removes a stale socket left by one that died.
    RETURN_IF_ERROR(ClaimUnixSocket(config.unix_socket));
    local.AddListeningPort("unix:" + config.unix_socket, grpc::InsecureServerCredentials());
  }
  local.RegisterService(rendezvous_.get());
  local.RegisterService(compiler_.get());
  local.RegisterService(stats_.get());
  server_ = local.BuildAndStart();
  if (server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve: binding unix:", config.unix_socket, " failed (permissions?)"));
  }
  if (!config.unix_socket.empty()) {
    socket_path_ = config.unix_socket;
    socket_inode_ = SocketInode(config.unix_socket);
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Daemon::ServeTcp(const DaemonConfig& config, grpc::ResourceQuota& quota) {
  if (config.listen.empty()) return 0;
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds,
                   TcpServerCredentials(config, &env_->counters().rejected_calls));
  grpc::ServerBuilder tcp;
  tcp.SetMaxReceiveMessageSize(static_cast<int>(config.tcp_max_message_bytes));
  // Answers go to callers that passed the token: the local limit applies.
  tcp.SetMaxSendMessageSize(static_cast<int>(config.max_message_bytes));
  CommonOptions(config, quota, tcp);
  int tcp_port = 0;
  tcp.AddListeningPort(config.listen, creds, &tcp_port);
  // The services are stateless callback handlers over `env`: one instance serves both.
  tcp.RegisterService(rendezvous_.get());
  tcp.RegisterService(compiler_.get());
  tcp.RegisterService(stats_.get());
  tcp_server_ = tcp.BuildAndStart();
  if (tcp_server_ == nullptr || tcp_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve: binding ", config.listen, " failed (in use? permissions?)"));
  }
  return tcp_port;
}

namespace {

// How the daemon names itself to peers and in Stats: node@advertised address, node@host:port of
// its TCP listener, or node@local.
std::string DaemonName(const DaemonConfig& config, int tcp_port) {
  if (!config.advertise_address.empty()) {
    return absl::StrCat(config.node_name, "@", config.advertise_address);
  }
  if (tcp_port == 0) return absl::StrCat(config.node_name, "@local");
  const std::string host = config.listen.substr(0, config.listen.rfind(':'));
  const bool any = host == "0.0.0.0" || host == "[::]" || host.empty();
  return absl::StrCat(config.node_name, "@", any ? config.node_name : host, ":", tcp_port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(DaemonConfig config) {
  std::unique_ptr<Daemon> daemon(new Daemon());
  daemon->env_ = std::make_unique<ServiceEnv>(config);
  daemon->CreateServices(config);

  // Process-wide switches; once, since an embedded client may start several daemons.
  static std::once_flag once;
  std::call_once(once, [] {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  });
  // One quota for both listeners: gRPC's memory for connections and messages being read is
  // bounded (max_inflight_bytes; under pressure it shrinks flow-control windows and stops reading)
  // as are its threads.
  grpc::ResourceQuota quota("syncopated");
  quota.SetMaxThreads(64 + 4 * config.compile_threads);
  quota.Resize(static_cast<size_t>(config.max_inflight_bytes));

  RETURN_IF_ERROR(daemon->ServeLocally(config, quota));
  ASSIGN_OR_RETURN(const int tcp_port, daemon->ServeTcp(config, quota));
  if (!config.unix_socket.empty()) chmod(config.unix_socket.c_str(), 0660);
  daemon->env_->set_tcp_port(tcp_port);
  daemon->env_->set_daemon_name(DaemonName(config, tcp_port));
  for (grpc::Server* server : daemon->servers()) {
    server->GetHealthCheckService()->SetServingStatus(true);
  }
  daemon->trimmer_ = std::make_unique<MemoryTrimmer>(MemoryTrimmer::Options());
  return daemon;
}

std::shared_ptr<grpc::Channel> Daemon::InProcessChannel(const grpc::ChannelArguments& args) {
  return server_->InProcessChannel(args);
}

void Daemon::Shutdown(absl::Duration grace) {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  const std::string name = env_->daemon_name();
  spdlog::info("event=draining daemon={} grace_ms={}", name, absl::ToInt64Milliseconds(grace));
  env_->set_draining();
  for (grpc::Server* server : servers()) server->GetHealthCheckService()->SetServingStatus(false);
  env_->registry().Shutdown(absl::StrCat("daemon ", name, " is shutting down"));
  const auto deadline = absl::ToChronoTime(absl::Now() + grace);
  for (grpc::Server* server : servers()) server->Shutdown(deadline);
  // Only while the path is still our socket: never another daemon's.
  if (!socket_path_.empty() && socket_inode_ != 0 && SocketInode(socket_path_) == socket_inode_) {
    unlink(socket_path_.c_str());
  }
  spdlog::info("event=stopped daemon={}", name);
}

void Daemon::Wait() {
  for (grpc::Server* server : servers()) server->Wait();
}

std::vector<grpc::Server*> Daemon::servers() {
  std::vector<grpc::Server*> all;
  if (server_ != nullptr) all.push_back(server_.get());
  if (tcp_server_ != nullptr) all.push_back(tcp_server_.get());
  return all;
}

Daemon::~Daemon() {
  if (server_ != nullptr) {
    Shutdown(absl::ZeroDuration());
    Wait();
  } else if (tcp_server_ != nullptr) {
    tcp_server_->Shutdown();
    tcp_server_->Wait();
  }
}

}  // namespace syncopate::server
