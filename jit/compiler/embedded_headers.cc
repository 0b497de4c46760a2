// Lookup over the files embedded by embed_files.cmake (embedded_files.inc, generated).
// Immutable after static initialisation; thread-safe.
#include "jit/compiler/embedded_headers.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace syncopate::jit {
namespace {

struct EmbeddedFile {
  const char* group;  // "device", "example" (a kernel) or "spec" (an example's kernel spec)
  const char* name;
  const char* content;  // NUL-terminated; the files hold no NUL bytes
};

#include "embedded_files.inc"  // defines kEmbeddedFiles[]

}  // namespace

const std::map<std::string, std::string>& DeviceHeaders() {
  static const auto* headers = [] {
    auto* m = new std::map<std::string, std::string>;
    for (const EmbeddedFile& f : kEmbeddedFiles) {
      if (std::string_view(f.group) == "device") m->emplace(f.name, std::string(f.content));
    }
    return m;
  }();
  return *headers;
}

absl::StatusOr<std::string_view> ExampleKernelSource(std::string_view name) {
  for (const EmbeddedFile& f : kEmbeddedFiles) {
    if (std::string_view(f.group) == "example" && name == f.name) {
      return std::string_view(f.content);
    }
  }
  return absl::NotFoundError(absl::StrCat("no example kernel \"", std::string(name), "\" (have ",
                                          absl::StrJoin(ExampleKernelNames(), ", "), ")"));
}

absl::StatusOr<std::string_view> ExampleKernelSpec(std::string_view name) {
  for (const EmbeddedFile& f : kEmbeddedFiles) {
    if (std::string_view(f.group) == "spec" && name == f.name) return std::string_view(f.content);
  }
  return absl::NotFoundError(absl::StrCat("no example kernel spec \"", std::string(name), "\""));
}

std::vector<std::string> ExampleKernelNames() {
  std::vector<std::string> names;
  for (const EmbeddedFile& f : kEmbeddedFiles) {
    if (std::string_view(f.group) == "example") names.emplace_back(f.name);
  }
  return names;
}

}  // namespace syncopate::jit
