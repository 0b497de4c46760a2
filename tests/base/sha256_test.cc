#include "core/base/sha256.h"

#include <string>

#include "gtest/gtest.h"

namespace syncopate {
namespace {

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, IncrementalEqualsOneShot) {
  std::string data(1000, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  Sha256 hasher;
  for (size_t i = 0; i < data.size(); i += 13) hasher.Update(data.substr(i, 13));
  auto digest = hasher.Finish();
  EXPECT_EQ(ToHex(digest.data(), digest.size()), Sha256Hex(data));
}

}  // namespace
}  // namespace syncopate
