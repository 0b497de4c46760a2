// Plan files (see plan_file.h). Stateless; thread-safe.
//
// Built without protobuf (SYNCOPATE_HAVE_PROTO unset, i.e. SYNCOPATE_BUILD_SERVER=OFF), only
// MSCCL XML loads; the protobuf formats answer Unimplemented, so the CLI still links and says why.
#include "core/plan_io/plan_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "core/base/status_macros.h"

#if SYNCOPATE_HAVE_PROTO
#include "core/plan_io/plan_proto.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#endif

namespace syncopate::plan_io {
namespace {

constexpr int64_t kMaxFileBytes = int64_t{1} << 30;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  std::string data = std::move(out).str();
  if (static_cast<int64_t>(data.size()) > kMaxFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": larger than 1 GiB"));
  }
  return data;
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view data) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot create ", tmp, ": ", std::strerror(errno)));
  }
  size_t written = 0;
  while (written < data.size()) {
    ssize_t n = ::write(fd, data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return absl::DataLossError(absl::StrCat(path, ": write failed: ", std::strerror(err)));
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return absl::DataLossError(absl::StrCat(path, ": write failed: ", std::strerror(err)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return absl::DataLossError(absl::StrCat(path, ": rename failed: ", std::strerror(err)));
  }
  return absl::OkStatus();
}

// Prefixes a status message with the file it came from.
absl::Status InFile(std::string_view source, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(absl::string_view(source.data(), source.size()),
                                                  ": ", status.message()));
}

#if SYNCOPATE_HAVE_PROTO
// Keeps the first parse error with its (1-based) position; TextFormat reports 0-based ones.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!error_.empty()) return;
    error_ = line < 0 ? message : absl::StrFormat("%d:%d: %s", line + 1, column + 1, message);
  }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};
#endif

}  // namespace

absl::StatusOr<PlanFileFormat> FormatForPath(std::string_view path) {
  absl::string_view p(path.data(), path.size());
  for (absl::string_view ext : {".textproto", ".txtpb", ".pbtxt", ".textpb"}) {
    if (absl::EndsWith(p, ext)) return PlanFileFormat::kText;
  }
  for (absl::string_view ext : {".pb", ".binpb"}) {
    if (absl::EndsWith(p, ext)) return PlanFileFormat::kBinary;
  }
  if (absl::EndsWith(p, ".xml")) return PlanFileFormat::kMsccl;
  return absl::InvalidArgumentError(
      absl::StrCat(p,
                   ": unknown plan file extension (expected .textproto, .txtpb, .pbtxt, "
                   ".pb, .binpb or .xml)"));
}

absl::StatusOr<plan::Plan> ParsePlanText(std::string_view text, std::string_view source) {
#if SYNCOPATE_HAVE_PROTO
  if (static_cast<int64_t>(text.size()) > std::numeric_limits<int>::max()) {
    return InFile(source, absl::InvalidArgumentError("too large for the text format"));
  }
  v1::Plan proto;
  FirstErrorCollector errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &proto)) {
    return absl::InvalidArgumentError(absl::StrCat(
        absl::string_view(source.data(), source.size()), ":",
        errors.error().empty() ? " cannot parse as syncopate.v1.Plan" : errors.error()));
  }
  auto plan = FromProto(proto);
  if (!plan.ok()) return InFile(source, plan.status());
  return plan;
#else
  return InFile(source, absl::UnimplementedError(
                            "built without protobuf (SYNCOPATE_BUILD_SERVER=OFF): text plan "
                            "files are not supported"));
#endif
}

std::string PlanToText(const plan::Plan& plan) {
#if SYNCOPATE_HAVE_PROTO
  std::string body;
  google::protobuf::TextFormat::Printer printer;
  printer.SetUseShortRepeatedPrimitives(true);  // "lo: [0, 4]" rather than a line per value
  printer.PrintToString(ToProto(plan), &body);
  return absl::StrCat("# proto-file: proto/syncopate/v1/plan.proto\n",
                      "# proto-message: syncopate.v1.Plan\n", "# plan hash: ", plan::PlanHash(plan),
                      "\n\n", body);
#else
  return "# built without protobuf: text plan files are not supported\n";
#endif
}

absl::StatusOr<plan::Plan> LoadPlanFile(const std::string& path, const LoadOptions& options) {
  ASSIGN_OR_RETURN(PlanFileFormat format, FormatForPath(path));
  ASSIGN_OR_RETURN(std::string data, ReadFile(path));
  switch (format) {
    case PlanFileFormat::kText:
      return ParsePlanText(data, path);
    case PlanFileFormat::kBinary: {
#if SYNCOPATE_HAVE_PROTO
      v1::Plan proto;
      if (!proto.ParseFromString(data)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": not a binary syncopate.v1.Plan (malformed protobuf)"));
      }
      auto plan = FromProto(proto);
      if (!plan.ok()) return InFile(path, plan.status());
      return plan;
#else
      return absl::UnimplementedError(
          absl::StrCat(path, ": built without protobuf: binary plan files are not supported"));
#endif
    }
    case PlanFileFormat::kMsccl: {
      auto plan = plan::ImportMscclXml(data, options.msccl);
      if (!plan.ok()) return InFile(path, plan.status());
      return plan;
    }
  }
  return absl::InternalError("unreachable");
}

absl::Status SavePlanFile(const plan::Plan& plan, const std::string& path) {
  ASSIGN_OR_RETURN(PlanFileFormat format, FormatForPath(path));
  switch (format) {
    case PlanFileFormat::kText:
#if SYNCOPATE_HAVE_PROTO
      return WriteFileAtomically(path, PlanToText(plan));
#else
      break;
#endif
    case PlanFileFormat::kBinary: {
#if SYNCOPATE_HAVE_PROTO
      std::string data;
      if (!ToProto(plan).SerializeToString(&data)) {
        return absl::InternalError(absl::StrCat(path, ": cannot serialize the plan"));
      }
      return WriteFileAtomically(path, data);
#else
      break;
#endif
    }
    case PlanFileFormat::kMsccl:
      return absl::UnimplementedError(
          absl::StrCat(path, ": writing MSCCL XML is not supported (save as .textproto or .pb)"));
  }
  return absl::UnimplementedError(
      absl::StrCat(path, ": built without protobuf: only MSCCL XML plan files are supported"));
}

}  // namespace syncopate::plan_io
