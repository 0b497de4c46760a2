// See logging.h.
#include "server/logging.h"

#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace syncopate::server {

namespace {

thread_local ProtobufMessagesOnThisThread* t_kept = nullptr;

absl::StatusOr<spdlog::level::level_enum> ParseLevel(const std::string& level) {
  const spdlog::level::level_enum parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("log_level: '", level, "' is not one of trace, debug, info, warn, error"));
  }
  return parsed;
}

// A library's message as one quoted value: escaped (no newline or quote of its own ends the
// line or the field), and bounded.
std::string OneLine(absl::string_view message) {
  constexpr size_t kMaxBytes = 512;
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
    message.remove_suffix(1);
  }
  std::string line = absl::CHexEscape(message.substr(0, kMaxBytes));
  if (message.size() > kMaxBytes) absl::StrAppend(&line, "...");
  return line;
}

std::string BaseName(const char* path) {
  if (path == nullptr) return "?";
  const absl::string_view p(path);
  const size_t slash = p.rfind('/');
  return std::string(slash == absl::string_view::npos ? p : p.substr(slash + 1));
}

void ProtobufLog(google::protobuf::LogLevel level, const char* filename, int line,
                 const std::string& message) {
  if (t_kept != nullptr) {
    t_kept->Keep(message);
    return;
  }
  spdlog::level::level_enum to = spdlog::level::info;
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO: to = spdlog::level::info; break;
    case google::protobuf::LOGLEVEL_WARNING: to = spdlog::level::warn; break;
    case google::protobuf::LOGLEVEL_ERROR: to = spdlog::level::err; break;
    case google::protobuf::LOGLEVEL_FATAL: to = spdlog::level::critical; break;
  }
  spdlog::log(to, "event=library_log lib=protobuf at={}:{} msg=\"{}\"", BaseName(filename), line,
              OneLine(message));
}

void GrpcLog(gpr_log_func_args* args) {
  spdlog::level::level_enum to = spdlog::level::info;
  switch (args->severity) {
    case GPR_LOG_SEVERITY_DEBUG: to = spdlog::level::debug; break;
    case GPR_LOG_SEVERITY_INFO: to = spdlog::level::info; break;
    case GPR_LOG_SEVERITY_ERROR: to = spdlog::level::err; break;
  }
  spdlog::log(to, "event=library_log lib=grpc at={}:{} msg=\"{}\"", BaseName(args->file),
              args->line, OneLine(args->message == nullptr ? "" : args->message));
}

}  // namespace

ProtobufMessagesOnThisThread::ProtobufMessagesOnThisThread() : outer_(t_kept) { t_kept = this; }

ProtobufMessagesOnThisThread::~ProtobufMessagesOnThisThread() { t_kept = outer_; }

void RouteLibraryLogs() {
  google::protobuf::SetLogHandler(&ProtobufLog);
  gpr_set_log_function(&GrpcLog);
}

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
  RouteLibraryLogs();
  return absl::OkStatus();
}

}  // namespace syncopate::server
