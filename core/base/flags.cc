#include "core/base/flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace syncopate {
namespace {

std::vector<std::string> SplitList(const std::string& value) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipEmpty())) {
    out.emplace_back(part);
  }
  return out;
}

std::optional<int64_t> ParseInt(const std::string& text, int64_t lo, int64_t hi) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < lo || v > hi) return std::nullopt;
  return v;
}

// "an integer", "an integer in [1, 64]", "an integer >= 0" (a bound that is the limit of int or
// int64_t is no bound to the reader).
std::string IntWant(int64_t lo, int64_t hi) {
  const bool has_lo = lo != INT64_MIN && lo != INT32_MIN;
  const bool has_hi = hi != INT64_MAX && hi != INT32_MAX;
  if (has_hi) return absl::StrCat("an integer in [", lo, ", ", hi, "]");
  if (has_lo) return absl::StrCat("an integer >= ", lo);
  return "an integer";
}

bool IsChoice(const std::vector<std::string>& choices, const std::string& v) {
  return std::find(choices.begin(), choices.end(), v) != choices.end();
}

}  // namespace

FlagSet::FlagSet(std::string program, std::string about)
    : program_(std::move(program)), about_(std::move(about)) {}

FlagSet::Flag& FlagSet::Add(std::string name, std::string help, std::string metavar,
                            std::string default_text, bool is_bool,
                            std::function<absl::Status(const std::string&)> set) {
  if (name.empty() || name == "help" || by_name_.contains(name)) {
    std::fprintf(stderr, "FlagSet %s: flag --%s declared twice (or reserved)\n", program_.c_str(),
                 name.c_str());
    std::abort();
  }
  by_name_[name] = flags_.size();
  Flag& f = flags_.emplace_back();
  f.name_ = std::move(name);
  f.help_ = std::move(help);
  f.metavar_ = std::move(metavar);
  f.default_text_ = std::move(default_text);
  f.is_bool_ = is_bool;
  f.set_ = std::move(set);
  return f;
}

FlagSet::Flag& FlagSet::Bool(std::string name, bool* target, std::string help) {
  return Add(std::move(name), std::move(help), "", *target ? "true" : "", true,
             [target](const std::string& v) -> absl::Status {
               if (v == "true" || v == "1") {
                 *target = true;
               } else if (v == "false" || v == "0") {
                 *target = false;
               } else {
                 return absl::InvalidArgumentError("want true, false, 1 or 0");
               }
               return absl::OkStatus();
             });
}

FlagSet::Flag& FlagSet::AddInt(std::string name, std::string help, int64_t lo, int64_t hi,
                               std::string default_text, std::function<void(int64_t)> set) {
  return Add(std::move(name), std::move(help), "N", std::move(default_text), false,
             [lo, hi, set = std::move(set)](const std::string& v) -> absl::Status {
               std::optional<int64_t> x = ParseInt(v, lo, hi);
               if (!x) return absl::InvalidArgumentError(absl::StrCat("want ", IntWant(lo, hi)));
               set(*x);
               return absl::OkStatus();
             });
}

FlagSet::Flag& FlagSet::AddIntList(std::string name, std::string help, int64_t lo, int64_t hi,
                                   std::string default_text,
                                   std::function<void(std::vector<int64_t>)> set) {
  return Add(std::move(name), std::move(help), "N,N,..", std::move(default_text), false,
             [lo, hi, set = std::move(set)](const std::string& v) -> absl::Status {
               std::vector<int64_t> out;
               for (const std::string& part : SplitList(v)) {
                 std::optional<int64_t> x = ParseInt(part, lo, hi);
                 if (!x) {
                   return absl::InvalidArgumentError(
                       absl::StrCat("'", part, "' is not ", IntWant(lo, hi)));
                 }
                 out.push_back(*x);
               }
               if (out.empty()) return absl::InvalidArgumentError("want at least one value");
               set(std::move(out));
               return absl::OkStatus();
             });
}

FlagSet::Flag& FlagSet::Double(std::string name, double* target, std::string help, double lo,
                               double hi) {
  return Add(
      std::move(name), std::move(help), "X", absl::StrCat(*target), false,
      [target, lo, hi](const std::string& v) -> absl::Status {
        double x = 0;
        if (!absl::SimpleAtod(v, &x) || !(x >= lo && x <= hi)) {
          if (lo == -std::numeric_limits<double>::infinity() &&
              hi == std::numeric_limits<double>::infinity()) {
            return absl::InvalidArgumentError("want a number");
          }
          return absl::InvalidArgumentError(absl::StrCat("want a number in [", lo, ", ", hi, "]"));
        }
        *target = x;
        return absl::OkStatus();
      });
}

FlagSet::Flag& FlagSet::String(std::string name, std::string* target, std::string help) {
  return Add(std::move(name), std::move(help), "VALUE", *target, false,
             [target](const std::string& v) {
               *target = v;
               return absl::OkStatus();
             });
}

FlagSet::Flag& FlagSet::Choice(std::string name, std::string* target,
                               std::vector<std::string> choices, std::string help) {
  std::string metavar = absl::StrJoin(choices, "|");
  return Add(std::move(name), std::move(help), std::move(metavar), *target, false,
             [target, choices = std::move(choices)](const std::string& v) -> absl::Status {
               if (!IsChoice(choices, v)) {
                 return absl::InvalidArgumentError(
                     absl::StrCat("want one of ", absl::StrJoin(choices, ", ")));
               }
               *target = v;
               return absl::OkStatus();
             });
}

FlagSet::Flag& FlagSet::StringList(std::string name, std::vector<std::string>* target,
                                   std::string help, std::vector<std::string> choices) {
  std::string metavar = choices.empty() ? "A,B,.." : absl::StrJoin(choices, ",");
  return Add(std::move(name), std::move(help), std::move(metavar), absl::StrJoin(*target, ","),
             false, [target, choices = std::move(choices)](const std::string& v) -> absl::Status {
               std::vector<std::string> out = SplitList(v);
               for (const std::string& x : out) {
                 if (!choices.empty() && !IsChoice(choices, x)) {
                   return absl::InvalidArgumentError(
                       absl::StrCat("'", x, "' is not one of ", absl::StrJoin(choices, ", ")));
                 }
               }
               if (out.empty()) return absl::InvalidArgumentError("want at least one value");
               *target = std::move(out);
               return absl::OkStatus();
             });
}

FlagSet::Flag& FlagSet::Repeated(std::string name, std::vector<std::string>* target,
                                 std::string help) {
  return Add(std::move(name), std::move(help) + " (repeatable)", "VALUE",
             absl::StrJoin(*target, " "), false, [target](const std::string& v) {
               target->push_back(v);
               return absl::OkStatus();
             });
}

absl::Status FlagSet::Parse(int argc, const char* const* argv,
                            std::vector<std::string>* positional) {
  return Parse(std::vector<std::string>(argv + std::min(argc, 1), argv + argc), positional);
}

absl::Status FlagSet::Parse(const std::vector<std::string>& args,
                            std::vector<std::string>* positional) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      return absl::OkStatus();
    }
    const bool rest = arg == "--";
    if (rest || arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      for (size_t j = rest ? i + 1 : i; j < (rest ? args.size() : i + 1); ++j) {
        if (positional == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", args[j], "'"));
        }
        positional->push_back(args[j]);
      }
      if (rest) break;
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    const Flag& flag = flags_[it->second];
    if (!value.has_value()) {
      if (flag.is_bool_) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
    }
    if (absl::Status s = flag.set_(*value); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, "=", *value, ": ", s.message()));
    }
    set_[name] = true;
  }
  return absl::OkStatus();
}

void FlagSet::ParseOrExit(int argc, const char* const* argv) {
  absl::Status s = Parse(argc, argv);
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n(%s --help lists the flags)\n", program_.c_str(),
                 std::string(s.message()).c_str(), program_.c_str());
    std::exit(2);
  }
  if (help_) {
    std::fputs(Usage().c_str(), stdout);
    std::exit(0);
  }
}

std::string FlagSet::Usage() const {
  constexpr size_t kHelpColumn = 26;
  std::string out = absl::StrCat("usage: ", program_, " [flags]\n");
  if (!about_.empty()) absl::StrAppend(&out, about_, about_.back() == '\n' ? "" : "\n");
  absl::StrAppend(&out, "\nflags:\n");
  auto entry = [&out](std::string left, const std::string& help) {
    std::vector<std::string> lines = absl::StrSplit(help, '\n');
    if (left.size() + 2 > kHelpColumn) {
      absl::StrAppend(&out, left, "\n");
      left.clear();
    }
    for (const std::string& line : lines) {
      left.resize(kHelpColumn, ' ');
      absl::StrAppend(&out, left, line, "\n");
      left.clear();
    }
  };
  for (const Flag& f : flags_) {
    std::string help = f.help_;
    if (!f.default_text_.empty()) absl::StrAppend(&help, " [", f.default_text_, "]");
    entry(absl::StrCat("  --", f.name_, f.is_bool_ ? "" : " ", f.is_bool_ ? "" : f.metavar_), help);
  }
  entry("  --help", "print this help and exit");
  return out;
}

}  // namespace syncopate
