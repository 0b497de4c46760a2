// See include_scan.h. One pass over the text turns it into logical lines (splices removed,
// comments replaced by a space, literals kept but marked as such); directives are then read
// off the start of each logical line, and the __has_include family wherever it appears in code.
#include "jit/nvrtc/include_scan.h"

#include <algorithm>
#include <utility>

namespace syncopate::nvrtc {
namespace {

bool IsIdentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;  // UCNs / UTF-8 in identifiers
}
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\r'; }

// One logical line: its text, and where its characters came from (for line numbers).
struct LogicalLine {
  std::string text;
  // (offset in text, physical line) at the start and wherever a physical newline was crossed
  // without ending the logical line (a splice, or a /* */ comment spanning lines).
  std::vector<std::pair<size_t, int>> lines;
  int LineAt(size_t offset) const {
    int line = lines.front().second;
    for (const auto& [at, l] : lines) {
      if (at > offset) break;
      line = l;
    }
    return line;
  }
};

struct OperatorUse {  // an __has_include-like identifier seen in code
  size_t logical_line;
  size_t offset;  // just after the identifier
  std::string name;
};

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) { StartLine(); }

  void Run() {
    while (Peek() != kEnd) {
      const char c = Take();
      if (c == '\n') {
        EndIdent();
        StartLine();
        continue;
      }
      if (c == '/' && Peek() == '/') {
        EndIdent();
        SkipLineComment();
        continue;
      }
      if (c == '/' && Peek() == '*') {
        EndIdent();
        Take();
        SkipBlockComment();
        Emit(' ');
        continue;
      }
      if (c == '\'' && !ident_.empty() && ident_[0] >= '0' && ident_[0] <= '9' &&
          Peek() != kEnd && IsIdentChar(static_cast<char>(Peek()))) {
        // A digit separator (1'000'000) is part of the number, not a character literal; taking
        // it for one could hide a comment start from this scan that the preprocessor sees.
        ident_.push_back(c);
        Emit(c);
        continue;
      }
      if (c == '"' || c == '\'') {
        const bool raw = c == '"' && IsRawPrefix(ident_);
        EndIdent();
        Emit(c);
        if (raw) {
          SkipRawString();
        } else {
          SkipQuoted(c);
        }
        continue;
      }
      if (IsIdentChar(c)) {
        ident_.push_back(c);
      } else {
        EndIdent();
      }
      Emit(c);
    }
    EndIdent();
  }

  std::vector<LogicalLine>& lines() { return lines_; }
  const std::vector<OperatorUse>& operators() const { return operators_; }

 private:
  static constexpr int kEnd = -1;

  // The next character with every backslash-newline splice skipped (translation phase 2).
  int Peek() {
    SkipSplices();
    return pos_ < text_.size() ? static_cast<unsigned char>(text_[pos_]) : kEnd;
  }
  char Take() {
    SkipSplices();
    const char c = text_[pos_++];
    if (c == '\n') ++line_;
    return c;
  }
  void SkipSplices() {
    while (pos_ < text_.size() && text_[pos_] == '\\') {
      size_t next = pos_ + 1;
      if (next < text_.size() && text_[next] == '\r') ++next;
      if (next >= text_.size() || text_[next] != '\n') return;
      pos_ = next + 1;
      ++line_;
      MarkLine();
    }
  }

  void StartLine() {
    lines_.emplace_back();
    lines_.back().lines.emplace_back(0, line_);
  }
  // A physical newline crossed inside the current logical line.
  void MarkLine() {
    if (!lines_.empty()) lines_.back().lines.emplace_back(lines_.back().text.size(), line_);
  }
  void Emit(char c) { lines_.back().text.push_back(c); }

  void EndIdent() {
    if (ident_ == "__has_include" || ident_ == "__has_include_next" || ident_ == "__has_embed") {
      operators_.push_back({lines_.size() - 1, lines_.back().text.size(), ident_});
    }
    ident_.clear();
  }

  void SkipLineComment() {
    while (Peek() != kEnd && Peek() != '\n') Take();
  }
  void SkipBlockComment() {
    while (Peek() != kEnd) {
      const char c = Take();
      if (c == '\n') {
        MarkLine();
      } else if (c == '*' && Peek() == '/') {
        Take();
        return;
      }
    }
  }
  // A "..." or '...' literal; an unterminated one ends at the newline (which is left for Run).
  void SkipQuoted(char quote) {
    while (Peek() != kEnd && Peek() != '\n') {
      const char c = Take();
      Emit(c);
      if (c == '\\' && Peek() != kEnd && Peek() != '\n') {
        Emit(Take());
      } else if (c == quote) {
        return;
      }
    }
  }
  static bool IsRawPrefix(const std::string& ident) {
    return ident == "R" || ident == "LR" || ident == "uR" || ident == "UR" || ident == "u8R";
  }
  // R"delim( ... )delim": the body is raw text (no splices, comments or escapes) and may span
  // lines; a directive cannot start inside it. Not well formed: handled like an ordinary literal.
  void SkipRawString() {
    const size_t open = text_.find('(', pos_);
    if (open == std::string_view::npos || open - pos_ > 16) return SkipQuoted('"');
    const std::string_view delim = text_.substr(pos_, open - pos_);
    if (delim.find_first_of(" \t\n\\)\"") != std::string_view::npos) return SkipQuoted('"');
    const std::string terminator = ")" + std::string(delim) + "\"";
    const size_t close = text_.find(terminator, open + 1);
    const size_t end = close == std::string_view::npos ? text_.size() : close + terminator.size();
    for (size_t i = pos_; i < end; ++i) {
      if (text_[i] == '\n') {
        ++line_;
        MarkLine();
      } else {
        Emit(text_[i]);
      }
    }
    pos_ = end;
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  std::string ident_;
  std::vector<LogicalLine> lines_;
  std::vector<OperatorUse> operators_;
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// Reads a <...> or "..." operand at the start of `s` into `out`.
void ReadOperand(std::string_view s, IncludeDirective& out) {
  s = Trim(s);
  if (!s.empty() && (s.front() == '<' || s.front() == '"')) {
    const char close = s.front() == '<' ? '>' : '"';
    const size_t end = s.find(close, 1);
    if (end != std::string_view::npos) {
      out.name = std::string(s.substr(1, end - 1));
      out.literal = true;
      out.operand = std::string(s.substr(0, end + 1));
      return;
    }
  }
  out.operand = std::string(s);
}

}  // namespace

std::vector<IncludeDirective> FindIncludes(std::string_view text) {
  Scanner scanner(text);
  scanner.Run();
  std::vector<IncludeDirective> found;
  for (const LogicalLine& line : scanner.lines()) {
    std::string_view s = line.text;
    size_t at = 0;
    while (at < s.size() && IsSpace(s[at])) ++at;
    const size_t hash = at;
    if (s.substr(at, 1) == "#") {
      at += 1;
    } else if (s.substr(at, 2) == "%:") {
      at += 2;
    } else if (s.substr(at, 3) == "?" "?=") {
      at += 3;
    } else {
      continue;
    }
    while (at < s.size() && IsSpace(s[at])) ++at;
    size_t end = at;
    while (end < s.size() && IsIdentChar(s[end])) ++end;
    const std::string_view word = s.substr(at, end - at);
    if (word != "include" && word != "include_next" && word != "import" && word != "embed") {
      continue;
    }
    IncludeDirective d;
    d.line = line.LineAt(hash);
    d.directive = std::string(word);
    ReadOperand(s.substr(end), d);
    found.push_back(std::move(d));
  }
  for (const OperatorUse& use : scanner.operators()) {
    const LogicalLine& line = scanner.lines()[use.logical_line];
    IncludeDirective d;
    d.line = line.LineAt(use.offset);
    d.directive = use.name;
    std::string_view rest = Trim(std::string_view(line.text).substr(use.offset));
    if (!rest.empty() && rest.front() == '(') {
      ReadOperand(rest.substr(1), d);
    } else {
      d.operand = std::string(rest.substr(0, 40));
    }
    found.push_back(std::move(d));
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const IncludeDirective& a, const IncludeDirective& b) { return a.line < b.line; });
  return found;
}

std::vector<std::string> LineDirectiveNames(std::string_view text) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view s = Trim(text.substr(start, end - start));
    start = end + 1;
    if (s.empty() || s.front() != '#') continue;
    s = Trim(s.substr(1));
    if (s.substr(0, 4) != "line") continue;
    s = Trim(s.substr(4));
    size_t digits = 0;
    while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
    if (digits == 0) continue;
    s = Trim(s.substr(digits));
    if (s.size() < 2 || s.front() != '"') continue;
    const size_t close = s.find('"', 1);
    if (close == std::string_view::npos) continue;
    std::string name(s.substr(1, close - 1));
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(std::move(name));
  }
  return names;
}

}  // namespace syncopate::nvrtc
