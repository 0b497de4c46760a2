// SYNCOPATE_OPS_TRACE_DIR (ops/launch_trace.h): an op's direct fused launches leave per-CTA
// timelines in <dir>/<job>_<kind>_rank<r>.csv when the op is destroyed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/handles.h"
#include "runtime/cuda/node_rendezvous.h"
#include "runtime/cuda/workloads/workloads.h"
#include "syncopate/ops.h"
#include "tests/ops/ops_gpu_support.h"

namespace syncopate::ops::gpu_test {
namespace {

constexpr int kDirectRuns = 3;

struct Row {
  int64_t launch, bucket_m, m, cta, comm, control, smid, start, end, wait, waits;
};

absl::StatusOr<std::vector<Row>> ReadTrace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no trace at ", path));
  std::string line;
  std::getline(in, line);
  if (line != "launch,bucket_m,m,cta,comm,control,smid,start_ns,end_ns,wait_ns,waits") {
    return absl::InternalError(absl::StrCat(path, ": header ", line));
  }
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ',');
    if (f.size() != 11) return absl::InternalError(absl::StrCat(path, ": row ", line));
    std::vector<int64_t> v(f.size());
    std::transform(f.begin(), f.end(), v.begin(),
                   [](const std::string& s) { return std::stoll(s); });
    rows.push_back({v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10]});
  }
  return rows;
}

// Three direct runs of a fused AllReduce at the bucket's M; the op is destroyed (and writes its
// file) before the file is read.
absl::Status RunTraced(const Case& c, const std::string& job, int rank) {
  const int64_t k = 256 / c.world;
  {
    // The op first: it makes the GPU's context current for the buffers below, which go before
    // it (declared after it), and it goes (writing its trace) before the file is read.
    std::unique_ptr<cuda::NodeRendezvous> bytes_only;
    ASSIGN_OR_RETURN(std::unique_ptr<Op> op, CreateOp(c, job, rank, bytes_only));
    ASSIGN_OR_RETURN(const cuda::DriverApi* api, cuda::Driver());
    ASSIGN_OR_RETURN(cuda::DeviceBuffer a, cuda::DeviceBuffer::Allocate(*api, kMaxM * k * 2));
    ASSIGN_OR_RETURN(cuda::DeviceBuffer b, cuda::DeviceBuffer::Allocate(*api, c.n * k * 2));
    ASSIGN_OR_RETURN(cuda::DeviceBuffer out, cuda::DeviceBuffer::Allocate(*api, kMaxM * c.n * 2));
    RETURN_IF_ERROR(Upload(*api, a.get(), Matrix(SeedA(rank), kMaxM, k), c.dtype));
    RETURN_IF_ERROR(Upload(*api, b.get(), Matrix(SeedB(rank, 0), c.n, k), c.dtype));
    ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create(*api));
    const RunArgs args{.m = kMaxM, .a = a.get(), .b = b.get(), .c = out.get()};
    for (int i = 0; i < kDirectRuns; ++i) OPS_RETURN_IF_ERROR(op->Run(args, stream.get()));
    OPS_RETURN_IF_ERROR(op->Synchronize(stream.get()));
    RETURN_IF_ERROR(ExpectEqual(*api, out.get(), Expected(c, rank, kMaxM, c.n, k, 0), c.n, c.dtype,
                                "traced runs"));
  }
  const std::string path = absl::StrCat(std::getenv("SYNCOPATE_OPS_TRACE_DIR"), "/", job, "_",
                                        OpKindName(c.kind), "_rank", rank, ".csv");
  ASSIGN_OR_RETURN(std::vector<Row> rows, ReadTrace(path));
  std::map<int64_t, std::vector<Row>> launches;
  for (const Row& r : rows) launches[r.launch].push_back(r);
  if (launches.size() != kDirectRuns) {
    return absl::InternalError(
        absl::StrCat(path, ": ", launches.size(), " launches, want ", kDirectRuns));
  }
  int64_t previous_start = 0;
  for (const auto& [launch, ctas] : launches) {
    int64_t first_start = INT64_MAX;
    for (const Row& r : ctas) {
      if (r.bucket_m != kMaxM || r.m != kMaxM) {
        return absl::InternalError(absl::StrCat("launch ", launch, ": bucket ", r.bucket_m));
      }
      // Every CTA ran: it stamped its entry and its exit (the records start zeroed), exit after
      // entry.
      if (r.start <= 0 || r.end < r.start) {
        return absl::InternalError(
            absl::StrCat("launch ", launch, " CTA ", r.cta, ": start ", r.start, ", end ", r.end));
      }
      first_start = std::min(first_start, r.start);
    }
    if (first_start < previous_start) {
      return absl::InternalError(absl::StrCat("launch ", launch, " starts before the one before"));
    }
    previous_start = first_start;
  }
  return absl::OkStatus();
}

class OpsTraceGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!workloads::ProbeGpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  }
};

TEST_F(OpsTraceGpuTest, FusedLaunchesLeaveTheirCtaTimelinesWhereTheEnvironmentSays) {
  const std::string dir = ::testing::TempDir() + "/ops_trace";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ASSERT_EQ(setenv("SYNCOPATE_OPS_TRACE_DIR", dir.c_str(), 1), 0);  // the forked ranks inherit
  ExpectEveryRankSucceeds(
      Case{.name = "ar_fused", .kind = OpKind::kMatmulAllReduce, .path = PathPreference::kFused},
      "trace", &RunTraced);
  unsetenv("SYNCOPATE_OPS_TRACE_DIR");
}

}  // namespace
}  // namespace syncopate::ops::gpu_test
