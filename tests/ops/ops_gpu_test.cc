// The ops (syncopate/ops.h) run by forked ranks on one GPU: every element of every output
// against a host reference, at Ms that hit a bucket exactly and Ms that pad, on both paths and
// both backends; a second weight; a refused capture; a dead peer's error named and sticky.
//
// Inputs are small integers (-1, 0, 1) and k is at most 256 / world, so every sum (also over
// ranks) is an integer of magnitude <= 256, exact in bf16 and fp16 and in any summation order:
// the check is equality, not a tolerance.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/handles.h"
#include "runtime/cuda/node_rendezvous.h"
#include "runtime/cuda/workloads/multiprocess.h"
#include "runtime/cuda/workloads/workloads.h"
#include "syncopate/ops.h"

namespace syncopate::ops {
namespace {

using ::testing::HasSubstr;

absl::Status ToAbsl(const Status& s) {
  return s.ok() ? absl::OkStatus()
                : absl::Status(static_cast<absl::StatusCode>(s.code()), s.message());
}

#define OPS_RETURN_IF_ERROR(expr) RETURN_IF_ERROR(ToAbsl(expr))

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

// Exact for integers of magnitude <= 256 (all these tests produce).
uint16_t ToBits(float v, DType dtype) {
  uint32_t f;
  std::memcpy(&f, &v, 4);
  if (dtype == DType::kBF16) return static_cast<uint16_t>(f >> 16);
  if (v == 0) return static_cast<uint16_t>((f >> 16) & 0x8000);
  const uint16_t sign = (f >> 16) & 0x8000;
  const int exponent = static_cast<int>((f >> 23) & 0xff) - 127;
  const uint32_t mantissa = f & 0x7fffff;
  return static_cast<uint16_t>(sign | ((exponent + 15) << 10) | (mantissa >> 13));
}

float FromBits(uint16_t bits, DType dtype) {
  if (dtype == DType::kBF16) {
    uint32_t f = static_cast<uint32_t>(bits) << 16;
    float v;
    std::memcpy(&v, &f, 4);
    return v;
  }
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  const float magnitude = exponent == 0
                              ? std::ldexp(static_cast<float>(mantissa), -24)
                              : std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  return (bits & 0x8000) ? -magnitude : magnitude;
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

uint64_t SeedA(int rank) { return 1000 + rank; }
uint64_t SeedB(int rank, int weight) { return 2000 + 10 * rank + weight; }

struct Case {
  std::string name;
  OpKind kind = OpKind::kAllGatherMatmul;
  int world = 2;
  DType dtype = DType::kBF16;
  Backend backend = Backend::kAuto;
  PathPreference path = PathPreference::kAuto;
  int chunks = 0;
  bool bootstrap = false;  // the group forms through a caller's allgather, not the sockets
};

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

constexpr int64_t kMaxM = 2048, kN = 256;

OpConfig OpConfigFor(const Case& c) {
  OpConfig config;
  config.kind = c.kind;
  config.max_m = kMaxM;
  config.n = kN;
  config.k = 256 / c.world;  // sums over k (and ranks) stay exact: see the file comment
  config.dtype = c.dtype;
  config.backend = c.backend;
  config.path = c.path;
  config.chunks = c.chunks;
  config.timeout_ms = 20000;
  config.cache_dir = workloads::TestCacheDir();
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

// One rank of a case: create, then runs at Ms that hit buckets and Ms that pad, each checked.
absl::Status RunCase(const Case& c, const std::string& job, int rank) {
  const int64_t k = 256 / c.world;
  std::unique_ptr<cuda::NodeRendezvous> bytes_only;
  ASSIGN_OR_RETURN(std::unique_ptr<Op> created, CreateOp(c, job, rank, bytes_only));
  Op& op = *created;
  ASSIGN_OR_RETURN(const cuda::DriverApi* api, cuda::Driver());
  const bool gather = c.kind == OpKind::kAllGatherMatmul;
  const int64_t a_rows = gather ? kMaxM / c.world : kMaxM;
  const int64_t c_rows = c.kind == OpKind::kMatmulReduceScatter ? kMaxM / c.world : kMaxM;
  ASSIGN_OR_RETURN(cuda::DeviceBuffer a, cuda::DeviceBuffer::Allocate(*api, a_rows * k * 2));
  ASSIGN_OR_RETURN(cuda::DeviceBuffer out, cuda::DeviceBuffer::Allocate(*api, c_rows * kN * 2));
  ASSIGN_OR_RETURN(cuda::DeviceBuffer gathered, cuda::DeviceBuffer::Allocate(*api, kMaxM * k * 2));
  std::vector<cuda::DeviceBuffer> weights;
  for (int w = 0; w < 2; ++w) {
    ASSIGN_OR_RETURN(cuda::DeviceBuffer b, cuda::DeviceBuffer::Allocate(*api, kN * k * 2));
    RETURN_IF_ERROR(Upload(*api, b.get(), Matrix(SeedB(rank, w), kN, k), c.dtype));
    weights.push_back(std::move(b));
  }
  ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create(*api));
  // 2048 and 512 are buckets (default: max_m and its quarter at world 2 and 4); 1000 and 200 pad.
  const std::vector<std::pair<int64_t, int>> runs = {
      {2048, 0}, {1000, 0}, {512, 1}, {200, 1}, {2048, 1}};
  for (auto [m, weight] : runs) {
    const int64_t rows = gather ? m / c.world : m;
    const std::vector<float> a_host = Matrix(SeedA(rank), rows, k);
    RETURN_IF_ERROR(Upload(*api, a.get(), a_host, c.dtype));
    Result<PathChoice> path = op.Path(m);
    OPS_RETURN_IF_ERROR(path.status());
    const std::string what =
        absl::StrCat(c.name, " rank ", rank, " M=", m, " (", path->reason, ")");
    RunArgs args{.m = m, .a = a.get(), .b = weights[weight].get(), .c = out.get()};
    if (gather) args.a_gathered = gathered.get();
    Status ran = op.Run(args, stream.get());
    if (ran.ok()) ran = op.Synchronize(stream.get());
    if (!ran.ok()) return absl::Status(ToAbsl(ran).code(), absl::StrCat(what, ": ", ran.message()));
    absl::Status gathered_ok = absl::OkStatus();
    if (gather) {
      std::vector<float> full;
      for (int q = 0; q < c.world; ++q) {
        const std::vector<float> shard = Matrix(SeedA(q), m / c.world, k);
        full.insert(full.end(), shard.begin(), shard.end());
      }
      gathered_ok = ExpectEqual(*api, gathered.get(), full, k, c.dtype, what + " a_gathered");
    }
    absl::Status out_ok =
        ExpectEqual(*api, out.get(), Expected(c, rank, m, kN, k, weight), kN, c.dtype, what);
    if (!out_ok.ok() || !gathered_ok.ok()) {
      return absl::InternalError(absl::StrCat(out_ok.message(), " | ", gathered_ok.message()));
    }
  }
  return absl::OkStatus();
}

class OpsGpuTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    std::string why;
    if (!workloads::ProbeGpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  }
};

// Runs `body(c, job, rank)` on every rank of case `c` as forked processes; each must succeed.
void ExpectEveryRankSucceeds(const Case& c, const std::string& prefix,
                             absl::Status (*body)(const Case&, const std::string&, int)) {
  const std::string job = workloads::UniqueGroupId(prefix);
  std::vector<absl::Status> results =
      workloads::RunRanks(c.world, absl::Minutes(6), [&](int rank) { return body(c, job, rank); });
  for (int r = 0; r < c.world; ++r)
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
}

TEST_P(OpsGpuTest, EveryElementOfEveryRunIsRight) {
  ExpectEveryRankSucceeds(GetParam(), "ops", &RunCase);
}

INSTANTIATE_TEST_SUITE_P(
    Ops, OpsGpuTest,
    ::testing::Values(
        Case{.name = "ag_auto", .kind = OpKind::kAllGatherMatmul},
        Case{.name = "ag_ce_fused_w4",
             .kind = OpKind::kAllGatherMatmul,
             .world = 4,
             .backend = Backend::kCopyEngine,
             .path = PathPreference::kFused,
             .chunks = 2},
        Case{.name = "ag_fp16_unfused",
             .kind = OpKind::kAllGatherMatmul,
             .dtype = DType::kFP16,
             .path = PathPreference::kUnfused},
        Case{.name = "rs_auto", .kind = OpKind::kMatmulReduceScatter},
        Case{.name = "rs_fused_w4",
             .kind = OpKind::kMatmulReduceScatter,
             .world = 4,
             .path = PathPreference::kFused},
        Case{.name = "ar_auto", .kind = OpKind::kMatmulAllReduce},
        Case{.name = "ar_fused", .kind = OpKind::kMatmulAllReduce, .path = PathPreference::kFused},
        Case{.name = "ag_bootstrap_callback", .kind = OpKind::kAllGatherMatmul, .bootstrap = true}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// An engine's loop on one op: 1,000 runs whose M cycles over two buckets' own Ms, Ms that pad
// and a small M on the unfused path, each M's input in its own device buffer (uploaded once),
// every output checked on every element.
absl::Status RunEngineLoop(const Case& c, const std::string& job, int rank) {
  constexpr int kRuns = 1000;
  const int64_t k = 256 / c.world;
  std::unique_ptr<cuda::NodeRendezvous> bytes_only;
  ASSIGN_OR_RETURN(std::unique_ptr<Op> op, CreateOp(c, job, rank, bytes_only));
  ASSIGN_OR_RETURN(const cuda::DriverApi* api, cuda::Driver());
  const bool gather = c.kind == OpKind::kAllGatherMatmul;
  const std::vector<int64_t> ms = {2048, 1000, 512, int64_t{8} * c.world};
  std::vector<cuda::DeviceBuffer> inputs;
  std::vector<std::vector<float>> expected;
  for (int64_t m : ms) {
    const int64_t rows = gather ? m / c.world : m;
    ASSIGN_OR_RETURN(inputs.emplace_back(), cuda::DeviceBuffer::Allocate(*api, rows * k * 2));
    RETURN_IF_ERROR(Upload(*api, inputs.back().get(), Matrix(SeedA(rank), rows, k), c.dtype));
    expected.push_back(Expected(c, rank, m, kN, k, 0));
  }
  ASSIGN_OR_RETURN(cuda::DeviceBuffer weight, cuda::DeviceBuffer::Allocate(*api, kN * k * 2));
  RETURN_IF_ERROR(Upload(*api, weight.get(), Matrix(SeedB(rank, 0), kN, k), c.dtype));
  ASSIGN_OR_RETURN(cuda::DeviceBuffer out, cuda::DeviceBuffer::Allocate(*api, kMaxM * kN * 2));
  ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create(*api));
  for (int i = 0; i < kRuns; ++i) {
    const size_t j = static_cast<size_t>(i * 3 + i / 4) % ms.size();  // every M after every M
    const RunArgs args{.m = ms[j], .a = inputs[j].get(), .b = weight.get(), .c = out.get()};
    Status ran = op->Run(args, stream.get());
    if (ran.ok()) ran = op->Synchronize(stream.get());
    const std::string what = absl::StrCat(c.name, " rank ", rank, " run ", i, " M=", ms[j]);
    if (!ran.ok()) return absl::Status(ToAbsl(ran).code(), absl::StrCat(what, ": ", ran.message()));
    RETURN_IF_ERROR(ExpectEqual(*api, out.get(), expected[j], kN, c.dtype, what));
  }
  return absl::OkStatus();
}

class OpsEngineLoopTest : public OpsGpuTest {};

TEST_P(OpsEngineLoopTest, AThousandRunsAcrossBucketsAreAllRight) {
  ExpectEveryRankSucceeds(GetParam(), "ops_loop", &RunEngineLoop);
}

INSTANTIATE_TEST_SUITE_P(
    Ops, OpsEngineLoopTest,
    ::testing::Values(
        Case{.name = "ag_w2_sm", .kind = OpKind::kAllGatherMatmul, .backend = Backend::kSm},
        Case{.name = "ag_w2_ce", .kind = OpKind::kAllGatherMatmul, .backend = Backend::kCopyEngine},
        Case{.name = "ag_w4_sm", .kind = OpKind::kAllGatherMatmul, .world = 4},
        Case{.name = "rs_w4", .kind = OpKind::kMatmulReduceScatter, .world = 4},
        Case{.name = "ar_w2_fused",
             .kind = OpKind::kMatmulAllReduce,
             .path = PathPreference::kFused}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// A run inside a stream capture is refused (the epoch would repeat on replay), and the op stays
// usable: the refusal is not sticky.
TEST_F(OpsGpuTest, CaptureIsRefusedAndTheOpStaysUsable) {
  const std::string job = workloads::UniqueGroupId("ops_capture");
  std::vector<absl::Status> results = workloads::RunRanks(1, absl::Minutes(3), [&](int) {
    OpConfig config;
    config.max_m = 512;
    config.n = 256;
    config.k = 128;
    config.cache_dir = workloads::TestCacheDir();
    Result<std::unique_ptr<Op>> op = Op::Create({.job = job}, config);
    OPS_RETURN_IF_ERROR(op.status());
    ASSIGN_OR_RETURN(const cuda::DriverApi* api, cuda::Driver());
    ASSIGN_OR_RETURN(cuda::DeviceBuffer buf, cuda::DeviceBuffer::Allocate(*api, 1 << 20));
    ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create(*api));
    RunArgs args{.m = 512, .a = buf.get(), .b = buf.get(), .c = buf.get()};
    CU_RETURN_IF_ERROR(api->cuStreamBeginCapture(stream.get(), CU_STREAM_CAPTURE_MODE_RELAXED));
    const Status captured = (*op)->Run(args, stream.get());
    CUgraph graph = nullptr;
    CU_RETURN_IF_ERROR(api->cuStreamEndCapture(stream.get(), &graph));
    if (graph != nullptr) CU_RETURN_IF_ERROR(api->cuGraphDestroy(graph));
    if (captured.code() != StatusCode::kFailedPrecondition ||
        captured.message().find("capturing") == std::string::npos) {
      return absl::InternalError("capture not refused as expected: " + captured.ToString());
    }
    OPS_RETURN_IF_ERROR((*op)->error());
    OPS_RETURN_IF_ERROR((*op)->Run(args, stream.get()));
    return ToAbsl((*op)->Synchronize(stream.get()));
  });
  EXPECT_TRUE(results[0].ok()) << results[0];
}

// Rank 1 creates the op and never runs it: rank 0's wait ends at its deadline naming rank 1,
// and every later call returns that same error.
TEST_F(OpsGpuTest, APeerThatNeverRunsIsNamedAndTheErrorSticks) {
  const std::string job = workloads::UniqueGroupId("ops_absent");
  std::vector<absl::Status> results = workloads::RunRanks(2, absl::Minutes(3), [&](int rank) {
    OpConfig config;
    config.max_m = 512;
    config.n = 256;
    config.k = 128;
    config.path = PathPreference::kFused;
    config.timeout_ms = 1500;
    config.cache_dir = workloads::TestCacheDir();
    Result<std::unique_ptr<Op>> op = Op::Create({.job = job, .rank = rank, .world = 2}, config);
    OPS_RETURN_IF_ERROR(op.status());
    ASSIGN_OR_RETURN(const cuda::DriverApi* api, cuda::Driver());
    if (rank == 1) {
      absl::SleepFor(absl::Seconds(6));  // alive, mapped, never launching
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(cuda::DeviceBuffer buf, cuda::DeviceBuffer::Allocate(*api, 1 << 20));
    ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create(*api));
    RunArgs args{.m = 512, .a = buf.get(), .b = buf.get(), .c = buf.get()};
    Status first = (*op)->Run(args, stream.get());
    if (first.ok()) first = (*op)->Synchronize(stream.get());
    if (first.ok() || first.message().find("rank 1") == std::string::npos) {
      return absl::InternalError("absent rank 1 not named: " + first.ToString());
    }
    const Status again = (*op)->Run(args, stream.get());
    if (again.code() != first.code() || again.message() != first.message() ||
        (*op)->error().message() != first.message()) {
      return absl::InternalError("error not sticky: " + again.ToString());
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(results[0].ok()) << results[0];
  EXPECT_TRUE(results[1].ok()) << results[1];
}

}  // namespace
}  // namespace syncopate::ops
