// The ops (syncopate/ops.h) run by forked ranks on one GPU: every element of every output
// against a host reference (ops_gpu_support.h), at Ms that hit a bucket exactly and Ms that pad,
// on both paths and both backends; a second weight; an engine's loop of 1,000 runs; a dead
// peer's error named and sticky. Graph capture: ops_capture_gpu_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
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
#include "tests/ops/ops_gpu_support.h"
#include "tests/testing/rank_results.h"

namespace syncopate::ops::gpu_test {
namespace {

// One rank of a case: create, then runs at Ms that hit buckets and Ms that pad, each checked. A
// bucket's M uses the caller's C (AllGather) or A (the reductions) in place when 16-byte
// aligned; the last run shifts them by one element, so the same M goes through the copies.
// An AllReduce's path also names the plan its bucket was built with.
absl::Status RunCase(const Case& c, const std::string& job, int rank) {
  const int64_t k = 256 / c.world;
  std::unique_ptr<cuda::NodeRendezvous> bytes_only;
  ASSIGN_OR_RETURN(std::unique_ptr<Op> created, CreateOp(c, job, rank, bytes_only));
  Op& op = *created;
  ASSIGN_OR_RETURN(const cuda::DriverApi* api, cuda::Driver());
  const bool gather = c.kind == OpKind::kAllGatherMatmul;
  const int64_t a_rows = gather ? kMaxM / c.world : kMaxM;
  const int64_t c_rows = c.kind == OpKind::kMatmulReduceScatter ? kMaxM / c.world : kMaxM;
  constexpr int64_t kShift = 2;  // bytes: one element, so not 16-byte aligned
  ASSIGN_OR_RETURN(cuda::DeviceBuffer a,
                   cuda::DeviceBuffer::Allocate(*api, a_rows * k * 2 + kShift));
  ASSIGN_OR_RETURN(cuda::DeviceBuffer out,
                   cuda::DeviceBuffer::Allocate(*api, c_rows * c.n * 2 + kShift));
  ASSIGN_OR_RETURN(cuda::DeviceBuffer gathered, cuda::DeviceBuffer::Allocate(*api, kMaxM * k * 2));
  std::vector<cuda::DeviceBuffer> weights;
  for (int w = 0; w < 2; ++w) {
    ASSIGN_OR_RETURN(cuda::DeviceBuffer b, cuda::DeviceBuffer::Allocate(*api, c.n * k * 2));
    RETURN_IF_ERROR(Upload(*api, b.get(), Matrix(SeedB(rank, w), c.n, k), c.dtype));
    weights.push_back(std::move(b));
  }
  ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create(*api));
  // 2048 and 512 are buckets (default: max_m and its quarter at world 2 and 4); 1000 and 200 pad.
  struct Run {
    int64_t m;
    int weight;
    int64_t shift = 0;  // of the caller's a and c
  };
  const std::vector<Run> runs = {{2048, 0}, {1000, 0}, {512, 1},
                                 {200, 1},  {2048, 1}, {2048, 0, kShift}};
  for (auto [m, weight, shift] : runs) {
    const int64_t rows = gather ? m / c.world : m;
    const std::vector<float> a_host = Matrix(SeedA(rank), rows, k);
    const CUdeviceptr a_at = a.get() + shift, out_at = out.get() + shift;
    RETURN_IF_ERROR(Upload(*api, a_at, a_host, c.dtype));
    Result<PathChoice> path = op.Path(m);
    OPS_RETURN_IF_ERROR(path.status());
    RETURN_IF_ERROR(ExpectAllReducePlans(op, c, {m}));
    const std::string what = absl::StrCat(c.name, " rank ", rank, " M=", m, " (", path->reason,
                                          shift != 0 ? ", caller's tensors unaligned" : "", ")");
    RunArgs args{.m = m, .a = a_at, .b = weights[weight].get(), .c = out_at};
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
        ExpectEqual(*api, out_at, Expected(c, rank, m, c.n, k, weight), c.n, c.dtype, what);
    if (!out_ok.ok() || !gathered_ok.ok()) {
      return absl::InternalError(absl::StrCat(out_ok.message(), " | ", gathered_ok.message()));
    }
  }
  return absl::OkStatus();
}

TEST_P(OpsGpuTest, EveryElementOfEveryRunIsRight) {
  ExpectEveryRankSucceeds(GetParam(), "ops", &RunCase);
}

INSTANTIATE_TEST_SUITE_P(
    Ops, OpsGpuTest,
    ::testing::Values(
        Case{.name = "ag_auto", .kind = OpKind::kAllGatherMatmul}, AgCopyEngineFusedW4(),
        Case{.name = "ag_fp16_unfused",
             .kind = OpKind::kAllGatherMatmul,
             .dtype = DType::kFP16,
             .path = PathPreference::kUnfused},
        Case{.name = "rs_auto", .kind = OpKind::kMatmulReduceScatter},
        // What the default path picks for a ReduceScatter at 2 ranks from 4096 rows per rank
        // (fused, 2 chunks per shard), at this test's smaller M.
        Case{.name = "rs_fused_w2_c2",
             .kind = OpKind::kMatmulReduceScatter,
             .path = PathPreference::kFused,
             .chunks = 2},
        Case{.name = "rs_fused_w4",
             .kind = OpKind::kMatmulReduceScatter,
             .world = 4,
             .path = PathPreference::kFused},
        // The cases above move tile parts (OpConfig::tile_parts, the default: the wgmma GEMM's
        // idle warps reduce each tile's part into its owner); these move whole chunks.
        Case{.name = "rs_fused_w2_whole_chunks",
             .kind = OpKind::kMatmulReduceScatter,
             .path = PathPreference::kFused,
             .tile_parts = false},
        Case{.name = "rs_fused_w4_whole_chunks",
             .kind = OpKind::kMatmulReduceScatter,
             .world = 4,
             .path = PathPreference::kFused,
             .tile_parts = false},
        Case{.name = "ar_auto", .kind = OpKind::kMatmulAllReduce},
        Case{.name = "ar_fused", .kind = OpKind::kMatmulAllReduce, .path = PathPreference::kFused},
        // Buckets 2048 (4 MiB of C: allreduce.direct, copied out after the kernel) and 512
        // (1 MiB: allreduce.direct_out, written into the caller's C by the kernel) in one op.
        Case{.name = "ar_mixed_plans", .kind = OpKind::kMatmulAllReduce, .n = 1024},
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
    expected.push_back(Expected(c, rank, m, c.n, k, 0));
  }
  ASSIGN_OR_RETURN(cuda::DeviceBuffer weight, cuda::DeviceBuffer::Allocate(*api, c.n * k * 2));
  RETURN_IF_ERROR(Upload(*api, weight.get(), Matrix(SeedB(rank, 0), c.n, k), c.dtype));
  ASSIGN_OR_RETURN(cuda::DeviceBuffer out, cuda::DeviceBuffer::Allocate(*api, kMaxM * c.n * 2));
  ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create(*api));
  for (int i = 0; i < kRuns; ++i) {
    const size_t j = static_cast<size_t>(i * 3 + i / 4) % ms.size();  // every M after every M
    const RunArgs args{.m = ms[j], .a = inputs[j].get(), .b = weight.get(), .c = out.get()};
    Status ran = op->Run(args, stream.get());
    if (ran.ok()) ran = op->Synchronize(stream.get());
    const std::string what = absl::StrCat(c.name, " rank ", rank, " run ", i, " M=", ms[j]);
    if (!ran.ok()) return absl::Status(ToAbsl(ran).code(), absl::StrCat(what, ": ", ran.message()));
    RETURN_IF_ERROR(ExpectEqual(*api, out.get(), expected[j], c.n, c.dtype, what));
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
        // The copy engine at 4 ranks: its unfused transfers and its fused kernel each once stalled
        // there when MPS gave a rank a quarter of the SMs (gpu-checks.sh runs it so as well).
        Case{.name = "ag_w4_ce",
             .kind = OpKind::kAllGatherMatmul,
             .world = 4,
             .backend = Backend::kCopyEngine},
        Case{.name = "ag_w8_sm", .kind = OpKind::kAllGatherMatmul, .world = 8},
        Case{.name = "rs_w4", .kind = OpKind::kMatmulReduceScatter, .world = 4},
        Case{.name = "rs_w2_fused_whole_chunks",
             .kind = OpKind::kMatmulReduceScatter,
             .path = PathPreference::kFused,
             .tile_parts = false},
        Case{.name = "ar_w2_fused",
             .kind = OpKind::kMatmulAllReduce,
             .path = PathPreference::kFused}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

void ExpectBothRanksOk(const std::vector<absl::Status>& results) {
  ASSERT_EQ(results.size(), 2u);
  ::syncopate::testing::ExpectEveryRankOk(results);
}

// A small AllGather+GEMM op (n 256, k 128) for the tests of faults and threads.
OpConfig SmallOp(int64_t max_m) {
  OpConfig config;
  config.max_m = max_m;
  config.n = 256;
  config.k = 128;
  config.cache_dir = workloads::TestCacheDir();
  return config;
}

// Rank 1 creates the op and never runs it: rank 0's wait ends at its deadline naming rank 1,
// and every later call returns that same error.
TEST_F(OpsGpuTest, APeerThatNeverRunsIsNamedAndTheErrorSticks) {
  const std::string job = workloads::UniqueGroupId("ops_absent");
  std::vector<absl::Status> results = workloads::RunRanks(2, absl::Minutes(3), [&](int rank) {
    OpConfig config = SmallOp(512);
    config.path = PathPreference::kFused;
    config.timeout_ms = 1500;
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
  ExpectBothRanksOk(results);
}

// Ranks whose configs would launch different kernels (other buckets here) are told so at Create,
// naming the field, instead of running against each other.
TEST_F(OpsGpuTest, RanksWithDifferentBucketsFailCreateNamingThem) {
  const std::string job = workloads::UniqueGroupId("ops_disagree");
  std::vector<absl::Status> results = workloads::RunRanks(2, absl::Minutes(2), [&](int rank) {
    OpConfig config = SmallOp(1024);
    config.m_buckets = rank == 0 ? std::vector<int64_t>{512} : std::vector<int64_t>{256};
    Result<std::unique_ptr<Op>> op = Op::Create({.job = job, .rank = rank, .world = 2}, config);
    if (op.ok()) return absl::InternalError("Create succeeded with different buckets");
    if (op.status().code() != StatusCode::kFailedPrecondition ||
        op.status().message().find("m_buckets") == std::string::npos) {
      return absl::InternalError("not named: " + op.status().ToString());
    }
    return absl::OkStatus();
  });
  ExpectBothRanksOk(results);
}

// An engine may create the op on one thread and run it on a worker that has no CUDA context
// current: the run's first calls (the input copy) must not fail for that, nor the op's teardown
// on such a thread.
TEST_F(OpsGpuTest, RunsAndTeardownFromAThreadWithoutTheContextWork) {
  const std::string job = workloads::UniqueGroupId("ops_thread");
  std::vector<absl::Status> results = workloads::RunRanks(2, absl::Minutes(3), [&](int rank) {
    Result<std::unique_ptr<Op>> created =
        Op::Create({.job = job, .rank = rank, .world = 2}, SmallOp(512));
    OPS_RETURN_IF_ERROR(created.status());
    std::unique_ptr<Op> op = std::move(*created);
    ASSIGN_OR_RETURN(const cuda::DriverApi* api, cuda::Driver());
    ASSIGN_OR_RETURN(cuda::DeviceBuffer a,
                     cuda::DeviceBuffer::Allocate(*api, size_t{256} * 128 * 2));
    ASSIGN_OR_RETURN(cuda::DeviceBuffer b,
                     cuda::DeviceBuffer::Allocate(*api, size_t{256} * 128 * 2));
    ASSIGN_OR_RETURN(cuda::DeviceBuffer c,
                     cuda::DeviceBuffer::Allocate(*api, size_t{512} * 256 * 2));
    ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create(*api));
    absl::Status worker;
    std::thread([&] {
      CUcontext none = nullptr;
      if (api->cuCtxSetCurrent(none) != CUDA_SUCCESS) {  // new threads have none; make sure
        worker = absl::InternalError("could not clear the thread's context");
        return;
      }
      RunArgs args{.m = 512, .a = a.get(), .b = b.get(), .c = c.get()};
      Status s = op->Run(args, stream.get());
      if (s.ok()) s = op->Synchronize(stream.get());
      if (!s.ok()) {
        worker = absl::InternalError("run from a thread without the context: " + s.ToString());
        return;
      }
      op.reset();  // the teardown on this thread too
    }).join();
    return worker;
  });
  ExpectBothRanksOk(results);
}

}  // namespace
}  // namespace syncopate::ops::gpu_test
