// NVRTC wrapper: compiles one CUDA C++ translation unit to a cubin for an exact sm_XX, or to PTX
// when the requested arch is newer than this NVRTC knows (see "Arch resolution" below).
//
// Errors (absl::Status):
//   InvalidArgument   the source does not compile (message: program name, target, each error
//                     with its line number and that line's text, then NVRTC's full log), a name
//                     expression that is not defined (message names it), a malformed or
//                     unsupported arch, an option that conflicts with the ones set here.
//   DeadlineExceeded  CompileOptions::deadline passed before or during the compile (the compile
//                     is cancelled through nvrtcSetFlowCallback, not left running).
//   Internal          any other NVRTC failure.
//
// Arch resolution:
//   "sm_NN[a|f]"       cubin for sm_NN if NVRTC supports NN (nvrtcGetSupportedArchs).
//                      If it does not and NN is above the lowest supported arch, and
//                      want_ptx_fallback is set, PTX for compute_MM where MM is the highest
//                      supported arch <= NN (the driver JITs PTX forward, never backward; an
//                      "a"/"f" suffix is dropped because arch-specific PTX does not run forward).
//                      So "sm_999" gives PTX for the newest arch this NVRTC knows. Otherwise
//                      InvalidArgument listing the supported archs.
//   "compute_NN[a|f]"  PTX for that virtual arch (must be supported).
//   "native"           rejected: the caller resolves it from the device (the runtime knows the
//                      GPU; this layer must not touch the driver).
//
// What a compile reads: `source`, `headers` and files under `include_paths`, nothing else
// (--no-source-include is always passed, so neither the program's directory nor the working
// directory is searched). Logs and error messages quote lines only of the source and the
// in-memory headers; diagnostics in other files keep their location and message but not their
// text (log_filter.h). Untrusted callers check their input with compile_policy.h first.
//
// Thread-safety: Compile() and the version queries are thread-safe; concurrent compiles run in
// parallel (NVRTC programs are independent).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace syncopate::nvrtc {

struct CompileOptions {
  // "sm_90", "sm_90a", "sm_80", "compute_90", ... ; see "Arch resolution" above.
  std::string arch = "sm_90";
  // Extra NVRTC options, passed in order after the ones set here (e.g. "-std=c++17",
  // "-DTILE_M=128", "--use_fast_math"). Must not set the target arch.
  std::vector<std::string> extra_options;
  // Directories searched for #include "..." (passed as --include-path=). Files found this way are
  // NOT part of any cache key; prefer `headers` for anything the kernel depends on.
  std::vector<std::string> include_paths;
  // In-memory headers: include name (as written in #include) -> content.
  std::map<std::string, std::string> headers;
  // Host-side names of the entries to look up after compiling (e.g. "gemm<128, 64>" or "my_entry");
  // their mangled names end up in CompiledKernel::lowered_names. A name the program does not
  // define is an InvalidArgument naming it.
  std::vector<std::string> name_expressions;
  // Name of the program in logs and error messages ("<name>(12): error: ...").
  std::string program_name = "syncopate_kernel.cu";
  // The compile is cancelled once this passes (steady clock). nullopt: no deadline.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // Produce PTX for the newest supported arch when `arch` is newer than this NVRTC knows.
  bool want_ptx_fallback = true;
};

struct CompiledKernel {
  std::string binary;  // cubin (ELF) bytes, or PTX text when is_ptx
  bool is_ptx = false;
  std::string target;         // what the binary is for: "sm_90", "sm_90a", "compute_120", ...
  std::string log;            // NVRTC's log (warnings), may be empty
  double compile_ms = 0;      // wall time of nvrtcCompileProgram
  std::string nvrtc_version;  // "13.0"
  std::map<std::string, std::string> lowered_names;  // name expression -> mangled entry name
};

// Compiles `source`. See the file comment for errors and arch handling.
absl::StatusOr<CompiledKernel> Compile(const std::string& source, const CompileOptions& options);

// "major.minor" of the linked NVRTC, e.g. "13.0". Part of every kernel-cache key.
std::string NvrtcVersion();

// The real archs this NVRTC can emit cubins for (e.g. {75, 80, ..., 90, 100, 120}), ascending.
const std::vector<int>& SupportedArchs();

// Parsed "sm_90a" -> {number 90, suffix "a", is_virtual false}. Exposed for tests and callers
// that want to validate an arch before building a cache key.
struct Arch {
  int number = 0;
  std::string suffix;       // "", "a" or "f"
  bool is_virtual = false;  // compute_XX
};
absl::StatusOr<Arch> ParseArch(const std::string& arch);

}  // namespace syncopate::nvrtc
