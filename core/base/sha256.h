// SHA-256, used for plan hashes and content-addressed kernel-cache keys.
// Stateless apart from the hasher object; a Sha256 instance is not thread-safe, the functions are.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace syncopate {

class Sha256 {
 public:
  Sha256();
  void Update(std::string_view data);
  void Update(const void* data, size_t size);
  // Finishes the hash; the object must not be updated afterwards.
  std::array<uint8_t, 32> Finish();

 private:
  void Compress(const uint8_t* block);
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// Lower-case hex of the SHA-256 of `data` (64 characters).
std::string Sha256Hex(std::string_view data);
std::string ToHex(const uint8_t* data, size_t size);

}  // namespace syncopate
