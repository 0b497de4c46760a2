// Helpers shared by the kernel-cache tests: scratch directories and fake compiled kernels.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "jit/nvrtc/nvrtc_compiler.h"
#include "tests/testing/scratch_dir.h"

namespace syncopate::cache::testing {

// A fresh directory under the test temp dir, removed when the object goes.
class ScratchDir : public syncopate::testing::ScratchDir {
 public:
  ScratchDir() : syncopate::testing::ScratchDir("syncopate_cache") {}
};

// A kernel whose bytes depend on `seed`, `size` bytes long, looking like a cubin.
inline nvrtc::CompiledKernel FakeKernel(const std::string& seed, size_t size = 4096) {
  nvrtc::CompiledKernel k;
  k.binary = std::string(
      "\x7f"
      "ELF",
      4);
  while (k.binary.size() < size) k.binary += seed;
  k.binary.resize(size);
  k.target = "sm_90";
  k.log = "warning: " + seed;
  k.compile_ms = 12.5;
  k.nvrtc_version = "13.0";
  k.lowered_names = {{"entry<" + seed + ">", "_Z5entry" + seed}};
  return k;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

inline void ExpectSameKernel(const nvrtc::CompiledKernel& a, const nvrtc::CompiledKernel& b) {
  EXPECT_EQ(a.binary, b.binary);
  EXPECT_EQ(a.is_ptx, b.is_ptx);
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(a.log, b.log);
  EXPECT_EQ(a.nvrtc_version, b.nvrtc_version);
  EXPECT_EQ(a.lowered_names, b.lowered_names);
  EXPECT_DOUBLE_EQ(a.compile_ms, b.compile_ms);
}

}  // namespace syncopate::cache::testing
