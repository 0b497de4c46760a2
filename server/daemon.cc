// See daemon.h.
#include "server/daemon.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <fstream>
#include <sstream>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "server/compile_service.h"
#include "server/rendezvous_service.h"
#include "spdlog/spdlog.h"

namespace syncopate::server {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* key) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(key, ": cannot read ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TcpCredentials(
    const DaemonConfig& config) {
  if (config.tls_cert.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options;
  absl::StatusOr<std::string> cert = ReadPem(config.tls_cert, "tls_cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(config.tls_key, "tls_key");
  if (!key.ok()) return key.status();
  options.pem_key_cert_pairs.push_back({*key, *cert});
  if (!config.tls_ca.empty()) {
    absl::StatusOr<std::string> ca = ReadPem(config.tls_ca, "tls_ca");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
  }
  // The shared token authenticates peers; TLS gives confidentiality and server identity.
  options.client_certificate_request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  return grpc::SslServerCredentials(options);
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
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(config.max_message_bytes));
  // Keepalive both ways: a forwarding daemon that dies silently (no FIN) is noticed, and peers'
  // keepalive pings are welcome.
  const int half = static_cast<int>(std::max<int64_t>(50, config.peer_timeout_ms / 2));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, half);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, half);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  grpc::ResourceQuota quota("syncopated");
  quota.SetMaxThreads(64 + 4 * config.compile_threads);
  builder.SetResourceQuota(quota);

  if (!config.unix_socket.empty()) {
    std::error_code ignored;
    std::filesystem::create_directories(std::filesystem::path(config.unix_socket).parent_path(),
                                        ignored);
    struct stat st;
    // A socket left by a daemon that crashed would make the bind fail.
    if (lstat(config.unix_socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
      unlink(config.unix_socket.c_str());
    }
    builder.AddListeningPort("unix:" + config.unix_socket, grpc::InsecureServerCredentials());
    daemon->socket_path_ = config.unix_socket;
  }
  int tcp_port = 0;
  if (!config.listen.empty()) {
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = TcpCredentials(config);
    if (!creds.ok()) return creds.status();
    builder.AddListeningPort(config.listen, *creds, &tcp_port);
  }
  builder.RegisterService(daemon->rendezvous_.get());
  builder.RegisterService(daemon->compiler_.get());
  builder.RegisterService(daemon->stats_.get());
  daemon->server_ = builder.BuildAndStart();
  if (daemon->server_ == nullptr || (!config.listen.empty() && tcp_port == 0)) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve: binding ", config.unix_socket.empty() ? "" : "unix:" + config.unix_socket,
        config.listen.empty() ? "" : " and " + config.listen, " failed (in use? permissions?)"));
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
  daemon->server_->GetHealthCheckService()->SetServingStatus(true);
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
  server_->GetHealthCheckService()->SetServingStatus(false);
  env_->registry().Shutdown(absl::StrCat("daemon ", name, " is shutting down"));
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  if (!socket_path_.empty()) unlink(socket_path_.c_str());
  spdlog::info("event=stopped daemon={}", name);
}

void Daemon::Wait() { server_->Wait(); }

Daemon::~Daemon() {
  if (server_ != nullptr) {
    Shutdown(absl::ZeroDuration());
    server_->Wait();
  }
}

}  // namespace syncopate::server
