// A small XML reader for algorithm files (MSCCL's XML format): elements, attributes, comments,
// the <?xml ...?> declaration and the five predefined entities. Text content is kept but not
// interpreted; DTDs, CDATA and namespaces are not supported (rejected with an error).
//
// Every element records the line and column of its '<', so importers can point at the element
// that is wrong. Errors name the line and column where parsing stopped.
//
// Thread-safety: ParseXml is a pure function; XmlElement is a plain value type.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace syncopate::plan {

struct XmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;  // in document order, unescaped
  std::vector<XmlElement> children;
  std::string text;  // concatenated character data directly inside this element, unescaped
  int line = 0;      // 1-based position of the element's '<'
  int column = 0;

  // The attribute's value, or nullptr when absent.
  const std::string* Attribute(std::string_view name) const;
};

// Parses a document with exactly one root element.
absl::StatusOr<XmlElement> ParseXml(std::string_view text);

}  // namespace syncopate::plan
