// The shared build path's cache-key inputs: every builder (daemon, runtime, CLI) must derive the
// same key for the same kernel, however the toolkit directory was spelled to it.
#include "jit/build/kernel_build.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "gtest/gtest.h"

namespace syncopate::jit {
namespace {

namespace fs = std::filesystem;

GeneratedKernel SomeKernel() {
  GeneratedKernel generated;
  generated.source = "extern \"C\" __global__ void k() {}";
  generated.entry_symbol = "k";
  return generated;
}

std::string KeyWith(const std::string& include_dir) {
  BuildOptions options;
  options.cuda_include_dir = include_dir;
  return cache::CacheKey::FromParts(CacheKeyPartsFor(SomeKernel(), "plan", options)).hex();
}

class ScratchDir : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("kernel_build_test." + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "cuda-13.0" / "include");
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

// CI found the toolkit as /usr/local/cuda-13.0/... while the runtime asked $CUDA_HOME: two
// spellings of one directory gave the daemon and the runtime different keys for one kernel.
TEST_F(ScratchDir, SymlinkedToolkitGivesTheSameKey) {
  fs::create_directory_symlink(root_ / "cuda-13.0", root_ / "cuda");
  EXPECT_EQ(KeyWith((root_ / "cuda" / "include").string()),
            KeyWith((root_ / "cuda-13.0" / "include").string()));
}

TEST_F(ScratchDir, DifferentToolkitsGiveDifferentKeys) {
  fs::create_directories(root_ / "cuda-12.8" / "include");
  EXPECT_NE(KeyWith((root_ / "cuda-12.8" / "include").string()),
            KeyWith((root_ / "cuda-13.0" / "include").string()));
}

// Sets (or, with nullptr, unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CudaIncludeDirTest, EnvironmentOverridesCudaHomeWhichOverridesTheBuild) {
  ScopedEnv no_override("SYNCOPATE_CUDA_INCLUDE", nullptr);
  {
    ScopedEnv home("CUDA_HOME", "/opt/cuda-home");
    EXPECT_EQ(CudaIncludeDir(), "/opt/cuda-home/include");
    ScopedEnv explicit_dir("SYNCOPATE_CUDA_INCLUDE", "/opt/toolkit/include");
    EXPECT_EQ(CudaIncludeDir(), "/opt/toolkit/include");
  }
  // Neither set: the toolkit this build was configured with.
  ScopedEnv no_home("CUDA_HOME", nullptr);
  EXPECT_EQ(CudaIncludeDir(), SYNCOPATE_BUILD_CUDA_INCLUDE);
}

// The default spelled explicitly is the same key as the default left empty, so a daemon told its
// directory in config and a runtime left to find it agree. (Guards against a second default
// creeping back in, which is how CI once saw two keys for one kernel.)
TEST(CudaIncludeDirTest, EmptyMeansTheDefault) { EXPECT_EQ(KeyWith(""), KeyWith(CudaIncludeDir())); }

}  // namespace
}  // namespace syncopate::jit
