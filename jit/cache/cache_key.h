// Content-addressed kernel-cache keys: everything that can change the compiled binary goes into
// one SHA-256. Two requests get the same key exactly when they would compile to the same cubin.
//
// Parts, each hashed on its own and then combined (length-prefixed, labelled) into the key:
//   source          the CUDA source, normalised (CRLF/CR -> LF, trailing blanks on each line and
//                   trailing empty lines dropped) so editor noise does not split the cache
//   headers         in-memory headers, sorted by name, each name + normalised content
//   nvrtc_version   "13.0" (a new NVRTC may emit different code)
//   options         NVRTC options in the order given (order can matter: -D redefinitions)
//   arch            "sm_90a", ...
//   plan_hash       the chunk plan's stable hash ("" for a plain local kernel)
//   schema          cache format version and launch-ABI version (kAbiVersion): a new ABI must
//                   never load an old binary
// Files reached through include paths are not hashed: pass every header the kernel depends on
// as an in-memory header.
//
// Thread-safety: CacheKey is an immutable value; all functions are thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace syncopate::cache {

struct CacheKeyParts {
  std::string source;
  std::map<std::string, std::string> headers;  // name -> content (std::map: already sorted)
  std::string nvrtc_version;
  std::vector<std::string> options;
  std::string arch;
  std::string plan_hash;
};

// "kc<format>-abi<kAbiVersion>"; bumping either invalidates every key.
std::string CacheSchemaVersion();

// CRLF/CR -> LF, trailing spaces/tabs removed from each line, trailing empty lines removed.
std::string NormalizeSource(std::string_view source);

class CacheKey {
 public:
  // Computes the key of `parts`.
  static CacheKey FromParts(const CacheKeyParts& parts);
  // Wraps an already computed 64-character lowercase hex key (e.g. read from disk); no parts
  // are known, so Explain() says only the key. Callers validate with IsValidKeyHex() first.
  static CacheKey FromHex(std::string hex);

  const std::string& hex() const { return hex_; }

  // One line per part: its name, the SHA-256 of its canonical encoding and a short description
  // (sizes, values), then the combined key. For `syncopate cache key --explain` and for
  // answering "why did this miss?".
  std::string Explain() const;

  bool operator==(const CacheKey& other) const { return hex_ == other.hex_; }

 private:
  struct Part {
    std::string name;
    std::string hash;
    std::string description;
  };
  std::string hex_;
  std::vector<Part> parts_;
};

bool IsValidKeyHex(std::string_view hex);

}  // namespace syncopate::cache
