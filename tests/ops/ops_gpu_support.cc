// See ops_gpu_support.h.
#include "tests/ops/ops_gpu_support.h"

#include <cstdlib>
#include <string_view>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/base/half_float.h"
#include "runtime/cuda/workloads/multiprocess.h"
#include "tests/cuda/gpu_test_env.h"
#include "tests/testing/rank_results.h"

namespace syncopate::ops::gpu_test {

// -1, 0 or 1, a function of (seed, index) only, so every rank can regenerate a peer's input.
float Value(uint64_t seed, int64_t i) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return static_cast<float>(static_cast<int>(x % 3) - 1);
}

std::vector<float> Matrix(uint64_t seed, int64_t rows, int64_t cols) {
  std::vector<float> m(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) m[i] = Value(seed, i);
  return m;
}

absl::StatusOr<int> CaptureReplays() {
  const char* set = std::getenv("SYNCOPATE_OPS_REPLAYS");
  int replays = 1000;
  if (set != nullptr && (!absl::SimpleAtoi(set, &replays) || replays < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SYNCOPATE_OPS_REPLAYS=", set, " is not a positive number"));
  }
  return replays;
}

// Exact for integers of magnitude <= 256 (all these tests produce).
uint16_t ToBits(float v, DType dtype) {
  return dtype == DType::kBF16 ? FloatToBf16(v) : FloatToHalf(v);
}

float FromBits(uint16_t bits, DType dtype) {
  return dtype == DType::kBF16 ? Bf16ToFloat(bits) : HalfToFloat(bits);
}

// C[rows, n] = A[rows, k] B[n, k]^T, accumulated into `out`.
void AddGemm(const float* a, const std::vector<float>& b, int64_t rows, int64_t n, int64_t k,
             float* out) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0;
      for (int64_t x = 0; x < k; ++x) sum += a[i * k + x] * b[j * k + x];
      out[i * n + j] += sum;
    }
  }
}

// This rank's expected output of a run at `m` with weight `weight`.
std::vector<float> Expected(const Case& c, int rank, int64_t m, int64_t n, int64_t k, int weight) {
  const int64_t rows = m / c.world;
  if (c.kind == OpKind::kAllGatherMatmul) {
    std::vector<float> out(m * n, 0.0f);
    const std::vector<float> b = Matrix(SeedB(rank, weight), n, k);
    for (int q = 0; q < c.world; ++q) {
      const std::vector<float> shard = Matrix(SeedA(q), rows, k);
      AddGemm(shard.data(), b, rows, n, k, out.data() + q * rows * n);
    }
    return out;
  }
  const bool scatter = c.kind == OpKind::kMatmulReduceScatter;
  std::vector<float> out((scatter ? rows : m) * n, 0.0f);
  for (int q = 0; q < c.world; ++q) {
    const std::vector<float> a = Matrix(SeedA(q), m, k);
    const std::vector<float> b = Matrix(SeedB(q, weight), n, k);
    if (scatter) {
      AddGemm(a.data() + rank * rows * k, b, rows, n, k, out.data());
    } else {
      AddGemm(a.data(), b, m, n, k, out.data());
    }
  }
  return out;
}

// Complete on return: cuMemcpyHtoD from pageable memory may return before its DMA lands, and the
// op's stream (non-blocking) does not wait for the legacy stream, so a run could read a partly
// written input.
absl::Status Upload(const cuda::DriverApi& api, CUdeviceptr dst, const std::vector<float>& v,
                    DType dtype) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = ToBits(v[i], dtype);
  CU_RETURN_IF_ERROR(api.cuMemcpyHtoD(dst, bits.data(), bits.size() * 2));
  CU_RETURN_IF_ERROR(api.cuCtxSynchronize());
  return absl::OkStatus();
}

// Equality of every element; on a mismatch the message says which rows differ (first, last,
// how many), which tells a missing chunk (whole row ranges) from a racing store (part of a tile).
absl::Status ExpectEqual(const cuda::DriverApi& api, CUdeviceptr src,
                         const std::vector<float>& expected, int64_t cols, DType dtype,
                         const std::string& what) {
  std::vector<uint16_t> bits(expected.size());
  CU_RETURN_IF_ERROR(api.cuMemcpyDtoH(bits.data(), src, bits.size() * 2));
  int64_t wrong = 0, first = -1, wrong_rows = 0, last_row = -1;
  for (size_t i = 0; i < bits.size(); ++i) {
    if (FromBits(bits[i], dtype) == expected[i]) continue;
    if (first < 0) first = static_cast<int64_t>(i);
    const int64_t row = static_cast<int64_t>(i) / cols;
    if (row != last_row) ++wrong_rows, last_row = row;
    ++wrong;
  }
  if (wrong == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": ", wrong, " of ", bits.size(), " elements differ, in ", wrong_rows,
                   " of ", bits.size() / cols, " rows (", first / cols, " to ", last_row,
                   "); first at row ", first / cols, " col ", first % cols, ": got ",
                   FromBits(bits[first], dtype), ", want ", expected[first]));
}

std::string ExpectedAllReducePlan(int64_t n, int64_t bucket_m) {
  if (const char* knob = std::getenv("SYNCOPATE_OPS_ALLREDUCE_PLAN");
      knob != nullptr && *knob != '\0') {
    return knob;
  }
  constexpr int64_t kDirectOutMaxBytes = int64_t{2} << 20;
  return bucket_m * n * 2 <= kDirectOutMaxBytes ? "allreduce.direct_out" : "allreduce.direct";
}

absl::Status ExpectAllReducePlans(const Op& op, const Case& c, const std::vector<int64_t>& ms) {
  if (c.kind != OpKind::kMatmulAllReduce) return absl::OkStatus();
  for (int64_t m : ms) {
    Result<PathChoice> path = op.Path(m);
    OPS_RETURN_IF_ERROR(path.status());
    const std::string plan = ExpectedAllReducePlan(c.n, path->bucket_m);
    if (path->plan != plan || !absl::EndsWith(path->reason, "; plan " + plan)) {
      return absl::InternalError(absl::StrCat("M=", m, ": expected plan ", plan, ", the path has ",
                                              path->plan, ": ", path->reason));
    }
  }
  return absl::OkStatus();
}

OpConfig OpConfigFor(const Case& c) {
  OpConfig config;
  config.kind = c.kind;
  config.max_m = kMaxM;
  config.n = c.n;
  config.k = 256 / c.world;  // sums over k (and ranks) stay exact: see the file comment
  config.dtype = c.dtype;
  config.backend = c.backend;
  config.path = c.path;
  config.chunks = c.chunks;
  config.tile_parts = c.tile_parts;
  config.timeout_ms = 20000;
  config.cache_dir = workloads::TestCacheDir();
  config.m_buckets = c.m_buckets;
  return config;
}

// Creates rank `rank`'s op of case `c`; with c.bootstrap the group forms through `bytes_only`, a
// socket rendezvous of its own standing in for the caller's allgather (bytes only).
absl::StatusOr<std::unique_ptr<Op>> CreateOp(const Case& c, const std::string& job, int rank,
                                             std::unique_ptr<cuda::NodeRendezvous>& bytes_only) {
  GroupConfig group{.job = job, .rank = rank, .world = c.world};
  if (c.bootstrap) {
    ASSIGN_OR_RETURN(bytes_only, cuda::NodeRendezvous::Connect(
                                     {job + "_caller", rank, c.world, "", absl::Seconds(30)}));
    group.bootstrap = [&bytes_only](const std::string& mine, std::vector<std::string>* all) {
      absl::StatusOr<std::vector<cuda::PeerMessage>> got = bytes_only->AllGather(mine);
      if (!got.ok()) return Status(StatusCode::kUnavailable, std::string(got.status().message()));
      for (cuda::PeerMessage& m : *got) all->push_back(std::move(m.bytes));
      return Status::Ok();
    };
  }
  Result<std::unique_ptr<Op>> created = Op::Create(group, OpConfigFor(c));
  OPS_RETURN_IF_ERROR(created.status());
  return std::move(*created);
}

// Runs `body(c, job, rank)` on every rank of case `c` as forked processes; each must succeed.
void ExpectEveryRankSucceeds(const Case& c, const std::string& prefix,
                             absl::Status (*body)(const Case&, const std::string&, int)) {
  SYNCOPATE_REQUIRE_RANKS_FIT(c.world);
  const std::string job = workloads::UniqueGroupId(prefix);
  std::vector<absl::Status> results =
      workloads::RunRanks(c.world, absl::Minutes(6), [&](int rank) { return body(c, job, rank); });
  ::syncopate::testing::ExpectEveryRankOk(results);
}

}  // namespace syncopate::ops::gpu_test
