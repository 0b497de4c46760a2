// The subcommands' flags: FlagSet (core/base/flags.h, the one flag parser of every program)
// under the interface the subcommands were written against. `--name value`, `--name=value`,
// boolean `--name`, and positional arguments (anything not starting with "--"; everything after a
// bare "--").
//
//   FlagParser flags("syncopate plan show");
//   int world = 8;
//   flags.AddInt("world", &world, "number of ranks");
//   std::vector<std::string> positional;
//   if (absl::Status s = flags.Parse(args, &positional); !s.ok()) { ...exit 2... }
//
// absl::flags works on the whole process's argv and global flags; subcommands need flags scoped
// to one command and errors returned instead of exiting, hence FlagSet. Header-only, so every
// subcommand can include this without a build change.
//
// Thread-safety: a FlagParser is used by one thread; it writes through the registered pointers.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "core/base/flags.h"

namespace syncopate::cli {

class FlagParser {
 public:
  explicit FlagParser(std::string command) : flags_(std::move(command)) {}

  // Registers a flag; the pointer must outlive Parse. The current value is the default.
  void AddString(std::string name, std::string* value, std::string help) {
    flags_.String(std::move(name), value, std::move(help));
  }
  void AddInt(std::string name, int* value, std::string help) {
    flags_.Int(std::move(name), value, std::move(help));
  }
  void AddInt64(std::string name, int64_t* value, std::string help) {
    flags_.Int(std::move(name), value, std::move(help));
  }
  // Values up to INT64_MAX.
  void AddUint64(std::string name, uint64_t* value, std::string help) {
    flags_.Int(std::move(name), value, std::move(help));
  }
  // `--name` sets true; `--name=true|false|1|0` sets either. "help" is FlagSet's --help / -h.
  void AddBool(std::string name, bool* value, std::string help) {
    if (name == "help") {
      help_ = value;
      return;
    }
    flags_.Bool(std::move(name), value, std::move(help));
  }

  // Errors (InvalidArgument) name the flag and the value: "--world=x: want an integer",
  // "unknown flag --wrold". Positional arguments go to `positional` (may be null: then they are
  // errors). --help without a registered "help" flag is an unknown flag.
  absl::Status Parse(const std::vector<std::string>& args, std::vector<std::string>* positional) {
    if (absl::Status s = flags_.Parse(args, positional); !s.ok()) return s;
    if (flags_.help()) {
      if (help_ == nullptr) return absl::InvalidArgumentError("unknown flag --help");
      *help_ = true;
    }
    return absl::OkStatus();
  }

  bool WasSet(const std::string& name) const { return flags_.WasSet(name); }
  // "usage: <command> [flags]" and one line per flag with its default.
  std::string Usage() const { return flags_.Usage(); }

 private:
  FlagSet flags_;
  bool* help_ = nullptr;
};

// "64,32" -> {64, 32}. Errors name `what`.
inline absl::StatusOr<std::vector<int64_t>> ParseInt64List(std::string_view text,
                                                           std::string_view what);
// Rows separated by ';' (or '/'), entries by ',': "2,2;1,3" -> {{2,2},{1,3}}.
inline absl::StatusOr<std::vector<std::vector<int64_t>>> ParseInt64Matrix(std::string_view text,
                                                                          std::string_view what);

// ---- implementation ----

namespace flag_parser_internal {

inline absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

template <class T>
absl::StatusOr<T> ParseNumber(absl::string_view text, absl::string_view what) {
  T value{};
  const char* begin = text.data();
  const char* end = begin + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": '", text, "' is not ",
                     ec == std::errc::result_out_of_range ? "in range" : "an integer"));
  }
  return value;
}

}  // namespace flag_parser_internal

inline absl::StatusOr<std::vector<int64_t>> ParseInt64List(std::string_view text,
                                                           std::string_view what) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  for (absl::string_view part : absl::StrSplit(flag_parser_internal::Absl(text), ',')) {
    auto v = flag_parser_internal::ParseNumber<int64_t>(absl::StripAsciiWhitespace(part),
                                                        flag_parser_internal::Absl(what));
    if (!v.ok()) return v.status();
    out.push_back(*v);
  }
  return out;
}

inline absl::StatusOr<std::vector<std::vector<int64_t>>> ParseInt64Matrix(std::string_view text,
                                                                          std::string_view what) {
  std::vector<std::vector<int64_t>> out;
  if (text.empty()) return out;
  for (absl::string_view row :
       absl::StrSplit(flag_parser_internal::Absl(text), absl::ByAnyChar(";/"))) {
    auto values = ParseInt64List(std::string_view(row.data(), row.size()), what);
    if (!values.ok()) return values.status();
    out.push_back(std::move(*values));
  }
  return out;
}

}  // namespace syncopate::cli
