// Trims NVRTC's log to what the compile's caller sent: NVRTC quotes the offending line of any
// file a diagnostic points into (then a caret under it), so a log can carry lines of files the
// caller never saw. This keeps every line of diagnostics in the program and its in-memory
// headers, keeps only the "file(line): severity: message" line of diagnostics in the include
// folders (toolkit headers: where, and what, but not the file's text), and withholds even the
// message of diagnostics in any other file (compile_policy.h makes those impossible for
// untrusted compiles; this is the second line of defence, for every compile).
//
// Thread-safety: pure function.
#pragma once

#include <functional>
#include <set>
#include <string>

#include <vector>

#include "absl/strings/string_view.h"

namespace syncopate::nvrtc {

// Marker put where lines were taken out (tests look for it).
inline constexpr char kWithheldLine[] = "  (source line withheld: not a file of this compile)";

std::string FilterLog(absl::string_view log, const std::set<std::string, std::less<>>& in_memory,
                      const std::vector<std::string>& include_dirs);

}  // namespace syncopate::nvrtc
