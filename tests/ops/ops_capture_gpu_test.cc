// Ops captured in the caller's CUDA graph (syncopate/ops.h, Run): an engine's loop (warm-up,
// one capture of two ops at every bucket and a small unfused M, 1,000 replays, every output
// checked after every replay, direct runs mixed in), on both backends; a capture of the first
// runs, with no warm-up; a peer that stops replaying, named by a sticky error.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/handles.h"
#include "runtime/cuda/workloads/multiprocess.h"
#include "runtime/cuda/workloads/workloads.h"
#include "syncopate/ops.h"
#include "tests/ops/ops_gpu_support.h"
#include "tests/testing/rank_results.h"

namespace syncopate::ops::gpu_test {
namespace {

constexpr uint16_t kNaNBits = 0x7FC0;  // bf16 NaN (fp16: a NaN too): never an expected value

// One op of the loop with, per M, its input, its output buffer and the expected output.
struct LoopOp {
  Case c;
  std::unique_ptr<Op> op;
  cuda::DeviceBuffer weight;
  std::vector<cuda::DeviceBuffer> inputs, outputs;
  std::vector<std::vector<float>> expected;
};

absl::StatusOr<LoopOp> MakeLoopOp(const Case& c, const std::string& job, int rank,
                                  const std::vector<int64_t>& ms) {
  const cuda::DriverApi& api = **cuda::Driver();
  LoopOp l;
  l.c = c;
  std::unique_ptr<cuda::NodeRendezvous> unused;
  ASSIGN_OR_RETURN(l.op, CreateOp(c, job, rank, unused));
  RETURN_IF_ERROR(ExpectAllReducePlans(*l.op, c, ms));
  const int64_t k = 256 / c.world;
  const bool gather = c.kind == OpKind::kAllGatherMatmul;
  for (int64_t m : ms) {
    const int64_t rows = gather ? m / c.world : m;
    ASSIGN_OR_RETURN(l.inputs.emplace_back(), cuda::DeviceBuffer::Allocate(api, rows * k * 2));
    RETURN_IF_ERROR(Upload(api, l.inputs.back().get(), Matrix(SeedA(rank), rows, k), c.dtype));
    l.expected.push_back(Expected(c, rank, m, c.n, k, 0));
    ASSIGN_OR_RETURN(l.outputs.emplace_back(),
                     cuda::DeviceBuffer::Allocate(api, l.expected.back().size() * 2));
  }
  ASSIGN_OR_RETURN(l.weight, cuda::DeviceBuffer::Allocate(api, c.n * k * 2));
  RETURN_IF_ERROR(Upload(api, l.weight.get(), Matrix(SeedB(rank, 0), c.n, k), c.dtype));
  return l;
}

RunArgs ArgsAt(const LoopOp& l, const std::vector<int64_t>& ms, size_t j) {
  return RunArgs{.m = ms[j], .a = l.inputs[j].get(), .b = l.weight.get(), .c = l.outputs[j].get()};
}

// Every output of every op set to NaN on `stream`, so a replay that skipped one shows.
absl::Status Poison(const cuda::DriverApi& api, const std::vector<LoopOp>& ops, CUstream stream) {
  for (const LoopOp& l : ops) {
    for (size_t j = 0; j < l.outputs.size(); ++j) {
      CU_RETURN_IF_ERROR(
          api.cuMemsetD16Async(l.outputs[j].get(), kNaNBits, l.expected[j].size(), stream));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckAll(const cuda::DriverApi& api, const std::vector<LoopOp>& ops,
                      const std::vector<int64_t>& ms, const std::string& when) {
  for (const LoopOp& l : ops) {
    for (size_t j = 0; j < ms.size(); ++j) {
      RETURN_IF_ERROR(ExpectEqual(api, l.outputs[j].get(), l.expected[j], l.c.n, l.c.dtype,
                                  absl::StrCat(l.c.name, " M=", ms[j], " ", when)));
    }
  }
  return absl::OkStatus();
}

// Waits through the ops (a device-side timeout comes back named) and checks every output.
absl::Status SyncAndCheck(const cuda::DriverApi& api, std::vector<LoopOp>& ops,
                          const std::vector<int64_t>& ms, CUstream stream,
                          const std::string& when) {
  for (LoopOp& l : ops) OPS_RETURN_IF_ERROR(l.op->Synchronize(stream));
  return CheckAll(api, ops, ms, when);
}

// Two ops (case `c` and the other kind, each its own group) captured into one graph: every
// bucket's M, an M that pads, and a small M on the unfused path.
absl::Status RunCapturedLoop(const Case& param, const std::string& job, int rank) {
  ASSIGN_OR_RETURN(const int replays, CaptureReplays());
  Case c = param;
  c.m_buckets = {512, 1024, 2048};  // the graph holds a run of each, and of Ms that pad
  const std::vector<int64_t> ms = {2048, 1024, 1000, 512, int64_t{8} * c.world};
  Case other = c;
  other.name = c.name + "_second";
  other.kind =
      c.kind == OpKind::kAllGatherMatmul ? OpKind::kMatmulReduceScatter : OpKind::kAllGatherMatmul;
  if (other.kind != OpKind::kAllGatherMatmul) other.backend = Backend::kSm;  // CE cannot reduce
  ASSIGN_OR_RETURN(const cuda::DriverApi* api, cuda::Driver());
  std::vector<LoopOp> ops;
  ASSIGN_OR_RETURN(ops.emplace_back(), MakeLoopOp(c, job, rank, ms));
  ASSIGN_OR_RETURN(ops.emplace_back(), MakeLoopOp(other, job + "_2", rank, ms));
  ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create(*api));
  // Warm-up: every (op, M) once, outside any graph.
  for (LoopOp& l : ops) {
    for (size_t j = 0; j < ms.size(); ++j)
      OPS_RETURN_IF_ERROR(l.op->Run(ArgsAt(l, ms, j), stream.get()));
  }
  RETURN_IF_ERROR(SyncAndCheck(*api, ops, ms, stream.get(), "warm-up"));
  // Capture, in the mode PyTorch's torch.cuda.graph uses.
  CU_RETURN_IF_ERROR(api->cuStreamBeginCapture(stream.get(), CU_STREAM_CAPTURE_MODE_GLOBAL));
  absl::Status captured = absl::OkStatus();
  for (size_t j = 0; j < ms.size() && captured.ok(); ++j) {
    for (LoopOp& l : ops) {
      if (captured.ok()) captured = ToAbsl(l.op->Run(ArgsAt(l, ms, j), stream.get()));
    }
  }
  CUgraph raw = nullptr;
  const CUresult ended = api->cuStreamEndCapture(stream.get(), &raw);
  cuda::Graph graph(*api, raw);
  RETURN_IF_ERROR(captured);
  CU_RETURN_IF_ERROR(ended);
  RETURN_IF_ERROR(graph.Instantiate());
  for (int i = 0; i < replays; ++i) {
    RETURN_IF_ERROR(Poison(*api, ops, stream.get()));
    CU_RETURN_IF_ERROR(api->cuGraphLaunch(graph.exec(), stream.get()));
    RETURN_IF_ERROR(SyncAndCheck(*api, ops, ms, stream.get(), absl::StrCat("replay ", i)));
    if (i % 100 == 50) {  // direct runs between replays take the next epochs as well
      RETURN_IF_ERROR(Poison(*api, ops, stream.get()));
      for (size_t j = 0; j < ms.size(); ++j) {
        for (LoopOp& l : ops) OPS_RETURN_IF_ERROR(l.op->Run(ArgsAt(l, ms, j), stream.get()));
      }
      RETURN_IF_ERROR(
          SyncAndCheck(*api, ops, ms, stream.get(), absl::StrCat("direct runs after replay ", i)));
    }
  }
  return absl::OkStatus();
}

class OpsCaptureTest : public OpsGpuTest {};

TEST_P(OpsCaptureTest, AThousandReplaysOfTwoOpsAtEveryBucketAreAllRight) {
  ExpectEveryRankSucceeds(GetParam(), "ops_graph", &RunCapturedLoop);
}

INSTANTIATE_TEST_SUITE_P(
    Ops, OpsCaptureTest,
    ::testing::Values(
        Case{.name = "ag_w2", .kind = OpKind::kAllGatherMatmul, .backend = Backend::kSm},
        Case{.name = "ag_w2_ce", .kind = OpKind::kAllGatherMatmul, .backend = Backend::kCopyEngine},
        AgCopyEngineFusedW4(),
        Case{.name = "rs_w4",
             .kind = OpKind::kMatmulReduceScatter,
             .world = 4,
             .backend = Backend::kSm},
        Case{.name = "rs_w2_fused",  // tile parts, the default
             .kind = OpKind::kMatmulReduceScatter,
             .backend = Backend::kSm,
             .path = PathPreference::kFused},
        Case{.name = "rs_w2_fused_whole_chunks",
             .kind = OpKind::kMatmulReduceScatter,
             .backend = Backend::kSm,
             .path = PathPreference::kFused,
             .tile_parts = false},
        Case{
            .name = "ag_w8", .kind = OpKind::kAllGatherMatmul, .world = 8, .backend = Backend::kSm},
        Case{.name = "ar_w2_fused",
             .kind = OpKind::kMatmulAllReduce,
             .backend = Backend::kSm,
             .path = PathPreference::kFused},
        // Buckets 512 and 1024 on allreduce.direct_out, 2048 on allreduce.direct (4 MiB of C):
        // one graph replays both plans' runs (ExpectAllReducePlans checks each bucket's).
        Case{.name = "ar_w2_mixed_plans",
             .kind = OpKind::kMatmulAllReduce,
             .backend = Backend::kSm,
             .path = PathPreference::kFused,
             .n = 1024}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// No warm-up: the first run of every bucket is recorded into a graph right after Create, which
// did every one-time thing (syncopate/ops.h, Run); also Ms that pad, among them a small one.
// With the default paths the AllGather's bucket 2048 is fused (1,024 rows per rank) and the
// smaller ones unfused, so both paths are captured first on either backend. The graph replays
// right, as do direct runs after it, and a second capture with a weight no run has used
// (other values at another address: the weight is passed per launch).
absl::Status CaptureBeforeAnyRun(const Case& c, const std::string& job, int rank) {
  Case bucketed = c;
  bucketed.m_buckets = {512, 1024, 2048};
  const std::vector<int64_t> ms = {2048, 1024, 1000, 512, int64_t{8} * c.world};
  ASSIGN_OR_RETURN(const cuda::DriverApi* api, cuda::Driver());
  std::vector<LoopOp> ops;
  ASSIGN_OR_RETURN(ops.emplace_back(), MakeLoopOp(bucketed, job, rank, ms));
  ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create(*api));
  auto capture = [&](const std::string& what) -> absl::StatusOr<cuda::Graph> {
    CU_RETURN_IF_ERROR(api->cuStreamBeginCapture(stream.get(), CU_STREAM_CAPTURE_MODE_GLOBAL));
    absl::Status ran = absl::OkStatus();
    for (size_t j = 0; j < ms.size() && ran.ok(); ++j) {
      ran = ToAbsl(ops[0].op->Run(ArgsAt(ops[0], ms, j), stream.get()));
    }
    CUgraph raw = nullptr;
    const CUresult ended = api->cuStreamEndCapture(stream.get(), &raw);
    cuda::Graph graph(*api, raw);
    if (!ran.ok()) return absl::Status(ran.code(), absl::StrCat(what, ": ", ran.message()));
    CU_RETURN_IF_ERROR(ended);
    RETURN_IF_ERROR(graph.Instantiate());
    return graph;
  };
  auto replay = [&](const cuda::Graph& graph, const std::string& what) -> absl::Status {
    for (int i = 0; i < 3; ++i) {
      RETURN_IF_ERROR(Poison(*api, ops, stream.get()));
      CU_RETURN_IF_ERROR(api->cuGraphLaunch(graph.exec(), stream.get()));
      RETURN_IF_ERROR(SyncAndCheck(*api, ops, ms, stream.get(), absl::StrCat(what, " ", i)));
    }
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(const cuda::Graph first, capture("capture before any run"));
  RETURN_IF_ERROR(replay(first, "replay of the first runs"));
  RETURN_IF_ERROR(Poison(*api, ops, stream.get()));
  for (size_t j = 0; j < ms.size(); ++j) {
    OPS_RETURN_IF_ERROR(ops[0].op->Run(ArgsAt(ops[0], ms, j), stream.get()));
  }
  RETURN_IF_ERROR(SyncAndCheck(*api, ops, ms, stream.get(), "direct runs after the replays"));
  const int64_t k = 256 / c.world;  // MakeLoopOp's
  ASSIGN_OR_RETURN(cuda::DeviceBuffer moved, cuda::DeviceBuffer::Allocate(*api, c.n * k * 2));
  RETURN_IF_ERROR(Upload(*api, moved.get(), Matrix(SeedB(rank, 1), c.n, k), c.dtype));
  ops[0].weight = std::move(moved);
  for (size_t j = 0; j < ms.size(); ++j) ops[0].expected[j] = Expected(c, rank, ms[j], c.n, k, 1);
  ASSIGN_OR_RETURN(const cuda::Graph second, capture("capture with a new weight"));
  return replay(second, "replay with the new weight");
}

class OpsFirstCaptureTest : public OpsGpuTest {};

TEST_P(OpsFirstCaptureTest, TheFirstRunOfEveryBucketMayBeCaptured) {
  ExpectEveryRankSucceeds(GetParam(), "ops_first_capture", &CaptureBeforeAnyRun);
}

INSTANTIATE_TEST_SUITE_P(
    Ops, OpsFirstCaptureTest,
    ::testing::Values(
        Case{.name = "ag_sm", .kind = OpKind::kAllGatherMatmul, .backend = Backend::kSm},
        Case{.name = "ag_ce", .kind = OpKind::kAllGatherMatmul, .backend = Backend::kCopyEngine},
        Case{.name = "rs_sm", .kind = OpKind::kMatmulReduceScatter, .backend = Backend::kSm},
        Case{.name = "ar_fused",
             .kind = OpKind::kMatmulAllReduce,
             .backend = Backend::kSm,
             .path = PathPreference::kFused}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// Both ranks capture; rank 1 never replays. Rank 0's replay ends at its device-side deadline:
// Synchronize names rank 1, and error() and every later run return the same.
TEST_F(OpsGpuTest, APeerThatStopsReplayingIsNamedByAStickyError) {
  const std::string job = workloads::UniqueGroupId("ops_graph_absent");
  std::vector<absl::Status> results = workloads::RunRanks(2, absl::Minutes(3), [&](int rank) {
    Case c{.name = "ag",
           .kind = OpKind::kAllGatherMatmul,
           .backend = Backend::kSm,
           .path = PathPreference::kFused};
    OpConfig config = OpConfigFor(c);
    config.timeout_ms = 1500;
    Result<std::unique_ptr<Op>> created =
        Op::Create({.job = job, .rank = rank, .world = 2}, config);
    OPS_RETURN_IF_ERROR(created.status());
    Op& op = **created;
    ASSIGN_OR_RETURN(const cuda::DriverApi* api, cuda::Driver());
    ASSIGN_OR_RETURN(cuda::DeviceBuffer buf, cuda::DeviceBuffer::Allocate(*api, 8 << 20));
    ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create(*api));
    const RunArgs args{.m = kMaxM, .a = buf.get(), .b = buf.get(), .c = buf.get()};
    OPS_RETURN_IF_ERROR(op.Run(args, stream.get()));
    OPS_RETURN_IF_ERROR(op.Synchronize(stream.get()));
    CU_RETURN_IF_ERROR(api->cuStreamBeginCapture(stream.get(), CU_STREAM_CAPTURE_MODE_GLOBAL));
    const Status ran = op.Run(args, stream.get());
    CUgraph raw = nullptr;
    CU_RETURN_IF_ERROR(api->cuStreamEndCapture(stream.get(), &raw));
    cuda::Graph graph(*api, raw);
    OPS_RETURN_IF_ERROR(ran);
    RETURN_IF_ERROR(graph.Instantiate());
    if (rank == 1) {
      absl::SleepFor(absl::Seconds(6));  // alive, mapped, never replaying
      return absl::OkStatus();
    }
    CU_RETURN_IF_ERROR(api->cuGraphLaunch(graph.exec(), stream.get()));
    const Status first = op.Synchronize(stream.get());
    if (first.code() != StatusCode::kDeadlineExceeded ||
        first.message().find("rank 1") == std::string::npos) {
      return absl::InternalError("rank 1 not named: " + first.ToString());
    }
    const Status again = op.Run(args, stream.get());
    if (op.error().message() != first.message() || again.message() != first.message()) {
      return absl::InternalError("error not sticky: " + op.error().ToString() + " / " +
                                 again.ToString());
    }
    return absl::OkStatus();
  });
  ::syncopate::testing::ExpectEveryRankOk(results);
}

}  // namespace
}  // namespace syncopate::ops::gpu_test
