// Finds every directive in CUDA C++ text that can make the preprocessor open a file
// (#include, #include_next, #import, #embed) or ask whether one exists (__has_include,
// __has_include_next, __has_embed), without preprocessing it.
//
// Why: a compile request from another user must not make NVRTC read files it did not send
// (compile_policy.h checks what this finds). The scan is deliberately stricter than the
// preprocessor, so that nothing it misses can open a file:
//   - line continuations (backslash-newline) are spliced first, as in translation phase 2;
//   - comments become a space (a /* */ comment spanning lines joins them, as it does for the
//     preprocessor), string and character literals are skipped so "/*" inside them is no comment;
//   - '#', the digraph "%:" and the trigraph "??=" all introduce a directive, with any spaces
//     and tabs around it;
//   - raw string literals (R"x(...)x", which may span lines) and digit separators (1'000) are
//     lexed as the compiler does, since getting either wrong could hide a comment start;
//   - directives inside #if 0 (or any conditional) are reported too: which branch is live is
//     known only after preprocessing.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace syncopate::nvrtc {

struct IncludeDirective {
  int line = 0;           // 1-based line of the text where the directive (or operator) starts
  std::string directive;  // "include", "include_next", "import", "embed", "__has_include", ...
  std::string operand;    // what follows it, trimmed, as written: "<a.h>", "\"b.h\"", "NAME"
  std::string name;       // between the delimiters of a <...> or "..." operand; "" otherwise
  bool literal = false;   // the operand is a <...> or "..." literal (not a macro to expand)
};

std::vector<IncludeDirective> FindIncludes(std::string_view text);

// The file names `#line N "name"` directives in `text` give to parts of it (the generated kernel
// labels the caller's kernel "kernel.cuh"). NVRTC quotes such parts from the text itself, never
// from a file of that name, so logs may show their lines (log_filter.h). A simple line-by-line
// reading: a directive it misses only makes the log withhold more.
std::vector<std::string> LineDirectiveNames(std::string_view text);

}  // namespace syncopate::nvrtc
