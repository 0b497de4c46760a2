// syncopated's configuration: defaults, then a config file, then SYNCOPATE_* environment variables,
// then command-line flags (later sources override earlier ones: flags > env > file).
//
// Keys (file "key = value" or "key: value" lines, '#' comments; env SYNCOPATE_<KEY> upper-cased;
// flags --key=value or --key value, '-' and '_' interchangeable): see ConfigUsage().
//
// Thread-safety: DaemonConfig is a plain value; LoadConfig is reentrant.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace syncopate::server {

struct DaemonConfig {
  std::string config_file;        // where the file part came from ("" for none)
  std::string node_name;          // default: the host name
  std::string unix_socket = "/run/syncopate/syncopated.sock";  // "" disables it
  std::string listen = "0.0.0.0:7450";  // TCP host:port for peer daemons; port 0 = ephemeral
  std::string advertise_address;  // how peers reach this daemon; default host name + bound port
  std::string port_file;          // if set, the bound TCP port is written here after start
  std::string token;              // shared secret for TCP calls (metadata x-syncopate-token)
  std::string token_file;         // read the token from this file instead
  bool insecure_no_token = false; // allow TCP without a token (loopback experiments only)
  std::string tls_cert;           // PEM; TLS on TCP when cert and key are set
  std::string tls_key;
  std::string tls_ca;             // PEM roots for connecting to peers with TLS
  std::string cache_dir;          // kernel cache directory ("" = memory only)
  int64_t cache_max_bytes = int64_t{4} << 30;
  int64_t max_message_bytes = int64_t{64} << 20;  // Unix socket and in-process
  // TCP callers are peer daemons forwarding Join/Agree/Exchange (Compile is local): a plan at
  // RequestLimits::max_transfers fits, and an unauthenticated stranger cannot make the daemon
  // hold much.
  int64_t tcp_max_message_bytes = int64_t{16} << 20;
  // gRPC's memory quota for both listeners: connections' buffers and messages being read.
  int64_t max_inflight_bytes = int64_t{1} << 30;
  int64_t group_idle_ttl_ms = 3600000;  // a formed group without calls ends after this
  int64_t default_wait_ms = 60000;    // rendezvous/agreement wait when the request gives none
  int64_t max_wait_ms = 600000;       // upper bound on any server-side wait
  int64_t shutdown_grace_ms = 5000;   // in-flight calls get this long after SIGTERM
  int64_t peer_timeout_ms = 10000;    // keepalive: a silent peer daemon is dead after this
  int max_world_size = 4096;
  int max_groups = 1024;
  int compile_threads = 4;
  std::string cuda_include_dir;       // CUDA headers for NVRTC; "": jit::CudaIncludeDir()
  std::string log_level = "info";     // trace, debug, info, warn, error
};

// `args` excludes argv[0]. `env` maps variable names to values (the process environment).
// Unknown keys, malformed numbers and unreadable files are InvalidArgument naming the key and
// source ("flag --max-wait-ms", "env SYNCOPATE_MAX_WAIT_MS", "/etc/syncopate.conf:7").
absl::StatusOr<DaemonConfig> LoadConfig(const std::vector<std::string>& args,
                                        const std::map<std::string, std::string>& env);

// The environment of this process as a map (for LoadConfig).
std::map<std::string, std::string> ProcessEnvironment();

// One line per key: name, default, description.
std::string ConfigUsage();

}  // namespace syncopate::server
