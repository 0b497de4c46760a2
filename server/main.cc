// syncopated: the per-node Syncopate daemon. Configuration: config.h (flags > env > file).
// Runs until SIGTERM or SIGINT, then drains (daemon.h) and exits 0. Exit 2 on bad configuration,
// 1 when it cannot serve (socket in use, certificates unreadable).
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/config.h"
#include "server/daemon.h"
#include "server/logging.h"
#include "spdlog/spdlog.h"

namespace {

// Written to a temp file and renamed, so a reader never sees a partial port number.
bool WritePortFile(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << port << "\n";
    if (!out) return false;
  }
  std::error_code error;
  std::filesystem::rename(tmp, path, error);
  return !error;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace syncopate::server;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      std::fputs(ConfigUsage().c_str(), stdout);
      return 0;
    }
  }
  // Debian's abseil keeps Mutex deadlock detection on, a graph update on every lock; lock order
  // is checked in tests, not on a serving daemon's hot path.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::StatusOr<DaemonConfig> config = LoadConfig(args, ProcessEnvironment());
  if (!config.ok()) {
    std::fprintf(stderr, "syncopated: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  if (absl::Status s = SetupLogging(config->log_level); !s.ok()) {
    std::fprintf(stderr, "syncopated: %s\n", std::string(s.message()).c_str());
    return 2;
  }

  // Block the shutdown signals in every thread (gRPC's included, created below) and take them
  // synchronously here: no async-signal-safety concerns, and shutdown runs on a normal thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<std::unique_ptr<Daemon>> daemon = Daemon::Start(*config);
  if (!daemon.ok()) {
    spdlog::critical("event=start_failed msg=\"{}\"", std::string(daemon.status().message()));
    return 1;
  }
  if (!config->port_file.empty() && !WritePortFile(config->port_file, (*daemon)->tcp_port())) {
    spdlog::critical("event=start_failed msg=\"cannot write port_file {}\"", config->port_file);
    return 1;
  }
  spdlog::info("event=serving daemon={} unix_socket={} tcp_port={} tls={} config_file={}",
               (*daemon)->name(), config->unix_socket, (*daemon)->tcp_port(),
               !config->tls_cert.empty(), config->config_file);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  spdlog::info("event=signal signal={}", signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  (*daemon)->Shutdown(absl::Milliseconds(config->shutdown_grace_ms));
  daemon->reset();
  return 0;
}
