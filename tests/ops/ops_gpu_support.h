// Shared by the ops' GPU tests (ops_gpu_test.cc, ops_capture_gpu_test.cc): inputs that every
// rank can regenerate, exact references, uploads and element-wise checks, a case's op.
//
// Inputs are small integers (-1, 0, 1) and k is at most 256 / world, so every sum (also over
// ranks) is an integer of magnitude <= 256, exact in bf16 and fp16 and in any summation order:
// the check is equality, not a tolerance.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/status_macros.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/node_rendezvous.h"
#include "runtime/cuda/workloads/multiprocess.h"
#include "runtime/cuda/workloads/workloads.h"
#include "syncopate/ops.h"
#include "syncopate/status_absl.h"

namespace syncopate::ops::gpu_test {

#define OPS_RETURN_IF_ERROR(expr) RETURN_IF_ERROR(::syncopate::ToAbsl(expr))

constexpr int64_t kMaxM = 2048, kN = 256;

struct Case {
  std::string name;
  OpKind kind = OpKind::kAllGatherMatmul;
  int world = 2;
  DType dtype = DType::kBF16;
  Backend backend = Backend::kAuto;
  PathPreference path = PathPreference::kAuto;
  int chunks = 0;
  bool bootstrap = false;          // the group forms through a caller's allgather, not the sockets
  bool tile_parts = OpConfig{}.tile_parts;  // false: whole chunks
  std::vector<int64_t> m_buckets;  // empty: the default buckets
  // C's columns. At kN every AllReduce bucket is small enough for allreduce.direct_out
  // (ExpectedAllReducePlan); from 1024 the max_m bucket takes allreduce.direct, so one op mixes
  // both.
  int64_t n = kN;
};

// AllGather+GEMM at world 4, fused, on the copy engine with 2 chunks per shard: the copy-engine
// case both the run tests and the capture tests take.
inline Case AgCopyEngineFusedW4() {
  return Case{.name = "ag_ce_fused_w4",
              .kind = OpKind::kAllGatherMatmul,
              .world = 4,
              .backend = Backend::kCopyEngine,
              .path = PathPreference::kFused,
              .chunks = 2};
}

// -1, 0 or 1, a function of (seed, index) only, so every rank can regenerate a peer's input.
float Value(uint64_t seed, int64_t i);

std::vector<float> Matrix(uint64_t seed, int64_t rows, int64_t cols);

// Exact for integers of magnitude <= 256 (all these tests produce).
uint16_t ToBits(float v, DType dtype);

float FromBits(uint16_t bits, DType dtype);

// C[rows, n] = A[rows, k] B[n, k]^T, accumulated into `out`.
void AddGemm(const float* a, const std::vector<float>& b, int64_t rows, int64_t n, int64_t k,
             float* out);

// Replays of each capture test: the 1,000, or SYNCOPATE_OPS_REPLAYS where set
// (InvalidArgument when that is not a positive number: the ranks return it, so the test fails).
// Time-sliced ranks take every launch in turns, about 10 ms a launch at world 4, so
// scripts/gpu-checks.sh sets fewer there; the concurrent (MPS) runs keep 1,000.
absl::StatusOr<int> CaptureReplays();

inline uint64_t SeedA(int rank) { return 1000 + rank; }
inline uint64_t SeedB(int rank, int weight) { return 2000 + 10 * rank + weight; }

// This rank's expected output of a run at `m` with weight `weight`.
std::vector<float> Expected(const Case& c, int rank, int64_t m, int64_t n, int64_t k, int weight);

// Complete on return: cuMemcpyHtoD from pageable memory may return before its DMA lands, and the
// op's stream (non-blocking) does not wait for the legacy stream, so a run could read a partly
// written input.
absl::Status Upload(const cuda::DriverApi& api, CUdeviceptr dst, const std::vector<float>& v,
                    DType dtype);

// Equality of every element; on a mismatch the message says which rows differ (first, last,
// how many), which tells a missing chunk (whole row ranges) from a racing store (part of a tile).
absl::Status ExpectEqual(const cuda::DriverApi& api, CUdeviceptr src,
                         const std::vector<float>& expected, int64_t cols, DType dtype,
                         const std::string& what);

// The ops' AllReduce plan rule as the README states it, restated here (not AllReducePlanFor) so
// a change to the library's threshold fails these tests: a bucket with at most 2 MiB of C
// (bf16 or fp16) takes allreduce.direct_out, a larger one allreduce.direct;
// SYNCOPATE_OPS_ALLREDUCE_PLAN (gpu-owed.sh's ops_ar_out) takes one plan for every bucket.
std::string ExpectedAllReducePlan(int64_t n, int64_t bucket_m);

// For an AllReduce op: OK when Path(m) at each of `ms` names the plan ExpectedAllReducePlan
// gives its bucket (PathChoice::plan, which Create checks is the plan it built, and the reason's
// end); else an error quoting the path. OK at once for the other kinds.
absl::Status ExpectAllReducePlans(const Op& op, const Case& c, const std::vector<int64_t>& ms);

// The tests' config of case `c`: max_m kMaxM, n c.n, k 256 / world.
OpConfig OpConfigFor(const Case& c);

// Creates rank `rank`'s op of case `c`; with c.bootstrap the group forms through `bytes_only`, a
// socket rendezvous of its own standing in for the caller's allgather (bytes only).
absl::StatusOr<std::unique_ptr<Op>> CreateOp(const Case& c, const std::string& job, int rank,
                                             std::unique_ptr<cuda::NodeRendezvous>& bytes_only);

// Runs `body(c, job, rank)` on every rank of case `c` as forked processes; each must succeed.
void ExpectEveryRankSucceeds(const Case& c, const std::string& prefix,
                             absl::Status (*body)(const Case&, const std::string&, int));

class OpsGpuTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    std::string why;
    if (!workloads::ProbeGpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  }
};

}  // namespace syncopate::ops::gpu_test
