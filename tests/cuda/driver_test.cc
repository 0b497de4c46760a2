// Driver loading: without libcuda.so.1 the first GPU call fails with a clear error (this is what
// CI and the build machines see); with a driver, the table loads and errors carry the CUresult's
// name and the call's text. Runs everywhere (LABEL unit).
#include "runtime/cuda/driver.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/handles.h"
#include "runtime/cuda/workloads/multiprocess.h"

namespace syncopate::cuda {
namespace {

using ::testing::HasSubstr;

TEST(DriverTest, LoadsOrExplainsWhyNot) {
  // In a child: the test process itself must stay free of CUDA state for the fork-based tests.
  std::vector<absl::Status> s = syncopate::workloads::RunRanks(1, absl::Seconds(60), [](int) {
    absl::StatusOr<const DriverApi*> api = Driver();
    if (api.ok()) {
      if ((*api)->cuMemAlloc == nullptr || (*api)->driver_version < 12000) {
        return absl::InternalError("driver table incomplete");
      }
      return absl::OkStatus();
    }
    return api.status();
  });
  if (!s[0].ok()) {
    EXPECT_EQ(s[0].code(), absl::StatusCode::kFailedPrecondition) << s[0];
    EXPECT_THAT(s[0].message(), HasSubstr("libcuda.so.1")) << s[0];
  }
}

TEST(DriverTest, ErrorsNameTheCallAndTheResult) {
  std::vector<absl::Status> s = syncopate::workloads::RunRanks(1, absl::Seconds(60), [](int) {
    absl::Status st = CuError(CUDA_ERROR_INVALID_VALUE, "api.cuMemAlloc(&p, 0)", "x.cc", 7);
    if (st.code() != absl::StatusCode::kInvalidArgument) return absl::InternalError("code");
    const std::string m(st.message());
    if (m.find("api.cuMemAlloc(&p, 0)") == std::string::npos) return absl::InternalError(m);
    // The name needs the driver; without one the numeric value is given.
    if (Driver().ok() ? m.find("CUDA_ERROR_INVALID_VALUE") == std::string::npos
                      : m.find("CUresult 1") == std::string::npos) {
      return absl::InternalError(m);
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(s[0].ok()) << s[0];
}

TEST(DriverTest, OutOfMemoryOnRetainPointsAtTheMpsConnectionPool) {
  const std::string hint = RetainFailureHint(CUDA_ERROR_OUT_OF_MEMORY, "32");
  EXPECT_THAT(hint, HasSubstr("CUDA_DEVICE_MAX_CONNECTIONS=32"));
  EXPECT_THAT(hint, HasSubstr("MPS"));
  EXPECT_THAT(RetainFailureHint(CUDA_ERROR_OUT_OF_MEMORY, nullptr), HasSubstr("8 (unset)"));
  EXPECT_EQ(RetainFailureHint(CUDA_ERROR_INVALID_DEVICE, "32"), "");
  EXPECT_THAT(RetainFailureHint(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, "32"),
              HasSubstr("CUDA_DEVICE_MAX_CONNECTIONS=32"));
}

// Both ways a full MPS connection pool shows up are ResourceExhausted, the code on which the GPU
// tests skip a world that does not fit (RanksFitOnGpu); an 8-rank world once failed instead,
// its probe answered with the pool's own error.
TEST(DriverTest, AFullMpsConnectionPoolIsResourceExhausted) {
  EXPECT_EQ(CuError(CUDA_ERROR_OUT_OF_MEMORY, "c", "x.cc", 1).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CuError(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, "c", "x.cc", 1).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CuError(CUDA_ERROR_LAUNCH_FAILED, "c", "x.cc", 1).code(), absl::StatusCode::kInternal);
}

TEST(DriverTest, GpuAvailableGivesAReason) {
  std::string why;
  if (!syncopate::workloads::ProbeGpu(&why)) {
    EXPECT_FALSE(why.empty());
  }
}

}  // namespace
}  // namespace syncopate::cuda
