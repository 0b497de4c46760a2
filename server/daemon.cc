// See daemon.h.
#include "server/daemon.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <vector>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
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

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(DaemonConfig config) {
  std::unique_ptr<Daemon> daemon(new Daemon());
  daemon->env_ = std::make_unique<ServiceEnv>(config);
  ServiceEnv* env = daemon->env_.get();

  CompileBackend::Options compile_options;
  compile_options.cache_dir = config.cache_dir;
  compile_options.cache_max_bytes = config.cache_max_bytes;
  compile_options.compile_threads = config.compile_threads;
  compile_options.cuda_include_dir = config.cuda_include_dir;
  compile_options.plans = &env->plans();
  absl::StatusOr<std::unique_ptr<CompileBackend>> backend = CompileBackend::Create(compile_options);
  absl::Status backend_status = backend.status();
  if (!backend.ok()) {
    // Rendezvous and agreement still work without a cache; Compile answers with the reason.
    spdlog::error("event=cache_unavailable dir={} msg=\"{}\"", config.cache_dir,
                  std::string(backend.status().message()));
  }
  daemon->rendezvous_ = std::make_unique<RendezvousService>(env);
  daemon->compiler_ = std::make_unique<CompilerService>(
      env, backend.ok() ? std::move(*backend) : nullptr, backend_status);
  daemon->stats_ = std::make_unique<DaemonService>(env, daemon->compiler_.get());

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

  // Two servers, because gRPC's message size limit is per server, not per port: the Unix socket
  // and in-process channel serve local clients (max_message_bytes); TCP serves peer daemons and
  // strangers (tcp_max_message_bytes on what it reads, and the token checked before reading).
  grpc::ServerBuilder local;
  local.SetMaxReceiveMessageSize(static_cast<int>(config.max_message_bytes));
  local.SetMaxSendMessageSize(static_cast<int>(config.max_message_bytes));
  CommonOptions(config, quota, local);
  if (!config.unix_socket.empty()) {
    std::error_code ignored;
    std::filesystem::create_directories(std::filesystem::path(config.unix_socket).parent_path(),
                                        ignored);
    // Refuses a path a live daemon listens on; removes a stale socket left by one that died.
    if (absl::Status claimed = ClaimUnixSocket(config.unix_socket); !claimed.ok()) {
      return claimed;
    }
    local.AddListeningPort("unix:" + config.unix_socket, grpc::InsecureServerCredentials());
  }
  local.RegisterService(daemon->rendezvous_.get());
  local.RegisterService(daemon->compiler_.get());
  local.RegisterService(daemon->stats_.get());
  daemon->server_ = local.BuildAndStart();
  if (daemon->server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve: binding unix:", config.unix_socket, " failed (permissions?)"));
  }
  if (!config.unix_socket.empty()) {
    daemon->socket_path_ = config.unix_socket;
    daemon->socket_inode_ = SocketInode(config.unix_socket);
  }

  int tcp_port = 0;
  if (!config.listen.empty()) {
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds =
        TcpServerCredentials(config, &env->counters().rejected_calls);
    if (!creds.ok()) return creds.status();
    grpc::ServerBuilder tcp;
    tcp.SetMaxReceiveMessageSize(static_cast<int>(config.tcp_max_message_bytes));
    // Answers go to callers that passed the token: the local limit applies.
    tcp.SetMaxSendMessageSize(static_cast<int>(config.max_message_bytes));
    CommonOptions(config, quota, tcp);
    tcp.AddListeningPort(config.listen, *creds, &tcp_port);
    // The services are stateless callback handlers over `env`: one instance serves both.
    tcp.RegisterService(daemon->rendezvous_.get());
    tcp.RegisterService(daemon->compiler_.get());
    tcp.RegisterService(daemon->stats_.get());
    daemon->tcp_server_ = tcp.BuildAndStart();
    if (daemon->tcp_server_ == nullptr || tcp_port == 0) {
      return absl::UnavailableError(absl::StrCat("cannot serve: binding ", config.listen,
                                                 " failed (in use? permissions?)"));
    }
  }
  if (!config.unix_socket.empty()) chmod(config.unix_socket.c_str(), 0660);
  env->set_tcp_port(tcp_port);
  if (!config.advertise_address.empty()) {
    env->set_daemon_name(absl::StrCat(config.node_name, "@", config.advertise_address));
  } else if (tcp_port != 0) {
    const std::string host = config.listen.substr(0, config.listen.rfind(':'));
    const bool any = host == "0.0.0.0" || host == "[::]" || host.empty();
    env->set_daemon_name(absl::StrCat(config.node_name, "@", any ? config.node_name : host, ":",
                                      tcp_port));
  } else {
    env->set_daemon_name(absl::StrCat(config.node_name, "@local"));
  }
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
