// A small flag parser for subcommands: `--name value`, `--name=value`, boolean `--name`, and
// positional arguments (anything not starting with "--"; everything after a bare "--").
//
// absl::flags works on the whole process's argv and global flags; subcommands need flags scoped
// to one command and errors returned instead of exiting, hence this. Usage:
//
//   FlagParser flags("syncopate plan show");
//   int world = 8;
//   flags.AddInt("world", &world, "number of ranks");
//   std::vector<std::string> positional;
//   if (absl::Status s = flags.Parse(args, &positional); !s.ok()) { ...exit 2... }
//
// Header-only: client/cli/CMakeLists.txt compiles main.cc and *_command.cc only, so every
// subcommand can include this without a build change.
//
// Thread-safety: a FlagParser is used by one thread; it writes through the registered pointers.
#pragma once

#include <charconv>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace syncopate::cli {

class FlagParser {
 public:
  explicit FlagParser(std::string command) : command_(std::move(command)) {}

  // Registers a flag; the pointer must outlive Parse. The current value is the default.
  void AddString(std::string name, std::string* value, std::string help);
  void AddInt(std::string name, int* value, std::string help);
  void AddInt64(std::string name, int64_t* value, std::string help);
  void AddUint64(std::string name, uint64_t* value, std::string help);
  // `--name` sets true; `--name=true|false|1|0` sets either.
  void AddBool(std::string name, bool* value, std::string help);

  // Errors (InvalidArgument) name the flag: "--world: 'x' is not an integer", "unknown flag
  // --wrold". Positional arguments go to `positional` (may be null: then they are errors).
  absl::Status Parse(const std::vector<std::string>& args, std::vector<std::string>* positional);

  bool WasSet(const std::string& name) const { return set_.contains(name); }
  // "usage: <command> [flags]" and one line per flag with its default.
  std::string Usage() const;

 private:
  struct Flag {
    std::string help;
    std::string default_text;
    bool is_bool = false;
    std::function<absl::Status(const std::string&)> set;
  };
  void Add(std::string name, Flag flag);

  std::string command_;
  std::map<std::string, Flag> flags_;
  std::map<std::string, bool> set_;
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

inline void FlagParser::Add(std::string name, Flag flag) {
  flags_[std::move(name)] = std::move(flag);
}

inline void FlagParser::AddString(std::string name, std::string* value, std::string help) {
  Add(name, Flag{std::move(help), *value, false, [value](const std::string& text) {
                   *value = text;
                   return absl::OkStatus();
                 }});
}

inline void FlagParser::AddInt(std::string name, int* value, std::string help) {
  const std::string flag = "--" + name;
  Add(name, Flag{std::move(help), std::to_string(*value), false,
                 [value, flag](const std::string& text) -> absl::Status {
                   auto v = flag_parser_internal::ParseNumber<int>(text, flag);
                   if (!v.ok()) return v.status();
                   *value = *v;
                   return absl::OkStatus();
                 }});
}

inline void FlagParser::AddInt64(std::string name, int64_t* value, std::string help) {
  const std::string flag = "--" + name;
  Add(name, Flag{std::move(help), std::to_string(*value), false,
                 [value, flag](const std::string& text) -> absl::Status {
                   auto v = flag_parser_internal::ParseNumber<int64_t>(text, flag);
                   if (!v.ok()) return v.status();
                   *value = *v;
                   return absl::OkStatus();
                 }});
}

inline void FlagParser::AddUint64(std::string name, uint64_t* value, std::string help) {
  const std::string flag = "--" + name;
  Add(name, Flag{std::move(help), std::to_string(*value), false,
                 [value, flag](const std::string& text) -> absl::Status {
                   auto v = flag_parser_internal::ParseNumber<uint64_t>(text, flag);
                   if (!v.ok()) return v.status();
                   *value = *v;
                   return absl::OkStatus();
                 }});
}

inline void FlagParser::AddBool(std::string name, bool* value, std::string help) {
  const std::string flag = "--" + name;
  Add(name, Flag{std::move(help), *value ? "true" : "false", true,
                 [value, flag](const std::string& text) -> absl::Status {
                   if (text == "true" || text == "1") {
                     *value = true;
                   } else if (text == "false" || text == "0") {
                     *value = false;
                   } else {
                     return absl::InvalidArgumentError(
                         absl::StrCat(flag, ": '", text, "' is not true or false"));
                   }
                   return absl::OkStatus();
                 }});
}

inline absl::Status FlagParser::Parse(const std::vector<std::string>& args,
                                      std::vector<std::string>* positional) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      for (++i; i < args.size(); ++i) {
        if (positional == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", args[i], "'"));
        }
        positional->push_back(args[i]);
      }
      break;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      if (positional == nullptr || (arg.size() > 1 && arg[0] == '-')) {
        return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
      }
      positional->push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    auto it = flags_.find(name);
    if (it == flags_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    const Flag& flag = it->second;
    if (!value.has_value()) {
      if (flag.is_bool) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("--", name, ": missing value"));
      }
    }
    if (absl::Status s = flag.set(*value); !s.ok()) return s;
    set_[name] = true;
  }
  return absl::OkStatus();
}

inline std::string FlagParser::Usage() const {
  std::string out = absl::StrCat("usage: ", command_, " [flags]\nflags:\n");
  for (const auto& [name, flag] : flags_) {
    absl::StrAppend(&out, "  --", name, flag.is_bool ? "" : " <value>", "\n      ", flag.help);
    if (!flag.default_text.empty()) absl::StrAppend(&out, " (default: ", flag.default_text, ")");
    absl::StrAppend(&out, "\n");
  }
  return out;
}

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
