// CompileBackend's memo of distinct requests: bounded by bytes as well as by count, since each
// entry keeps a generated source, its headers and a binary alive. Real NVRTC compiles.
#include "server/compile_backend.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/time/clock.h"
#include "tests/testing/test_kernels.h"

namespace syncopate::server {
namespace {

// The test kernel, made distinct by a comment: each is a request the daemon never saw.
v1::CompileRequest Distinct(int i) {
  v1::CompileRequest request;
  request.mutable_kernel()->set_source(std::string(testing::kTestKernelSource) +
                                       "\n// distinct request " + std::to_string(i) + "\n");
  request.mutable_kernel()->set_spec(testing::kTestKernelSpec);
  request.set_arch("sm_90");
  return request;
}

std::unique_ptr<CompileBackend> Backend(size_t memo_max_bytes) {
  CompileBackend::Options options;  // memory-only cache
  options.memo_max_bytes = memo_max_bytes;
  auto backend = CompileBackend::Create(options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? *std::move(backend) : nullptr;
}

TEST(CompileBackendMemoTest, DistinctRequestsStayWithinTheByteBound) {
  // What one entry takes, measured: the bound below is two and a half of them.
  std::unique_ptr<CompileBackend> probe = Backend(size_t{1} << 30);
  ASSERT_NE(probe, nullptr);
  ASSERT_TRUE(probe->Compile(Distinct(0), absl::Now() + absl::Minutes(2)).ok());
  const size_t entry = probe->Memo().bytes;
  ASSERT_GT(entry, 0u);

  const size_t bound = entry * 5 / 2;
  std::unique_ptr<CompileBackend> backend = Backend(bound);
  ASSERT_NE(backend, nullptr);
  for (int i = 0; i < 6; ++i) {
    absl::StatusOr<CompileOutcome> compiled =
        backend->Compile(Distinct(i), absl::Now() + absl::Minutes(2));
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    EXPECT_LE(backend->Memo().bytes, bound) << "after request " << i;
  }
  EXPECT_EQ(backend->Memo().entries, 2u);
  // The newest are the ones kept: served from the memo without a compile; the oldest is not.
  EXPECT_TRUE(backend->CompileIfServedBefore(Distinct(5)).has_value());
  EXPECT_FALSE(backend->CompileIfServedBefore(Distinct(0)).has_value());
}

}  // namespace
}  // namespace syncopate::server
