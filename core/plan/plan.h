// The chunk-plan model: buffers, transfers (chunk moves), per-rank plans and the collective's
// postcondition. Plain value types with no CUDA or gRPC dependency; protobuf forms convert to and
// from these once, at the boundary (core/plan_io/plan_proto.h).
//
// Semantics every part of Syncopate relies on:
// - Every rank has the same set of buffers (name, dtype, shape, strides).
// - A Transfer is executed by `rank` on its `channel`. PUSH reads the source on `rank` and writes
//   the destination on `peer`; PULL reads the source on `peer` and writes the destination on
//   `rank`; LOCAL_COPY has peer == rank. Element k of the source region (in region element order)
//   goes to element k of the destination region; the two regions have the same element count.
// - With a reduce op the destination element becomes dst op src (atomically: concurrent reductions
//   with the same op into one element do not race with each other; a plain write and anything
//   else do). A reduction into an element that holds no valid data yet (not initial, nothing
//   written) initializes it with src, so concurrent reductions into a fresh output need no
//   ordering among themselves. (Backends implement this by zero-/identity-filling reduction
//   outputs before the launch, or by making the first writer a plain copy.)
// - A transfer starts when every transfer in `deps` has completed and, when `after_compute` is set,
//   when the local computation has produced its source region. Transfers of one channel run in
//   list order; channels of a rank run concurrently.
// - On completion a transfer sets signal `signal` on its destination rank. Signals are unique per
//   destination rank; that is what a fused kernel's tile waits on.
// - `initial` lists, per rank, the regions that hold valid data before anything runs.
// - The postcondition says what must hold when every transfer has completed. A copy expectation
//   also requires each element to be written at most once (ValidatePlan).
// - Transfers are identified by `id`; ValidatePlanStructure (validate.h) checks everything a
//   consumer needs before indexing buffers and transfers.
// - Canonical encoding format: see plan.cc (first line "syncopate-plan v1").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/region.h"

namespace syncopate::plan {

enum class DType : uint8_t { kF32, kF16, kBF16, kF64, kI32, kI64, kI8, kU8 };
int64_t DTypeSize(DType dtype);
const char* DTypeName(DType dtype);  // "f32", "f16", "bf16", ...
absl::StatusOr<DType> ParseDType(std::string_view name);

enum class TransferKind : uint8_t { kPush, kPull, kLocalCopy };
const char* TransferKindName(TransferKind kind);  // "push", "pull", "local_copy"

enum class ReduceOp : uint8_t { kNone, kSum, kMax };
const char* ReduceOpName(ReduceOp op);  // "none", "sum", "max"

struct BufferSpec {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<int64_t> strides;  // in elements; row-major when built by MakeBuffer

  int64_t NumElements() const;
  friend bool operator==(const BufferSpec&, const BufferSpec&) = default;
};
BufferSpec MakeBuffer(std::string name, DType dtype, Shape shape);

struct Transfer {
  int id = -1;  // unique in the plan, dense: plan transfer ids are 0..NumTransfers()-1
  TransferKind kind = TransferKind::kPush;
  int rank = 0;     // executing rank
  int channel = 0;  // index into ranks[rank].channels
  int peer = 0;     // the other rank (== rank for LOCAL_COPY)
  std::string src_buffer;
  Region src_region;
  std::string dst_buffer;
  Region dst_region;
  int chunk = 0;  // chunk index within the collective, for display and kernel tables
  int step = 0;   // logical step (ring step, level), for display and arrival estimates
  ReduceOp reduce = ReduceOp::kNone;
  std::vector<int> deps;       // transfer ids (any rank) that must complete first
  bool after_compute = false;  // the source region is produced by this launch's computation
  int signal = -1;             // signal set on the destination rank when complete

  int src_rank() const { return kind == TransferKind::kPull ? peer : rank; }
  int dst_rank() const { return kind == TransferKind::kPush ? peer : rank; }
  friend bool operator==(const Transfer&, const Transfer&) = default;
};

struct RankPlan {
  // Ordered transfer lists, one per channel (stream / communication CTA group).
  std::vector<std::vector<Transfer>> channels;
  // Regions holding valid data at the start, by buffer name.
  std::map<std::string, Region> initial;
  friend bool operator==(const RankPlan&, const RankPlan&) = default;
};

// One source of an expectation: the initial contents of `region` of `buffer` on `rank`.
struct Contribution {
  int rank = 0;
  std::string buffer;
  Region region;
  friend bool operator==(const Contribution&, const Contribution&) = default;
};

// After the plan, `region` of `buffer` on `rank` holds, element by element (region element
// order), the `op`-reduction of the sources' initial values; with kNone exactly one source, copied.
struct Expectation {
  int rank = 0;
  std::string buffer;
  Region region;
  ReduceOp op = ReduceOp::kNone;
  std::vector<Contribution> sources;
  friend bool operator==(const Expectation&, const Expectation&) = default;
};

enum class CollectiveKind : uint8_t { kCustom, kAllGather, kReduceScatter, kAllReduce, kAllToAll };
const char* CollectiveKindName(CollectiveKind kind);

struct Plan {
  std::string name;  // e.g. "allgather.ring"; informative, part of the hash
  CollectiveKind collective = CollectiveKind::kCustom;
  int world_size = 0;
  std::vector<BufferSpec> buffers;
  std::vector<RankPlan> ranks;  // size world_size
  std::vector<Expectation> postcondition;

  const BufferSpec* FindBuffer(std::string_view name) const;
  int NumTransfers() const;
  // All transfers indexed by id (pointers into `ranks`; invalidated when the plan changes).
  std::vector<const Transfer*> TransfersById() const;
  friend bool operator==(const Plan&, const Plan&) = default;
};

// A node map gives each rank's node id (ranks on one node share memory; chunks between nodes go
// over the network). Empty means every rank on node 0. Returns the map with one entry per rank,
// or InvalidArgument for a map of the wrong size or with a negative id.
absl::StatusOr<std::vector<int>> ResolveNodeMap(int world_size, const std::vector<int>& nodes);

// Canonical encoding: a deterministic text form covering every field above (same plan, same
// bytes, on every machine). The plan hash is the SHA-256 hex of it.
std::string CanonicalEncoding(const Plan& plan);
std::string PlanHash(const Plan& plan);

}  // namespace syncopate::plan
