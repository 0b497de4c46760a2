// Recursive-descent XML reader (see xml_reader.h). Pure functions; thread-safe.
//
// Nesting depth is bounded so a hostile file cannot overflow the stack.
#include "core/plan/xml_reader.h"

#include <cctype>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "core/base/status_macros.h"

namespace syncopate::plan {

const std::string* XmlElement::Attribute(std::string_view name) const {
  for (const auto& [key, value] : attributes) {
    if (key == name) return &value;
  }
  return nullptr;
}

namespace {

constexpr int kMaxDepth = 64;

class Reader {
 public:
  explicit Reader(absl::string_view text) : text_(text) {}

  absl::StatusOr<XmlElement> Document() {
    RETURN_IF_ERROR(SkipMisc());
    if (AtEnd()) return Error("no root element");
    XmlElement root;
    RETURN_IF_ERROR(Element(0, &root));
    RETURN_IF_ERROR(SkipMisc());
    if (!AtEnd()) return Error("content after the root element");
    return root;
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  bool LookingAt(absl::string_view s) const { return text_.substr(pos_, s.size()) == s; }

  void Advance(size_t n = 1) {
    for (size_t i = 0; i < n && pos_ < text_.size(); ++i, ++pos_) {
      if (text_[pos_] == '\n') {
        ++line_;
        column_ = 1;
      } else {
        ++column_;
      }
    }
  }

  absl::Status Error(absl::string_view message) const {
    return absl::InvalidArgumentError(
        absl::StrFormat("line %d, column %d: %s", line_, column_, message));
  }

  void SkipSpace() {
    while (!AtEnd() && std::isspace(static_cast<unsigned char>(Peek()))) Advance();
  }

  // Skips until just past `terminator`; error when the input ends first.
  absl::Status SkipPast(absl::string_view terminator, absl::string_view what) {
    int line = line_, column = column_;
    size_t end = text_.find(terminator, pos_);
    if (end == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrFormat("line %d, column %d: unterminated %s", line, column, what));
    }
    Advance(end + terminator.size() - pos_);
    return absl::OkStatus();
  }

  // Skips a comment or processing instruction at the cursor, true if there was one; other "<!"
  // markup is an error. One place for what may stand between elements and inside content.
  absl::StatusOr<bool> SkipMarkup() {
    if (LookingAt("<!--")) {
      RETURN_IF_ERROR(SkipPast("-->", "comment"));
      return true;
    }
    if (LookingAt("<?")) {
      RETURN_IF_ERROR(SkipPast("?>", "processing instruction"));
      return true;
    }
    if (LookingAt("<!")) return Error("DOCTYPE and CDATA sections are not supported");
    return false;
  }

  // Whitespace, comments and processing instructions between elements.
  absl::Status SkipMisc() {
    while (true) {
      SkipSpace();
      ASSIGN_OR_RETURN(const bool skipped, SkipMarkup());
      if (!skipped) return absl::OkStatus();
    }
  }

  static bool NameChar(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
           c == ':';
  }

  absl::StatusOr<std::string> Name(absl::string_view what) {
    size_t start = pos_;
    if (!std::isalpha(static_cast<unsigned char>(Peek())) && Peek() != '_') {
      return Error(absl::StrCat("expected ", what));
    }
    while (!AtEnd() && NameChar(Peek())) Advance();
    return std::string(text_.substr(start, pos_ - start));
  }

  // Appends the unescaped form of text_[begin, end) (an attribute value or character data).
  absl::Status Unescape(size_t begin, size_t end, std::string* out) {
    for (size_t i = begin; i < end; ++i) {
      if (text_[i] != '&') {
        out->push_back(text_[i]);
        continue;
      }
      size_t semi = text_.find(';', i);
      if (semi == absl::string_view::npos || semi >= end) return Error("unterminated entity");
      absl::string_view entity = text_.substr(i + 1, semi - i - 1);
      if (entity == "amp") {
        out->push_back('&');
      } else if (entity == "lt") {
        out->push_back('<');
      } else if (entity == "gt") {
        out->push_back('>');
      } else if (entity == "quot") {
        out->push_back('"');
      } else if (entity == "apos") {
        out->push_back('\'');
      } else if (!entity.empty() && entity[0] == '#') {
        // Numeric references: only ASCII is meaningful in algorithm files.
        int base = entity.size() > 1 && (entity[1] == 'x' || entity[1] == 'X') ? 16 : 10;
        std::string digits(entity.substr(base == 16 ? 2 : 1));
        char* parse_end = nullptr;
        long code = digits.empty() ? -1 : std::strtol(digits.c_str(), &parse_end, base);
        if (code < 0 || code > 127 || *parse_end != '\0') {
          return Error(absl::StrCat("unsupported character reference &", entity, ";"));
        }
        out->push_back(static_cast<char>(code));
      } else {
        return Error(absl::StrCat("unknown entity &", entity, ";"));
      }
      i = semi;
    }
    return absl::OkStatus();
  }

  absl::Status Element(int depth, XmlElement* out) {
    if (depth >= kMaxDepth) return Error("elements nested too deeply");
    if (Peek() != '<') return Error("expected '<'");
    out->line = line_;
    out->column = column_;
    Advance();
    ASSIGN_OR_RETURN(out->name, Name("an element name"));
    while (true) {
      bool had_space = std::isspace(static_cast<unsigned char>(Peek()));
      SkipSpace();
      if (AtEnd()) return Error(absl::StrCat("unterminated <", out->name, "> tag"));
      if (LookingAt("/>")) {
        Advance(2);
        return absl::OkStatus();
      }
      if (Peek() == '>') {
        Advance();
        break;
      }
      if (!had_space) return Error("expected whitespace between attributes");
      ASSIGN_OR_RETURN(std::string key, Name("an attribute name"));
      SkipSpace();
      if (Peek() != '=') return Error(absl::StrCat("expected '=' after attribute ", key));
      Advance();
      SkipSpace();
      char quote = Peek();
      if (quote != '"' && quote != '\'') {
        return Error(absl::StrCat("attribute ", key, ": value must be quoted"));
      }
      Advance();
      size_t begin = pos_;
      size_t end = text_.find(quote, pos_);
      if (end == absl::string_view::npos) {
        return Error(absl::StrCat("attribute ", key, ": unterminated value"));
      }
      if (text_.substr(begin, end - begin).find('<') != absl::string_view::npos) {
        return Error(absl::StrCat("attribute ", key, ": '<' in value"));
      }
      if (out->Attribute(key) != nullptr) {
        return Error(absl::StrCat("duplicate attribute ", key));
      }
      std::string value;
      RETURN_IF_ERROR(Unescape(begin, end, &value));
      Advance(end + 1 - pos_);
      out->attributes.emplace_back(std::move(key), std::move(value));
    }
    // Content: character data, comments and child elements, up to the matching end tag.
    while (true) {
      size_t begin = pos_;
      while (!AtEnd() && Peek() != '<') Advance();
      RETURN_IF_ERROR(Unescape(begin, pos_, &out->text));
      if (AtEnd()) return Error(absl::StrCat("missing </", out->name, ">"));
      ASSIGN_OR_RETURN(const bool skipped, SkipMarkup());
      if (skipped) continue;
      if (LookingAt("</")) {
        Advance(2);
        ASSIGN_OR_RETURN(std::string name, Name("an end tag name"));
        if (name != out->name) {
          return Error(absl::StrFormat("</%s> does not match <%s> opened at line %d", name,
                                       out->name, out->line));
        }
        SkipSpace();
        if (Peek() != '>') return Error("expected '>'");
        Advance();
        return absl::OkStatus();
      } else {
        out->children.emplace_back();
        RETURN_IF_ERROR(Element(depth + 1, &out->children.back()));
      }
    }
  }

  absl::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  int column_ = 1;
};

}  // namespace

absl::StatusOr<XmlElement> ParseXml(std::string_view text) {
  return Reader(absl::string_view(text.data(), text.size())).Document();
}

}  // namespace syncopate::plan
