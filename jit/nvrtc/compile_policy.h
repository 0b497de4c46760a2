// What a compile from someone the compiling process does not trust (the daemon's clients) may
// make NVRTC read: its own in-memory headers, the embedded device headers and the CUDA include
// folder, nothing else.
//
// Why: NVRTC opens whatever an #include or an option names, with the compiling process's rights,
// and quotes the offending lines of that file in its log, so `#include "/etc/passwd"` or
// `-include=<token file>` would read any file the daemon can and send it back in the error.
//
// The rules:
//   includes  (found by include_scan.h, in the source and in every header the caller sends)
//             <...> and "..." must name one of the in-memory headers exactly, or a regular file
//             inside one of the include folders; refused: absolute paths, any ".." component,
//             backslashes or control characters, names found nowhere, computed includes
//             (`#include MACRO`: only the preprocessor knows what they name), and
//             #include_next, #import, #embed, __has_include_next, __has_embed (not needed by
//             kernels; each could reach past the rules above). __has_include(<x>) follows the
//             #include rule, so it cannot probe for files elsewhere either.
//   options   an allow-list (kAllowedOptionsHelp): language (-std=c++11|14|17|20), macros
//             (-D/--define-macro=NAME[=value], -U/--undefine-macro=NAME, values printable ASCII
//             without backslashes, so a value cannot smuggle a line into the predefines),
//             code generation (--use_fast_math, --ftz=, --prec-div=, --prec-sqrt=, --fmad=,
//             --maxrregcount=, --extra-device-vectorization, --restrict, --dopt=on|off,
//             -Ofast-compile=), debug info (-lineinfo, -G) and diagnostics (-w,
//             --diag-suppress|error|warn=N[,N]), each in its - and -- spelling. Everything else
//             is refused, notably what reads or writes files (-include, --pre-include, -I,
//             --include-path, @file, --time=, -MD/-MF, --fdevice-time-trace) and the target arch
//             (-arch, --gpu-architecture: the request's arch field sets it, so that it is one
//             part of the cache key, not two).
//   program name  a plain file name: NVRTC resolves quoted includes against its directory.
// Errors are InvalidArgument naming the field, the line and the include or option.
//
// The NVRTC wrapper adds --no-source-include to every compile (nvrtc_compiler.h), so neither
// the program's directory nor the process's working directory is searched; with these checks,
// what the compile can read is exactly what its cache key covers. Files of the include folders
// are trusted (the toolkit): their own includes are not scanned.
//
// Thread-safety: pure functions (CheckIncludes stats files in the include folders).
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace syncopate::nvrtc {

// Where an include may resolve.
struct IncludeRoots {
  std::set<std::string, std::less<>> in_memory;  // header names, exactly as included
  std::vector<std::string> dirs;                 // include folders (the CUDA toolkit's)
};

// `where` prefixes every message ("kernel.source", "kernel.headers[\"a.h\"]").
absl::Status CheckIncludes(absl::string_view text, absl::string_view where,
                           const IncludeRoots& roots);
absl::Status CheckOption(absl::string_view option, absl::string_view where);
absl::Status CheckProgramName(absl::string_view name, absl::string_view where);

// A whole compile as an untrusted caller sent it; `field_prefix` ("kernel.") is put before the
// field names source, headers["..."], options[i] and program_name in messages. The caller's
// headers are added to roots.in_memory (they are what the compile will have).
struct UntrustedCompile {
  absl::string_view source;
  const std::map<std::string, std::string>* headers = nullptr;
  const std::vector<std::string>* options = nullptr;
  absl::string_view program_name;  // "" : the caller picks one
};
absl::Status CheckUntrustedCompile(const UntrustedCompile& compile, IncludeRoots roots,
                                   absl::string_view field_prefix);

// One line for error messages: what the option allow-list accepts.
extern const char kAllowedOptionsHelp[];

}  // namespace syncopate::nvrtc
