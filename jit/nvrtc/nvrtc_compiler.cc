// NVRTC wrapper; see nvrtc_compiler.h. The nvrtcProgram lives in a move-only RAII owner; the
// deadline is enforced by NVRTC's flow callback, which it polls from inside the compile.
#include "jit/nvrtc/nvrtc_compiler.h"

#include <nvrtc.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/base/status_macros.h"
#include "jit/nvrtc/include_scan.h"
#include "jit/nvrtc/log_filter.h"

namespace syncopate::nvrtc {
namespace {

absl::Status NvrtcError(nvrtcResult result, absl::string_view call, absl::string_view program) {
  return absl::InternalError(
      absl::StrCat(call, " failed for program '", program, "': ", nvrtcGetErrorString(result)));
}

// The one owner of an nvrtcProgram.
class Program {
 public:
  static absl::StatusOr<Program> Create(const std::string& source, const CompileOptions& options) {
    std::vector<const char*> names, contents;
    for (const auto& [name, content] : options.headers) {
      names.push_back(name.c_str());
      contents.push_back(content.c_str());
    }
    nvrtcProgram prog = nullptr;
    nvrtcResult result =
        nvrtcCreateProgram(&prog, source.c_str(), options.program_name.c_str(),
                           static_cast<int>(names.size()), contents.data(), names.data());
    if (result != NVRTC_SUCCESS) {
      return NvrtcError(result, "nvrtcCreateProgram", options.program_name);
    }
    return Program(prog);
  }

  Program(Program&& other) noexcept : prog_(std::exchange(other.prog_, nullptr)) {}
  Program& operator=(Program&& other) noexcept {
    if (this != &other) {
      Reset();
      prog_ = std::exchange(other.prog_, nullptr);
    }
    return *this;
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  ~Program() { Reset(); }

  nvrtcProgram get() const { return prog_; }

  std::string Log() const {
    size_t size = 0;
    if (nvrtcGetProgramLogSize(prog_, &size) != NVRTC_SUCCESS || size == 0) return "";
    std::string log(size, '\0');
    if (nvrtcGetProgramLog(prog_, log.data()) != NVRTC_SUCCESS) return "";
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    return log;
  }

 private:
  explicit Program(nvrtcProgram prog) : prog_(prog) {}
  void Reset() {
    if (prog_ != nullptr) nvrtcDestroyProgram(&prog_);  // can only fail on a null program
    prog_ = nullptr;
  }
  nvrtcProgram prog_ = nullptr;
};

// Payload of the flow callback. NVRTC may call it from its own threads, so it only reads the
// (immutable) deadline and the clock and records the decision atomically; once it has said
// "cancel" it keeps saying so, as NVRTC requires.
struct FlowControl {
  std::chrono::steady_clock::time_point deadline;
  std::atomic<bool> cancelled{false};
};

int FlowCallback(void* payload, void* /*reserved*/) {
  auto* flow = static_cast<FlowControl*>(payload);
  if (flow->cancelled.load(std::memory_order_relaxed)) return 1;
  if (std::chrono::steady_clock::now() >= flow->deadline) {
    flow->cancelled.store(true, std::memory_order_relaxed);
    return 1;
  }
  return 0;
}

// One "<file>(<line>): <severity>: <message>" diagnostic from the log, plus the line after it
// (NVRTC echoes the offending source line there).
struct Diagnostic {
  std::string file;
  int line = 0;
  std::string severity;  // "error", "catastrophic error", "warning", ...
  std::string message;
  std::string echo;  // next log line, trimmed
};

std::vector<Diagnostic> ParseDiagnostics(const std::string& log) {
  std::vector<Diagnostic> out;
  std::vector<absl::string_view> lines = absl::StrSplit(log, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::string_view l = lines[i];
    size_t close = l.find("): ");
    if (close == absl::string_view::npos) continue;
    size_t open = l.rfind('(', close);
    if (open == absl::string_view::npos || open == 0) continue;
    int line_no = 0;
    auto [ptr, ec] = std::from_chars(l.data() + open + 1, l.data() + close, line_no);
    if (ec != std::errc() || ptr != l.data() + close) continue;
    absl::string_view rest = l.substr(close + 3);
    size_t colon = rest.find(": ");
    if (colon == absl::string_view::npos) continue;
    Diagnostic d;
    d.file = std::string(l.substr(0, open));
    d.line = line_no;
    d.severity = std::string(rest.substr(0, colon));
    d.message = std::string(rest.substr(colon + 2));
    if (i + 1 < lines.size()) d.echo = std::string(absl::StripAsciiWhitespace(lines[i + 1]));
    out.push_back(std::move(d));
  }
  return out;
}

// Line `line_no` (1-based) of `text`, or nullopt.
std::optional<std::string> LineOf(absl::string_view text, int line_no) {
  if (line_no <= 0) return std::nullopt;
  int current = 1;
  size_t start = 0;
  while (current < line_no) {
    size_t nl = text.find('\n', start);
    if (nl == absl::string_view::npos) return std::nullopt;
    start = nl + 1;
    ++current;
  }
  size_t end = text.find('\n', start);
  absl::string_view line =
      text.substr(start, end == absl::string_view::npos ? text.size() - start : end - start);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return std::string(line);
}

constexpr absl::string_view kNameMapFile = "__nv_name_map";
constexpr absl::string_view kNameMapPragma = "#pragma nv_mangled_name ";

// Builds the InvalidArgument for a failed compile: name-expression errors first (they mean "the
// entry you asked for does not exist"), then every error with its line and source text, then
// the full log.
absl::Status CompileError(const std::string& source, const CompileOptions& options,
                          const std::string& target, const std::string& log) {
  std::vector<Diagnostic> diags = ParseDiagnostics(log);
  std::vector<std::string> missing_names;
  std::string details;
  int errors = 0;
  for (const Diagnostic& d : diags) {
    if (absl::StrContains(d.severity, "warning") || absl::StrContains(d.severity, "remark")) {
      continue;
    }
    if (d.file == kNameMapFile) {
      std::string name =
          absl::StartsWith(d.echo, kNameMapPragma) ? d.echo.substr(kNameMapPragma.size()) : d.echo;
      if (std::find(missing_names.begin(), missing_names.end(), name) == missing_names.end()) {
        missing_names.push_back(name);
      }
      continue;
    }
    ++errors;
    absl::StrAppend(&details, "\n  ", d.file, ":", d.line, ": ", d.severity, ": ", d.message);
    std::optional<std::string> text;
    if (d.file == options.program_name) {
      text = LineOf(source, d.line);
    } else if (auto it = options.headers.find(d.file); it != options.headers.end()) {
      text = LineOf(it->second, d.line);
    }
    if (text.has_value()) absl::StrAppend(&details, "\n    ", d.line, " | ", *text);
  }
  std::string message;
  if (!missing_names.empty()) {
    std::vector<std::string> quoted;
    for (const auto& n : missing_names) quoted.push_back(absl::StrCat("'", n, "'"));
    absl::StrAppend(&message, missing_names.size() == 1 ? "name expression " : "name expressions ",
                    absl::StrJoin(quoted, ", "), missing_names.size() == 1 ? " is" : " are",
                    " not defined in program '", options.program_name,
                    "' (no such entry or template instantiation)");
    if (errors > 0) absl::StrAppend(&message, "; also ");
  }
  if (errors > 0 || missing_names.empty()) {
    absl::StrAppend(&message, "NVRTC could not compile '", options.program_name, "' for ", target,
                    " (", errors, errors == 1 ? " error)" : " errors)", details);
  }
  absl::StrAppend(&message, "\nNVRTC log:\n", log);
  return absl::InvalidArgumentError(message);
}

std::string SupportedList() {
  return absl::StrJoin(SupportedArchs(), ", ",
                       [](std::string* out, int a) { absl::StrAppend(out, "sm_", a); });
}

// Resolves options.arch to the NVRTC target ("sm_90a" or "compute_120") per the header comment.
absl::StatusOr<std::string> ResolveTarget(const CompileOptions& options) {
  ASSIGN_OR_RETURN(Arch arch, ParseArch(options.arch));
  const std::vector<int>& supported = SupportedArchs();
  bool known = std::find(supported.begin(), supported.end(), arch.number) != supported.end();
  std::string prefix = arch.is_virtual ? "compute_" : "sm_";
  if (known) return absl::StrCat(prefix, arch.number, arch.suffix);
  if (arch.is_virtual) {
    return absl::InvalidArgumentError(absl::StrCat("arch '", options.arch,
                                                   "' is not supported by NVRTC ", NvrtcVersion(),
                                                   " (supports ", SupportedList(), ")"));
  }
  int best = 0;
  for (int a : supported) {
    if (a <= arch.number) best = a;
  }
  if (!options.want_ptx_fallback || best == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "arch '", options.arch, "' is not supported by NVRTC ", NvrtcVersion(), " (supports ",
        SupportedList(), ")",
        best == 0 ? "; it is older than every supported arch, so PTX cannot run there either"
                  : "; PTX fallback is off"));
  }
  return absl::StrCat("compute_", best);
}

absl::Status CheckExtraOptions(const CompileOptions& options) {
  for (const std::string& opt : options.extra_options) {
    if (absl::StartsWith(opt, "--gpu-architecture") || absl::StartsWith(opt, "-arch")) {
      return absl::InvalidArgumentError(
          absl::StrCat("extra option '", opt, "' sets the target arch; use CompileOptions::arch"));
    }
  }
  return absl::OkStatus();
}

// NVRTC's command line for `target` (resolved) under `options`.
std::vector<std::string> CompileArgs(const std::string& target, const CompileOptions& options) {
  std::vector<std::string> args;
  args.push_back(absl::StrCat("--gpu-architecture=", target));
  // Includes resolve only against `headers` and `include_paths`: by default NVRTC also searches
  // the program's directory, which for an in-memory program is the process's working directory,
  // a place no cache key covers and a caller of the daemon must not reach.
  args.push_back("--no-source-include");
  for (const std::string& dir : options.include_paths) {
    args.push_back(absl::StrCat("--include-path=", dir));
  }
  args.insert(args.end(), options.extra_options.begin(), options.extra_options.end());
  return args;
}

// The compiled program's binary (PTX or CUBIN, by kernel.is_ptx) and the lowered names of
// options.name_expressions, into `kernel`.
absl::Status ReadOutputs(Program& program, const CompileOptions& options, CompiledKernel& kernel) {
  size_t size = 0;
  if (kernel.is_ptx) {
    nvrtcResult r = nvrtcGetPTXSize(program.get(), &size);
    if (r != NVRTC_SUCCESS) return NvrtcError(r, "nvrtcGetPTXSize", options.program_name);
    kernel.binary.resize(size);
    r = nvrtcGetPTX(program.get(), kernel.binary.data());
    if (r != NVRTC_SUCCESS) return NvrtcError(r, "nvrtcGetPTX", options.program_name);
    // The size includes the terminating NUL; PTX is text.
    while (!kernel.binary.empty() && kernel.binary.back() == '\0') kernel.binary.pop_back();
  } else {
    nvrtcResult r = nvrtcGetCUBINSize(program.get(), &size);
    if (r != NVRTC_SUCCESS) return NvrtcError(r, "nvrtcGetCUBINSize", options.program_name);
    kernel.binary.resize(size);
    r = nvrtcGetCUBIN(program.get(), kernel.binary.data());
    if (r != NVRTC_SUCCESS) return NvrtcError(r, "nvrtcGetCUBIN", options.program_name);
  }
  for (const std::string& name : options.name_expressions) {
    const char* lowered = nullptr;
    nvrtcResult r = nvrtcGetLoweredName(program.get(), name.c_str(), &lowered);
    if (r != NVRTC_SUCCESS || lowered == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("name expression '", name, "' has no lowered name in program '",
                       options.program_name, "': ", nvrtcGetErrorString(r)));
    }
    kernel.lowered_names[name] = lowered;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Arch> ParseArch(const std::string& arch) {
  if (arch == "native") {
    return absl::InvalidArgumentError(
        "arch 'native' must be resolved by the caller to the device's sm_XX before compiling");
  }
  Arch out;
  absl::string_view rest = arch;
  if (absl::ConsumePrefix(&rest, "sm_")) {
    out.is_virtual = false;
  } else if (absl::ConsumePrefix(&rest, "compute_")) {
    out.is_virtual = true;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "arch '", arch, "' is malformed: expected sm_NN, sm_NNa, sm_NNf or compute_NN"));
  }
  if (absl::ConsumeSuffix(&rest, "a")) {
    out.suffix = "a";
  } else if (absl::ConsumeSuffix(&rest, "f")) {
    out.suffix = "f";
  }
  auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), out.number);
  if (rest.empty() || ec != std::errc() || ptr != rest.data() + rest.size() || out.number <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "arch '", arch, "' is malformed: expected sm_NN, sm_NNa, sm_NNf or compute_NN"));
  }
  return out;
}

std::string NvrtcVersion() {
  static const std::string version = [] {
    int major = 0, minor = 0;
    if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return std::string("unknown");
    return absl::StrCat(major, ".", minor);
  }();
  return version;
}

const std::vector<int>& SupportedArchs() {
  static const std::vector<int> archs = [] {
    std::vector<int> out;
    int n = 0;
    if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return out;
    out.resize(n);
    if (nvrtcGetSupportedArchs(out.data()) != NVRTC_SUCCESS) out.clear();
    std::sort(out.begin(), out.end());
    return out;
  }();
  return archs;
}

absl::StatusOr<CompiledKernel> Compile(const std::string& source, const CompileOptions& options) {
  RETURN_IF_ERROR(CheckExtraOptions(options));
  ASSIGN_OR_RETURN(std::string target, ResolveTarget(options));
  bool is_ptx = absl::StartsWith(target, "compute_");

  ASSIGN_OR_RETURN(Program program, Program::Create(source, options));
  for (const std::string& name : options.name_expressions) {
    nvrtcResult r = nvrtcAddNameExpression(program.get(), name.c_str());
    if (r != NVRTC_SUCCESS) {
      return absl::InvalidArgumentError(absl::StrCat("name expression '", name, "' for program '",
                                                     options.program_name,
                                                     "' was rejected: ", nvrtcGetErrorString(r)));
    }
  }

  const std::vector<std::string> args = CompileArgs(target, options);
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());

  FlowControl flow;
  if (options.deadline.has_value()) {
    if (std::chrono::steady_clock::now() >= *options.deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("deadline passed before compiling program '", options.program_name, "'"));
    }
    flow.deadline = *options.deadline;
    nvrtcResult r = nvrtcSetFlowCallback(program.get(), &FlowCallback, &flow);
    if (r != NVRTC_SUCCESS) return NvrtcError(r, "nvrtcSetFlowCallback", options.program_name);
  }

  auto start = std::chrono::steady_clock::now();
  nvrtcResult result =
      nvrtcCompileProgram(program.get(), static_cast<int>(argv.size()), argv.data());
  double compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  // Only lines of files this compile was given (compile_policy.h, log_filter.h).
  std::set<std::string, std::less<>> in_memory = {options.program_name, std::string(kNameMapFile)};
  for (const auto& [name, content] : options.headers) in_memory.insert(name);
  for (std::string& name : LineDirectiveNames(source)) in_memory.insert(std::move(name));
  std::string log = FilterLog(program.Log(), in_memory, options.include_paths);

  if (result == NVRTC_ERROR_CANCELLED || flow.cancelled.load()) {
    return absl::DeadlineExceededError(
        absl::StrCat("compile of program '", options.program_name, "' for ", target,
                     " cancelled at its deadline after ", static_cast<int64_t>(compile_ms), " ms"));
  }
  if (result == NVRTC_ERROR_COMPILATION) return CompileError(source, options, target, log);
  if (result == NVRTC_ERROR_INVALID_OPTION) {
    return absl::InvalidArgumentError(absl::StrCat("NVRTC rejected the options for program '",
                                                   options.program_name, "' (",
                                                   absl::StrJoin(args, " "), "): ", log));
  }
  if (result != NVRTC_SUCCESS) {
    return absl::InternalError(absl::StrCat("nvrtcCompileProgram failed for program '",
                                            options.program_name,
                                            "': ", nvrtcGetErrorString(result), "\n", log));
  }

  CompiledKernel kernel;
  kernel.is_ptx = is_ptx;
  kernel.target = target;
  kernel.log = std::move(log);
  kernel.compile_ms = compile_ms;
  kernel.nvrtc_version = NvrtcVersion();
  RETURN_IF_ERROR(ReadOutputs(program, options, kernel));
  return kernel;
}

}  // namespace syncopate::nvrtc
