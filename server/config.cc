// See config.h.
#include "server/config.h"

#include <unistd.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "core/base/status_macros.h"

extern char** environ;

namespace syncopate::server {
namespace {

using Setter = std::function<absl::Status(DaemonConfig&, const std::string& value)>;

struct Key {
  const char* name;
  const char* help;
  Setter set;
};

Setter String(std::string DaemonConfig::*field) {
  return [field](DaemonConfig& c, const std::string& v) {
    c.*field = v;
    return absl::OkStatus();
  };
}

Setter Int(int64_t DaemonConfig::*field, int64_t lo, int64_t hi) {
  return [=](DaemonConfig& c, const std::string& v) {
    int64_t x;
    if (!absl::SimpleAtoi(v, &x) || x < lo || x > hi) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", v, "' is not an integer in [", lo, ", ", hi, "]"));
    }
    c.*field = x;
    return absl::OkStatus();
  };
}

Setter Int32(int DaemonConfig::*field, int lo, int hi) {
  return [=](DaemonConfig& c, const std::string& v) {
    int x;
    if (!absl::SimpleAtoi(v, &x) || x < lo || x > hi) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", v, "' is not an integer in [", lo, ", ", hi, "]"));
    }
    c.*field = x;
    return absl::OkStatus();
  };
}

Setter Bool(bool DaemonConfig::*field) {
  return [field](DaemonConfig& c, const std::string& v) {
    bool x;
    if (!absl::SimpleAtob(v, &x)) {
      return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not a boolean"));
    }
    c.*field = x;
    return absl::OkStatus();
  };
}

const std::vector<Key>& Keys() {
  static const auto* keys = new std::vector<Key>{
      {"node_name", "this node's name (default: host name)", String(&DaemonConfig::node_name)},
      {"unix_socket", "Unix socket for local clients (\"\" disables)",
       String(&DaemonConfig::unix_socket)},
      {"listen", "TCP host:port for peer daemons (\"\" disables, port 0 = ephemeral)",
       String(&DaemonConfig::listen)},
      {"advertise_address", "host:port peers use to reach this daemon",
       String(&DaemonConfig::advertise_address)},
      {"port_file", "write the bound TCP port to this file", String(&DaemonConfig::port_file)},
      {"token", "shared token required on TCP calls", String(&DaemonConfig::token)},
      {"token_file", "read the shared token from this file", String(&DaemonConfig::token_file)},
      {"insecure_no_token", "accept TCP calls without a token",
       Bool(&DaemonConfig::insecure_no_token)},
      {"tls_cert", "PEM certificate chain for TLS on TCP", String(&DaemonConfig::tls_cert)},
      {"tls_key", "PEM private key for TLS on TCP", String(&DaemonConfig::tls_key)},
      {"tls_ca", "PEM root certificates for TLS to peers", String(&DaemonConfig::tls_ca)},
      {"cache_dir", "kernel cache directory (\"\" = memory only)",
       String(&DaemonConfig::cache_dir)},
      {"cache_max_bytes", "kernel cache size cap",
       Int(&DaemonConfig::cache_max_bytes, 0, int64_t{1} << 50)},
      {"max_message_bytes", "largest request/response accepted on the Unix socket",
       Int(&DaemonConfig::max_message_bytes, 1 << 16, (int64_t{1} << 31) - 1)},
      {"tcp_max_message_bytes", "largest request/response accepted on TCP",
       Int(&DaemonConfig::tcp_max_message_bytes, 1 << 16, (int64_t{1} << 31) - 1)},
      {"max_inflight_bytes", "memory gRPC may hold for connections and requests being read",
       Int(&DaemonConfig::max_inflight_bytes, 1 << 24, int64_t{1} << 40)},
      {"group_idle_ttl_ms", "a formed group with no call for this long is dropped",
       Int(&DaemonConfig::group_idle_ttl_ms, 10, int64_t{1} << 40)},
      {"default_wait_ms", "rendezvous/agreement wait when a request gives none",
       Int(&DaemonConfig::default_wait_ms, 1, int64_t{1} << 40)},
      {"max_wait_ms", "upper bound on any server-side wait",
       Int(&DaemonConfig::max_wait_ms, 1, int64_t{1} << 40)},
      {"shutdown_grace_ms", "time in-flight calls get after SIGTERM",
       Int(&DaemonConfig::shutdown_grace_ms, 0, int64_t{1} << 40)},
      {"peer_timeout_ms", "keepalive timeout for peer daemons",
       Int(&DaemonConfig::peer_timeout_ms, 100, int64_t{1} << 40)},
      {"max_world_size", "largest world size accepted",
       Int32(&DaemonConfig::max_world_size, 1, 1 << 20)},
      {"max_groups", "most groups held at once", Int32(&DaemonConfig::max_groups, 1, 1 << 20)},
      {"compile_threads", "concurrent compiles", Int32(&DaemonConfig::compile_threads, 1, 256)},
      {"cuda_include_dir", "CUDA include directory for NVRTC (cuda_bf16.h, ...)",
       String(&DaemonConfig::cuda_include_dir)},
      {"log_level", "trace, debug, info, warn, error", String(&DaemonConfig::log_level)},
  };
  return *keys;
}

std::string NormalizeKey(absl::string_view key) {
  return absl::AsciiStrToLower(absl::StrReplaceAll(key, {{"-", "_"}}));
}

absl::Status Apply(DaemonConfig& config, const std::string& raw_key, const std::string& value,
                   const std::string& source) {
  const std::string key = NormalizeKey(raw_key);
  for (const Key& k : Keys()) {
    if (key == k.name) {
      absl::Status status = k.set(config, value);
      if (!status.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(source, ": ", key, ": ", status.message()));
      }
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(source, ": unknown key '", raw_key, "'"));
}

absl::Status ApplyFile(DaemonConfig& config, const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("config file ", path, ": cannot open"));
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text.front() == '#') continue;
    const size_t sep = text.find_first_of("=:");
    const std::string source = absl::StrCat(path, ":", number);
    if (sep == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": expected 'key = value'"));
    }
    std::string key(absl::StripAsciiWhitespace(text.substr(0, sep)));
    absl::string_view value = absl::StripAsciiWhitespace(text.substr(sep + 1));
    // Textproto-style quoted strings.
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    RETURN_IF_ERROR(Apply(config, key, std::string(value), source));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": cannot open"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq != absl::string_view::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

absl::StatusOr<DaemonConfig> LoadConfig(const std::vector<std::string>& args,
                                        const std::map<std::string, std::string>& env) {
  // Flags are parsed first into (key, value) pairs, so --config can pick the file, but they are
  // applied last.
  std::vector<std::pair<std::string, std::string>> flags;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (!absl::ConsumePrefix(&arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", args[i], "'"));
    }
    std::string key, value;
    if (size_t eq = arg.find('='); eq != absl::string_view::npos) {
      key = std::string(arg.substr(0, eq));
      value = std::string(arg.substr(eq + 1));
    } else {
      key = std::string(arg);
      const bool is_bool = NormalizeKey(key) == "insecure_no_token" || NormalizeKey(key) == "help";
      if (is_bool) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("flag --", key, " needs a value"));
      }
    }
    flags.emplace_back(key, value);
  }

  DaemonConfig config;
  std::string file;
  if (auto it = env.find("SYNCOPATE_CONFIG"); it != env.end()) file = it->second;
  for (const auto& [key, value] : flags) {
    if (NormalizeKey(key) == "config") file = value;
  }
  if (!file.empty()) {
    RETURN_IF_ERROR(ApplyFile(config, file));
    config.config_file = file;
  }
  for (const Key& k : Keys()) {
    const std::string var = absl::StrCat("SYNCOPATE_", absl::AsciiStrToUpper(k.name));
    if (auto it = env.find(var); it != env.end()) {
      RETURN_IF_ERROR(Apply(config, k.name, it->second, "env " + var));
    }
  }
  for (const auto& [key, value] : flags) {
    if (NormalizeKey(key) == "config") continue;
    RETURN_IF_ERROR(Apply(config, key, value, "flag --" + key));
  }

  if (!config.token_file.empty()) {
    ASSIGN_OR_RETURN(std::string token, ReadSmallFile(config.token_file, "token_file"));
    config.token = std::string(absl::StripAsciiWhitespace(token));
  }
  if (config.node_name.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    config.node_name = host[0] ? host : "localhost";
  }
  if (config.tls_cert.empty() != config.tls_key.empty()) {
    return absl::InvalidArgumentError("tls_cert and tls_key must be set together");
  }
  if (!config.listen.empty() && config.token.empty() && !config.insecure_no_token) {
    return absl::InvalidArgumentError(
        "token: TCP listening (listen) needs a shared token (token or token_file); set "
        "insecure_no_token=true to accept unauthenticated peers");
  }
  if (config.max_wait_ms < config.default_wait_ms) config.default_wait_ms = config.max_wait_ms;
  if (config.unix_socket.empty() && config.listen.empty()) {
    return absl::InvalidArgumentError("unix_socket and listen are both empty: nothing to serve");
  }
  return config;
}

std::string ConfigUsage() {
  std::string text =
      "usage: syncopated [--config FILE] [--key=value ...]\n"
      "Sources, later overriding earlier: config file (key = value), environment SYNCOPATE_<KEY>,"
      " flags.\n\n";
  DaemonConfig defaults;
  for (const Key& k : Keys()) absl::StrAppend(&text, "  --", k.name, "\n      ", k.help, "\n");
  return text;
}

}  // namespace syncopate::server
