// Tests for jit/cache/cache_key: stability, normalisation, and that every part moves the key.
#include "jit/cache/cache_key.h"

#include <functional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::cache {
namespace {

using ::testing::HasSubstr;

CacheKeyParts BaseParts() {
  CacheKeyParts parts;
  parts.source = "extern \"C\" __global__ void k(float* x) {\n  x[0] = 1;\n}\n";
  parts.headers = {{"syncopate/device.cuh", "#pragma once\n"}, {"tile.cuh", "int t;\n"}};
  parts.nvrtc_version = "13.0";
  parts.options = {"-std=c++17", "-DTILE=128"};
  parts.arch = "sm_90a";
  parts.plan_hash = "3f2a";
  return parts;
}

TEST(CacheKeyTest, StableAndHex) {
  CacheKey a = CacheKey::FromParts(BaseParts());
  CacheKey b = CacheKey::FromParts(BaseParts());
  EXPECT_EQ(a.hex(), b.hex());
  EXPECT_TRUE(IsValidKeyHex(a.hex()));
}

TEST(CacheKeyTest, NormalisationIgnoresLineEndingsAndTrailingBlanks) {
  CacheKeyParts crlf = BaseParts();
  crlf.source = "extern \"C\" __global__ void k(float* x) {  \r\n  x[0] = 1;\t\r\n}\r\n\r\n";
  crlf.headers["tile.cuh"] = "int t;   \r\n";
  EXPECT_EQ(CacheKey::FromParts(crlf).hex(), CacheKey::FromParts(BaseParts()).hex());
  EXPECT_EQ(NormalizeSource("a \r\nb\rc\t\n\n"), "a\nb\nc");
  // Leading whitespace is meaningful (and line structure is kept).
  EXPECT_EQ(NormalizeSource("  a\n\nb"), "  a\n\nb");
}

struct Mutation {
  const char* name;
  std::function<void(CacheKeyParts&)> apply;
};

class CacheKeySensitivityTest : public ::testing::TestWithParam<Mutation> {};

TEST_P(CacheKeySensitivityTest, ChangesKey) {
  CacheKeyParts parts = BaseParts();
  GetParam().apply(parts);
  EXPECT_NE(CacheKey::FromParts(parts).hex(), CacheKey::FromParts(BaseParts()).hex());
}

INSTANTIATE_TEST_SUITE_P(
    EveryPart, CacheKeySensitivityTest,
    ::testing::Values(
        Mutation{"source", [](CacheKeyParts& p) { p.source += "// more\n"; }},
        Mutation{"source_indent", [](CacheKeyParts& p) { p.source = " " + p.source; }},
        Mutation{"header_content", [](CacheKeyParts& p) { p.headers["tile.cuh"] = "int u;\n"; }},
        Mutation{"header_name",
                 [](CacheKeyParts& p) {
                   p.headers["tile2.cuh"] = p.headers["tile.cuh"];
                   p.headers.erase("tile.cuh");
                 }},
        Mutation{"header_added", [](CacheKeyParts& p) { p.headers["x.cuh"] = ""; }},
        Mutation{"nvrtc_version", [](CacheKeyParts& p) { p.nvrtc_version = "13.1"; }},
        Mutation{"option_value", [](CacheKeyParts& p) { p.options[1] = "-DTILE=64"; }},
        Mutation{"option_order", [](CacheKeyParts& p) { std::swap(p.options[0], p.options[1]); }},
        Mutation{"option_split", [](CacheKeyParts& p) { p.options = {"-std=c++17 -DTILE=128"}; }},
        Mutation{"arch", [](CacheKeyParts& p) { p.arch = "sm_90"; }},
        Mutation{"plan_hash", [](CacheKeyParts& p) { p.plan_hash = "3f2b"; }},
        Mutation{"plan_hash_empty", [](CacheKeyParts& p) { p.plan_hash.clear(); }}),
    [](const ::testing::TestParamInfo<Mutation>& info) { return info.param.name; });

TEST(CacheKeyTest, HeaderBoundariesAreUnambiguous) {
  CacheKeyParts a = BaseParts(), b = BaseParts();
  a.headers = {{"ab", "c"}};
  b.headers = {{"a", "bc"}};
  EXPECT_NE(CacheKey::FromParts(a).hex(), CacheKey::FromParts(b).hex());
}

TEST(CacheKeyTest, ExplainListsEveryPart) {
  CacheKey key = CacheKey::FromParts(BaseParts());
  std::string explain = key.Explain();
  for (const char* part :
       {"source", "headers", "nvrtc_version", "options", "arch", "plan_hash", "schema"}) {
    EXPECT_THAT(explain, HasSubstr(part));
  }
  EXPECT_THAT(explain, HasSubstr(key.hex()));
  EXPECT_THAT(explain, HasSubstr("2 headers: syncopate/device.cuh, tile.cuh"));
  EXPECT_THAT(explain, HasSubstr("-std=c++17 -DTILE=128"));
  EXPECT_THAT(explain, HasSubstr(CacheSchemaVersion()));
}

TEST(CacheKeyTest, SchemaIncludesAbiVersion) {
  EXPECT_THAT(CacheSchemaVersion(), ::testing::MatchesRegex("kc[0-9]+-abi[0-9]+"));
}

TEST(CacheKeyTest, ValidHex) {
  EXPECT_TRUE(IsValidKeyHex(std::string(64, 'a')));
  EXPECT_FALSE(IsValidKeyHex(std::string(64, 'A')));
  EXPECT_FALSE(IsValidKeyHex(std::string(63, 'a')));
  EXPECT_FALSE(IsValidKeyHex("../" + std::string(61, 'a')));
}

}  // namespace
}  // namespace syncopate::cache
