// The runtime's build options for a GPU: the architecture chosen per compute capability and the
// developer's extra NVRTC options from SYNCOPATE_NVRTC_OPTIONS (no GPU needed).
#include "runtime/cuda/kernel_loader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace syncopate::cuda {
namespace {

TEST(KernelLoaderTest, HopperGetsTheArchSpecificTarget) {
  EXPECT_EQ(ArchFor(90), "sm_90a");  // wgmma and setmaxnreg exist only there
  EXPECT_EQ(ArchFor(80), "sm_80");
  EXPECT_EQ(ArchFor(120), "sm_120");
}

TEST(KernelLoaderTest, NvrtcOptionsFromTheEnvironmentSplitAtWhitespace) {
  EXPECT_EQ(SplitNvrtcOptions("-DSYNCOPATE_MOVER_INLINE=1"),
            (std::vector<std::string>{"-DSYNCOPATE_MOVER_INLINE=1"}));
  EXPECT_EQ(SplitNvrtcOptions("  -DA=1\t-lineinfo \n -DB "),
            (std::vector<std::string>{"-DA=1", "-lineinfo", "-DB"}));
  EXPECT_TRUE(SplitNvrtcOptions("").empty());
  EXPECT_TRUE(SplitNvrtcOptions(" \t ").empty());
}

}  // namespace
}  // namespace syncopate::cuda
