// See logging.h.
#include "server/logging.h"

#include "absl/strings/str_cat.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace syncopate::server {

namespace {

absl::StatusOr<spdlog::level::level_enum> ParseLevel(const std::string& level) {
  const spdlog::level::level_enum parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("log_level: '", level, "' is not one of trace, debug, info, warn, error"));
  }
  return parsed;
}

}  // namespace

absl::Status SetLogLevel(const std::string& level) {
  absl::StatusOr<spdlog::level::level_enum> parsed = ParseLevel(level);
  if (!parsed.ok()) return parsed.status();
  spdlog::set_level(*parsed);
  return absl::OkStatus();
}

absl::Status SetupLogging(const std::string& level) {
  absl::StatusOr<spdlog::level::level_enum> parsed_or = ParseLevel(level);
  if (!parsed_or.ok()) return parsed_or.status();
  const spdlog::level::level_enum parsed = *parsed_or;
  auto logger = spdlog::stderr_logger_mt("syncopated");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%fZ level=%l %v", spdlog::pattern_time_type::utc);
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return absl::OkStatus();
}

}  // namespace syncopate::server
