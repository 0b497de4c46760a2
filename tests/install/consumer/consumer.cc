// The installed C++ API (syncopate/ops.h) as a C++ program uses it: config checks that name the
// field at fault, the buckets and the path of a run, and creating an op (on a machine without a
// GPU, Unavailable saying so). The C ABI's header compiles as C++ beside it. Exits 1 naming the
// first mismatch.
#include <syncopate/ops.h>
#include <syncopate/status.h>
#include <syncopate/syncopate_ops.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace ops = syncopate::ops;
using syncopate::Result;
using syncopate::Status;
using syncopate::StatusCode;

[[noreturn]] void Fail(const std::string& what, const Status& status = Status()) {
  std::fprintf(stderr, "consumer: FAIL: %s (%s)\n", what.c_str(), status.ToString().c_str());
  std::exit(1);
}

void ExpectInvalid(const ops::GroupConfig& group, const ops::OpConfig& op,
                   const std::string& field) {
  Status status = ops::CheckConfig(group, op);
  if (status.code() != StatusCode::kInvalidArgument) Fail("bad " + field + " not refused", status);
  if (status.message().find(field) == std::string::npos) {
    Fail("the error does not name " + field, status);
  }
  std::printf("consumer: bad %s: %s\n", field.c_str(), status.ToString().c_str());
}

ops::GroupConfig Group(int rank, int world) {
  ops::GroupConfig group;
  group.job = "install-consumer-cxx";
  group.rank = rank;
  group.world = world;
  return group;
}

ops::OpConfig Config(int64_t max_m, int64_t n, int64_t k) {
  ops::OpConfig op;
  op.kind = ops::OpKind::kAllGatherMatmul;
  op.max_m = max_m;
  op.n = n;
  op.k = k;
  return op;
}

}  // namespace

int main() {
  if (syncopate_abi_version() != SYNCOPATE_ABI_VERSION) Fail("the library's ABI version");
  if (std::string(syncopate::StatusCodeName(StatusCode::kUnavailable)) != "UNAVAILABLE") {
    Fail("StatusCodeName(kUnavailable)");
  }

  // Config checks: the valid one passes, each bad one names its field.
  ops::GroupConfig group = Group(0, 2);
  ops::OpConfig op = Config(8192, 1024, 1024);
  Status status = ops::CheckConfig(group, op);
  if (!status.ok()) Fail("a valid config was refused", status);
  group.world = 0;
  ExpectInvalid(group, op, "group.world");
  group.world = 2;
  group.rank = 2;
  ExpectInvalid(group, op, "group.rank");
  group.rank = 0;
  op.max_m = 8191;
  ExpectInvalid(group, op, "op.max_m");
  op.max_m = 8192;

  // Buckets and the path of a run: the bucket is the smallest one >= M.
  Result<std::vector<int64_t>> buckets = ops::BucketsFor(op, 2);
  if (!buckets.ok()) Fail("BucketsFor", buckets.status());
  if (buckets->empty() || buckets->back() != op.max_m ||
      !std::is_sorted(buckets->begin(), buckets->end())) {
    Fail("the buckets are not sorted up to max_m");
  }
  Result<ops::PathChoice> path = ops::ChoosePath(op, 2, 4096);
  if (!path.ok()) Fail("ChoosePath at m=4096", path.status());
  const int64_t expected_bucket = *std::lower_bound(buckets->begin(), buckets->end(), 4096);
  if (path->m != 4096 || path->bucket_m < 4096 || path->bucket_m != expected_bucket ||
      path->reason.empty()) {
    Fail("path at m=4096: bucket_m " + std::to_string(path->bucket_m) + " (expected " +
         std::to_string(expected_bucket) + "), reason '" + path->reason + "'");
  }
  std::printf("consumer: m=4096: bucket_m %lld, %s over %s, %d chunk(s): %s\n",
              static_cast<long long>(path->bucket_m), path->fused ? "fused" : "unfused",
              ops::BackendName(path->backend), path->chunks, path->reason.c_str());
  path = ops::ChoosePath(op, 2, 4097);
  if (path.ok()) Fail("ChoosePath at m=4097 was not refused");
  if (path.status().code() != StatusCode::kInvalidArgument ||
      path.status().message().find("4097") == std::string::npos) {
    Fail("ChoosePath at m=4097", path.status());
  }

  // A world-1 op: built where there is a GPU, Unavailable saying why where there is none.
  ops::OpConfig small = Config(1024, 1024, 1024);
  small.m_buckets = {1024};  // one kernel to build
  Result<std::unique_ptr<ops::Op>> created = ops::Op::Create(Group(0, 1), small);
  if (created.ok()) {
    std::unique_ptr<ops::Op> solo = std::move(created).value();
    if (solo == nullptr || solo->world() != 1 || solo->rank() != 0) Fail("the created op");
    Result<ops::PathChoice> solo_path = solo->Path(1024);
    if (!solo_path.ok() || solo_path->bucket_m != 1024) Fail("the op's path at m=1024");
    if (!solo->error().ok()) Fail("a new op has a sticky error", solo->error());
    solo.reset();
    std::printf("consumer: world-1 op: created and destroyed\n");
  } else if (created.status().code() == StatusCode::kUnavailable) {
    if (created.status().message().find("no usable GPU") == std::string::npos) {
      Fail("Unavailable without 'no usable GPU'", created.status());
    }
    std::printf("consumer: world-1 op: %s\n", created.status().ToString().c_str());
  } else {
    Fail("Op::Create was neither OK nor Unavailable", created.status());
  }

  std::printf("consumer: OK\n");
  return 0;
}
