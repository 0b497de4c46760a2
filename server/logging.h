// spdlog setup for the daemon: one line per event on stderr (journald / kubectl logs pick it
// up), "time level=... event=... key=value" so lines are greppable and machine-parsable.
// libprotobuf's and gRPC core's own log lines come through spdlog too ("event=library_log"), so
// no library writes its own format ("[libprotobuf ERROR ...", "E1204 12:00:00.000 ...") there.
// Thread-safety: call SetupLogging once at start, before other threads log.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace syncopate::server {

// The daemon's logger, and the libraries' logs routed into it (RouteLibraryLogs).
absl::Status SetupLogging(const std::string& level);

// Only the level of the process's default logger, for the embedded daemon: the host process owns
// its logging setup, so its sink and pattern are left alone (libraries' logs too).
absl::Status SetLogLevel(const std::string& level);

// libprotobuf's log (google::protobuf::SetLogHandler) and gRPC core's (gpr_set_log_function) into
// spdlog's default logger, at their levels; each message escaped onto one line and cut at 512
// bytes. Call before gRPC starts threads; part of SetupLogging.
void RouteLibraryLogs();

// While one lives, libprotobuf's messages logged on its thread are kept in it instead of logged
// (only while RouteLibraryLogs' handler is installed). A request parse uses it to name the field
// at fault in its answer (raw_unary.cc), and a rejected call then gets one log line, not two.
// Scoped, on one thread; nests (the innermost keeps them).
class ProtobufMessagesOnThisThread {
 public:
  ProtobufMessagesOnThisThread();
  ~ProtobufMessagesOnThisThread();
  ProtobufMessagesOnThisThread(const ProtobufMessagesOnThisThread&) = delete;
  ProtobufMessagesOnThisThread& operator=(const ProtobufMessagesOnThisThread&) = delete;

  // The first message kept (empty when none).
  const std::string& first() const { return first_; }
  // The log handler's.
  void Keep(const std::string& message) {
    if (first_.empty()) first_ = message.substr(0, 512);
  }

 private:
  ProtobufMessagesOnThisThread* const outer_;
  std::string first_;
};

}  // namespace syncopate::server
