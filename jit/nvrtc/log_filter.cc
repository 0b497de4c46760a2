// See log_filter.h. NVRTC's log is a sequence of blocks: a diagnostic line
// "<file>(<line>): <severity>: <message>", then indented lines (the quoted source line, the
// caret, "detected during ..." notes), then a blank line; plus unindented summary lines
// ("3 errors detected in the compilation of ...", "Remark: ...").
#include "jit/nvrtc/log_filter.h"

#include <charconv>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace syncopate::nvrtc {
namespace {

// The file of a diagnostic line, or nullopt when `line` is not one.
std::optional<absl::string_view> DiagnosticFile(absl::string_view line, size_t* message_at) {
  const size_t close = line.find("): ");
  if (close == absl::string_view::npos) return std::nullopt;
  const size_t open = line.rfind('(', close);
  if (open == absl::string_view::npos || open == 0) return std::nullopt;
  int number = 0;
  auto [ptr, ec] = std::from_chars(line.data() + open + 1, line.data() + close, number);
  if (ec != std::errc() || ptr != line.data() + close) return std::nullopt;
  *message_at = close + 3;
  return line.substr(0, open);
}

bool InsideOneOf(absl::string_view file, const std::vector<std::string>& dirs) {
  if (absl::StrContains(file, "/../")) return false;
  for (const std::string& dir : dirs) {
    if (!dir.empty() && absl::StartsWith(file, dir) && file.size() > dir.size() &&
        (file[dir.size()] == '/' || dir.back() == '/')) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string FilterLog(absl::string_view log, const std::set<std::string, std::less<>>& in_memory,
                      const std::vector<std::string>& include_dirs) {
  enum class Block { kKeep, kHideIndented };
  Block block = Block::kKeep;
  bool withheld = false;  // the marker is already in this block
  std::string out;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    size_t message_at = 0;
    if (std::optional<absl::string_view> file = DiagnosticFile(line, &message_at)) {
      withheld = false;
      if (in_memory.count(*file) > 0) {
        block = Block::kKeep;
        absl::StrAppend(&out, line, "\n");
      } else if (InsideOneOf(*file, include_dirs)) {
        block = Block::kHideIndented;
        absl::StrAppend(&out, line, "\n");
      } else {
        block = Block::kHideIndented;
        // The message may quote the file too ("identifier "X" is undefined").
        const absl::string_view head = line.substr(0, message_at);
        const size_t colon = line.find(": ", message_at);
        absl::StrAppend(&out, head,
                        colon == absl::string_view::npos ? "error"
                                                        : line.substr(message_at, colon - message_at),
                        ": (message withheld: not a file of this compile)\n");
      }
      continue;
    }
    const bool indented = !line.empty() && (line.front() == ' ' || line.front() == '\t');
    if (block == Block::kHideIndented && indented) {
      if (!withheld) absl::StrAppend(&out, kWithheldLine, "\n");
      withheld = true;
      continue;
    }
    if (!indented) block = Block::kKeep;
    absl::StrAppend(&out, line, "\n");
  }
  if (!out.empty()) out.pop_back();  // the split added one newline too many
  return out;
}

}  // namespace syncopate::nvrtc
