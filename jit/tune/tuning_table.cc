// Persistent table of tuned GEMM configurations; see tuning_table.h for the format.
#include "jit/tune/tuning_table.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/base/atomic_file.h"
#include "core/base/scoped_fd.h"
#include "core/base/status_macros.h"

namespace syncopate::tune {
namespace {

constexpr absl::string_view kFormat = "1";
// Every line a file has, in the order Store writes them; vs_cublas alone is optional.
constexpr const char* kFields[] = {"format", "family", "arch",   "dtype", "m",  "n",
                                   "k",      "tile_n", "stages", "loads", "ms", "vs_cublas"};

bool IsName(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// Shortest text that reads back as the same double (std::to_chars), so Store/Lookup round-trip.
std::string FormatDouble(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, end);
}

template <class T>
bool ParseNumber(absl::string_view text, T* out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

bool ValidMs(double v) { return std::isfinite(v) && v > 0; }

// What Store refuses and Lookup reports: the same rules on both sides.
std::string ProblemWith(const TunedGemm& v) {
  if (v.tile_n <= 0) return absl::StrCat("tile_n ", v.tile_n, " is not positive");
  if (v.stages <= 0) return absl::StrCat("stages ", v.stages, " is not positive");
  if (v.loads != "tma" && v.loads != "cpasync") {
    return absl::StrCat("loads \"", v.loads, "\" is neither tma nor cpasync");
  }
  if (!ValidMs(v.ms)) return absl::StrCat("ms ", v.ms, " is not a positive time");
  if (v.vs_cublas && !ValidMs(*v.vs_cublas)) {
    return absl::StrCat("vs_cublas ", *v.vs_cublas, " is not a positive ratio");
  }
  return "";
}

absl::Status CheckKey(const TuningKey& key) {
  if (!IsName(key.family) || !IsName(key.arch)) {
    return absl::InvalidArgumentError(absl::StrCat("tuning key: family \"", key.family,
                                                   "\" and arch \"", key.arch,
                                                   "\" must be non-empty [A-Za-z0-9_]"));
  }
  if (key.m <= 0 || key.n <= 0 || key.k <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tuning key: shape ", key.m, "x", key.n, "x", key.k, " is not positive"));
  }
  return absl::OkStatus();
}

std::string Format(const TuningKey& key, const TunedGemm& v) {
  std::string out = "# tuned by `syncopate tune`; one \"key value\" per line\n";
  absl::StrAppend(&out, "format ", kFormat, "\nfamily ", key.family, "\narch ", key.arch,
                  "\ndtype ", plan::DTypeName(key.dtype), "\nm ", key.m, "\nn ", key.n, "\nk ",
                  key.k, "\ntile_n ", v.tile_n, "\nstages ", v.stages, "\nloads ", v.loads, "\nms ",
                  FormatDouble(v.ms), "\n");
  if (v.vs_cublas) absl::StrAppend(&out, "vs_cublas ", FormatDouble(*v.vs_cublas), "\n");
  return out;
}

// One parsed line: its number and text (for messages) and its value.
struct Line {
  int number = 0;
  std::string text;
  std::string value;
};

class Parser {
 public:
  Parser(std::string path, const TuningKey& key) : path_(std::move(path)), key_(key) {}

  absl::StatusOr<TunedGemm> Parse(absl::string_view contents) {
    int number = 0;
    for (absl::string_view raw : absl::StrSplit(contents, '\n')) {
      ++number;
      absl::string_view text = absl::StripAsciiWhitespace(raw);
      if (text.empty() || text[0] == '#') continue;
      std::vector<absl::string_view> parts =
          absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipEmpty());
      Line line{number, std::string(text), parts.size() > 1 ? std::string(parts[1]) : ""};
      if (parts.size() != 2) return Error(line, "expected \"key value\"");
      if (std::find(std::begin(kFields), std::end(kFields), parts[0]) == std::end(kFields)) {
        return Error(line, absl::StrCat("unknown key \"", parts[0], "\""));
      }
      if (!lines_.emplace(std::string(parts[0]), line).second) {
        return Error(line, absl::StrCat("\"", parts[0], "\" given twice"));
      }
    }
    for (const char* field : kFields) {
      if (!lines_.contains(field) && absl::string_view(field) != "vs_cublas") {
        return absl::DataLossError(absl::StrCat(path_, ": no \"", field, "\" line"));
      }
    }
    RETURN_IF_ERROR(Expect("format", std::string(kFormat)));
    RETURN_IF_ERROR(Expect("family", key_.family));
    RETURN_IF_ERROR(Expect("arch", key_.arch));
    RETURN_IF_ERROR(Expect("dtype", plan::DTypeName(key_.dtype)));
    RETURN_IF_ERROR(Expect("m", absl::StrCat(key_.m)));
    RETURN_IF_ERROR(Expect("n", absl::StrCat(key_.n)));
    RETURN_IF_ERROR(Expect("k", absl::StrCat(key_.k)));
    TunedGemm v;
    RETURN_IF_ERROR(Number("tile_n", &v.tile_n));
    RETURN_IF_ERROR(Number("stages", &v.stages));
    RETURN_IF_ERROR(Number("ms", &v.ms));
    v.loads = lines_["loads"].value;
    if (lines_.contains("vs_cublas")) RETURN_IF_ERROR(Number("vs_cublas", &v.vs_cublas.emplace()));
    if (std::string problem = ProblemWith(v); !problem.empty()) {
      // Name the line that holds the bad value.
      const std::string field = problem.substr(0, problem.find(' '));
      return Error(lines_[field], problem);
    }
    return v;
  }

 private:
  absl::Status Error(const Line& line, absl::string_view what) const {
    return absl::DataLossError(
        absl::StrCat(path_, ":", line.number, ": ", what, " (line \"", line.text, "\")"));
  }
  // The key lines must repeat the key the file is named after: a copied or hand-edited file for
  // another shape is not silently used.
  absl::Status Expect(const std::string& field, const std::string& want) {
    const Line& line = lines_[field];
    if (line.value == want) return absl::OkStatus();
    return Error(line, absl::StrCat(field, " should be ", want, " for this file"));
  }
  template <class T>
  absl::Status Number(const std::string& field, T* out) {
    const Line& line = lines_[field];
    if (ParseNumber(line.value, out)) return absl::OkStatus();
    return Error(line, absl::StrCat(field, " \"", line.value, "\" is not a number"));
  }

  std::string path_;
  const TuningKey& key_;
  std::map<std::string, Line> lines_;
};

}  // namespace

TuningTable::TuningTable(const std::string& cache_dir) : dir_(cache_dir + "/tuning") {}

std::string TuningTable::PathFor(const TuningKey& key) const {
  return absl::StrCat(dir_, "/", key.family, ".", key.arch, ".", plan::DTypeName(key.dtype), ".",
                      key.m, "x", key.n, "x", key.k, ".tune");
}

absl::Status TuningTable::Store(const TuningKey& key, const TunedGemm& value) const {
  RETURN_IF_ERROR(CheckKey(key));
  if (std::string problem = ProblemWith(value); !problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("tuned config: ", problem));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot create tuning directory '", dir_, "': ", ec.message()));
  }
  return ReplaceFileAtomically(PathFor(key), Format(key, value));
}

absl::StatusOr<TunedGemm> TuningTable::Lookup(const TuningKey& key) const {
  RETURN_IF_ERROR(CheckKey(key));
  const std::string path = PathFor(key);
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT)
      return absl::NotFoundError(absl::StrCat("no tuned config at '", path, "'"));
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot open '", path, "'"));
  }
  std::string contents;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot read '", path, "'"));
    if (n == 0) break;
    contents.append(buf, static_cast<size_t>(n));
    // Entries are a few hundred bytes; anything large is not one of ours.
    if (contents.size() > (64 << 10)) {
      return absl::DataLossError(absl::StrCat(path, ": larger than 64 KiB, not a tuning file"));
    }
  }
  return Parser(path, key).Parse(contents);
}

}  // namespace syncopate::tune
