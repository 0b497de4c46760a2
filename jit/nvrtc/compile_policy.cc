// See compile_policy.h.
#include "jit/nvrtc/compile_policy.h"

#include <sys/stat.h>

#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "jit/nvrtc/include_scan.h"

namespace syncopate::nvrtc {

const char kAllowedOptionsHelp[] =
    "-std=c++11|c++14|c++17|c++20, -D/--define-macro=NAME[=value], -U/--undefine-macro=NAME, "
    "--use_fast_math, --ftz=, --prec-div=, --prec-sqrt=, --fmad=, --maxrregcount=N, "
    "--extra-device-vectorization, --restrict, --dopt=on|off, -Ofast-compile=0|min|mid|max, "
    "-lineinfo, -G, -w, --diag-suppress|error|warn=N[,N] (options that read or write files, or "
    "set the arch, are refused; the arch field sets the arch)";

namespace {

// Request text in a message: control and non-ASCII bytes as \xNN, so a message stays one line.
std::string Printable(absl::string_view s) {
  std::string out;
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
    } else {
      out.push_back(c);
    }
  }
  return out;
}

absl::Status Refuse(absl::string_view where, const IncludeDirective& d, absl::string_view why) {
  const std::string spelled =
      d.directive.front() == '_' ? absl::StrCat(d.directive, "(", d.operand, ")")
                                 : absl::StrCat("#", d.directive, " ", d.operand);
  return absl::InvalidArgumentError(absl::StrCat(where, ":", d.line, ": ",
                                                 Printable(spelled),
                                                 " is not allowed: ", why));
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Why `name` may not be included, or "" when it may.
std::string IncludeProblem(const std::string& name, const IncludeRoots& roots) {
  if (name.empty()) return "the name is empty";
  for (char c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "the name has a control character";
    if (c == '\\') return "the name has a backslash";
  }
  if (name.front() == '/') return "absolute paths are not searched";
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part == "..") return "'..' would leave the include folders";
  }
  if (roots.in_memory.count(name) > 0) return "";
  for (const std::string& dir : roots.dirs) {
    if (IsRegularFile(absl::StrCat(dir, "/", name))) return "";
  }
  return absl::StrCat(
      "it is none of the request's headers, the embedded device headers or a file of the CUDA "
      "include folder (",
      absl::StrJoin(roots.dirs, ", "), "); send it in headers");
}

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || absl::ascii_isdigit(s.front())) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

bool IsDigitList(absl::string_view s) {  // "177" or "177,550"
  if (s.empty()) return false;
  for (absl::string_view n : absl::StrSplit(s, ',')) {
    if (n.empty() || n.size() > 6) return false;
    for (char c : n) {
      if (!absl::ascii_isdigit(c)) return false;
    }
  }
  return true;
}

// NAME or NAME=value, value printable ASCII without backslashes.
bool IsMacroDefinition(absl::string_view s) {
  const size_t eq = s.find('=');
  if (!IsIdentifier(s.substr(0, eq))) return false;
  if (eq == absl::string_view::npos) return true;
  for (char c : s.substr(eq + 1)) {
    if (c < 0x20 || c > 0x7e || c == '\\') return false;
  }
  return true;
}

// The option without its "-" or "--", so both spellings share one rule.
absl::string_view Bare(absl::string_view option) {
  if (absl::ConsumePrefix(&option, "--")) return option;
  absl::ConsumePrefix(&option, "-");
  return option;
}

bool OneOf(absl::string_view value, std::initializer_list<absl::string_view> allowed) {
  for (absl::string_view a : allowed) {
    if (value == a) return true;
  }
  return false;
}

bool Allowed(absl::string_view option) {
  if (option.size() < 2 || option.front() != '-') return false;
  const absl::string_view bare = Bare(option);
  // Short forms that take their value joined: -DX=1, -UX.
  if (absl::StartsWith(option, "-D") && !absl::StartsWith(option, "--")) {
    return IsMacroDefinition(option.substr(2));
  }
  if (absl::StartsWith(option, "-U") && !absl::StartsWith(option, "--")) {
    return IsIdentifier(option.substr(2));
  }
  if (OneOf(bare, {"use_fast_math", "lineinfo", "generate-line-info", "G", "device-debug", "w",
                   "disable-warnings", "restrict", "extra-device-vectorization", "dopt=on",
                   "dopt=off"})) {
    return true;
  }
  const size_t eq = bare.find('=');
  if (eq == absl::string_view::npos) return false;
  const absl::string_view key = bare.substr(0, eq);
  const absl::string_view value = bare.substr(eq + 1);
  if (key == "std") return OneOf(value, {"c++11", "c++14", "c++17", "c++20"});
  if (key == "define-macro") return IsMacroDefinition(value);
  if (key == "undefine-macro") return IsIdentifier(value);
  if (OneOf(key, {"ftz", "prec-div", "prec-sqrt", "fmad"})) return OneOf(value, {"true", "false"});
  if (key == "maxrregcount") return value.size() <= 4 && IsDigitList(value) && !absl::StrContains(value, ",");
  if (key == "Ofast-compile") return OneOf(value, {"0", "min", "mid", "max"});
  if (OneOf(key, {"diag-suppress", "diag-error", "diag-warn"})) return IsDigitList(value);
  return false;
}

}  // namespace

absl::Status CheckIncludes(absl::string_view text, absl::string_view where,
                           const IncludeRoots& roots) {
  for (const IncludeDirective& d : FindIncludes(std::string_view(text.data(), text.size()))) {
    if (d.directive != "include" && d.directive != "__has_include") {
      return Refuse(where, d, "a compile request may use only #include and __has_include");
    }
    if (!d.literal) {
      return Refuse(where, d,
                    "a computed include (a macro) cannot be checked before preprocessing; write "
                    "the <name> or \"name\" itself");
    }
    if (std::string problem = IncludeProblem(d.name, roots); !problem.empty()) {
      return Refuse(where, d, problem);
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOption(absl::string_view option, absl::string_view where) {
  if (Allowed(option)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(where, ": '", Printable(option),
                                                 "' is not allowed; allowed: ",
                                                 kAllowedOptionsHelp));
}

absl::Status CheckProgramName(absl::string_view name, absl::string_view where) {
  bool plain = !name.empty() && name.size() <= 128 && name != "." && name != "..";
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '.' && c != '-' && c != '+') plain = false;
  }
  if (plain) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      where, ": '", Printable(name),
      "' must be a plain file name (letters, digits, _ . + -; no '/'): NVRTC searches the "
      "program's directory"));
}

absl::Status CheckUntrustedCompile(const UntrustedCompile& compile, IncludeRoots roots,
                                   absl::string_view field_prefix) {
  if (!compile.program_name.empty()) {
    if (absl::Status s = CheckProgramName(compile.program_name,
                                          absl::StrCat(field_prefix, "program_name"));
        !s.ok()) {
      return s;
    }
  }
  if (compile.options != nullptr) {
    for (size_t i = 0; i < compile.options->size(); ++i) {
      if (absl::Status s = CheckOption((*compile.options)[i],
                                       absl::StrCat(field_prefix, "options[", i, "]"));
          !s.ok()) {
        return s;
      }
    }
  }
  if (compile.headers != nullptr) {
    for (const auto& [name, content] : *compile.headers) roots.in_memory.insert(name);
  }
  if (absl::Status s = CheckIncludes(compile.source, absl::StrCat(field_prefix, "source"), roots);
      !s.ok()) {
    return s;
  }
  if (compile.headers != nullptr) {
    for (const auto& [name, content] : *compile.headers) {
      const std::string where =
          absl::StrCat(field_prefix, "headers[\"", Printable(name), "\"]");
      if (absl::Status s = CheckIncludes(content, where, roots); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace syncopate::nvrtc
