// Kernel-cache keys; see cache_key.h.
#include "jit/cache/cache_key.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/sha256.h"
#include "syncopate/launch_abi.h"

namespace syncopate::cache {
namespace {

// Bump when anything about how keys are formed or what a cached binary means changes.
constexpr int kKeySchemaVersion = 1;

void AppendLengthPrefixed(std::string* out, std::string_view s) {
  uint64_t n = s.size();
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out->append(s.data(), s.size());
}

std::string Plural(size_t n, absl::string_view word) {
  return absl::StrCat(n, " ", word, n == 1 ? "" : "s");
}

}  // namespace

std::string CacheSchemaVersion() {
  return absl::StrCat("kc", kKeySchemaVersion, "-abi", kAbiVersion);
}

std::string NormalizeSource(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  size_t line_start = 0;  // index in `out` where the current line starts
  auto end_line = [&] {
    while (out.size() > line_start && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
    out.push_back('\n');
    line_start = out.size();
  };
  for (size_t i = 0; i < source.size(); ++i) {
    char c = source[i];
    if (c == '\r') {
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      end_line();
    } else if (c == '\n') {
      end_line();
    } else {
      out.push_back(c);
    }
  }
  while (out.size() > line_start && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool IsValidKeyHex(std::string_view hex) {
  if (hex.size() != 64) return false;
  for (char c : hex) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

CacheKey CacheKey::FromParts(const CacheKeyParts& parts) {
  CacheKey key;
  auto add = [&key](std::string name, std::string_view encoding, std::string description) {
    key.parts_.push_back(Part{std::move(name), Sha256Hex(encoding), std::move(description)});
  };

  std::string source = NormalizeSource(parts.source);
  size_t lines = source.empty() ? 0 : 1 + std::count(source.begin(), source.end(), '\n');
  add("source", source, absl::StrCat(source.size(), " bytes normalised, ", Plural(lines, "line")));

  std::string headers;
  std::vector<std::string> header_names;
  for (const auto& [name, content] : parts.headers) {
    AppendLengthPrefixed(&headers, name);
    AppendLengthPrefixed(&headers, NormalizeSource(content));
    header_names.push_back(name);
  }
  add("headers", headers,
      parts.headers.empty() ? "none"
                            : absl::StrCat(Plural(parts.headers.size(), "header"), ": ",
                                           absl::StrJoin(header_names, ", ")));

  add("nvrtc_version", parts.nvrtc_version, parts.nvrtc_version);

  std::string options;
  for (const std::string& o : parts.options) AppendLengthPrefixed(&options, o);
  add("options", options, parts.options.empty() ? "none" : absl::StrJoin(parts.options, " "));

  add("arch", parts.arch, parts.arch);
  add("plan_hash", parts.plan_hash, parts.plan_hash.empty() ? "none" : parts.plan_hash);
  std::string schema = CacheSchemaVersion();
  add("schema", schema, schema);

  std::string combined = "syncopate-kernel-cache-key\n";
  for (const Part& p : key.parts_) absl::StrAppend(&combined, p.name, ":", p.hash, "\n");
  key.hex_ = Sha256Hex(combined);
  return key;
}

CacheKey CacheKey::FromHex(std::string hex) {
  CacheKey key;
  key.hex_ = std::move(hex);
  return key;
}

std::string CacheKey::Explain() const {
  std::string out;
  for (const Part& p : parts_) {
    absl::StrAppend(&out, p.name, std::string(p.name.size() < 14 ? 14 - p.name.size() : 1, ' '),
                    p.hash.substr(0, 16), "  ", p.description, "\n");
  }
  absl::StrAppend(&out, "key           ", hex_, "\n");
  return out;
}

}  // namespace syncopate::cache
