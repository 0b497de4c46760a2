// spdlog setup for the daemon: one line per event on stderr (journald / kubectl logs pick it
// up), "time level=... event=... key=value" so lines are greppable and machine-parsable.
// Thread-safety: call once at start, before other threads log.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace syncopate::server {

absl::Status SetupLogging(const std::string& level);

// Only the level of the process's default logger, for the embedded daemon: the host process owns
// its logging setup, so its sink and pattern are left alone.
absl::Status SetLogLevel(const std::string& level);

}  // namespace syncopate::server
