// Config checks, M buckets and the path heuristic of syncopate/ops.h: pure, so every rank
// reaches the same answers and the CPU tests cover them.
#include <algorithm>
#include <cctype>
#include <string>

#include "ops/core/op_plans.h"
#include "syncopate/ops.h"

namespace syncopate::ops {
namespace {

constexpr int kMaxWorld = 64;
constexpr int kMaxChunks = 8;
constexpr int64_t kMaxM = int64_t{1} << 24;
constexpr int64_t kMaxDim = int64_t{1} << 20;
// Default buckets stop at this many rows per rank, and are rounded to this many rows per rank
// so every chunk count up to kMaxChunks splits them evenly.
constexpr int64_t kMinDefaultBucketRowsPerRank = 256;
constexpr int64_t kBucketRowQuantumPerRank = 64;
// Rows per rank from which an AllGather+GEMM runs fused by default (the heuristic below).
constexpr int64_t kFusedMinRowsPerRank = 1024;
// A GEMM+ReduceScatter or GEMM+AllReduce runs fused by default at two ranks from this many rows
// per rank, with kFusedReductionChunks chunks per shard unless the config sets them (the
// heuristic below).
constexpr int64_t kFusedReductionMinRowsPerRank = 4096;
constexpr int kFusedReductionChunks = 2;
// With tile parts (OpConfig::tile_parts), a GEMM+ReduceScatter also runs fused at four ranks
// from this many rows per rank: 8B, M=2048 (512 rows per rank), H200 under MPS, the tp bench:
// fused with parts 0.488 ms against unfused 0.579 and whole chunks 0.565 (bench/RESULTS.md,
// eighteenth session). Three and five to eight ranks, and two ranks below 4096 rows, are
// unmeasured: unfused.
constexpr int64_t kFusedTilePartsMinRowsPerRank4 = 512;

Status Invalid(std::string message) {
  return Status(StatusCode::kInvalidArgument, std::move(message));
}

bool ValidJobName(const std::string& job) {
  if (job.empty() || job.size() > 64) return false;
  return std::all_of(job.begin(), job.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
  });
}

bool HasReductions(OpKind kind) { return kind != OpKind::kAllGatherMatmul; }

int64_t RoundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

std::string BucketsText(const std::vector<int64_t>& buckets) {
  std::string text;
  for (int64_t b : buckets) text += (text.empty() ? "" : ", ") + std::to_string(b);
  return text;
}

const BucketPath* PathSetFor(const OpConfig& op, int64_t bucket_m) {
  for (const BucketPath& p : op.bucket_paths) {
    if (p.bucket_m == bucket_m) return &p;
  }
  return nullptr;
}

Status CheckBucketPaths(const OpConfig& op, int world) {
  if (op.bucket_paths.empty()) return Status::Ok();
  Result<std::vector<int64_t>> buckets = BucketsFor(op, world);
  if (!buckets.ok()) return buckets.status();
  for (size_t i = 0; i < op.bucket_paths.size(); ++i) {
    const BucketPath& p = op.bucket_paths[i];
    const std::string what =
        "op.bucket_paths[" + std::to_string(i) + "] (bucket M " + std::to_string(p.bucket_m) + ")";
    if (!std::binary_search(buckets->begin(), buckets->end(), p.bucket_m)) {
      return Invalid(what + " is not one of the op's buckets: " + BucketsText(*buckets));
    }
    if (PathSetFor(op, p.bucket_m) != &p) return Invalid(what + " sets that bucket twice");
    const int backend = static_cast<int>(p.backend);
    if (backend < 0 || backend > 2) {
      return Invalid(what + ": backend " + std::to_string(backend) + " is unknown");
    }
    if (p.backend == Backend::kCopyEngine && HasReductions(op.kind)) {
      return Invalid(what + ": the ce backend cannot run " + OpKindName(op.kind));
    }
    if (p.chunks < 0 || p.chunks > kMaxChunks) {
      return Invalid(what + ": chunks " + std::to_string(p.chunks) + " is not in 0.." +
                     std::to_string(kMaxChunks));
    }
  }
  return Status::Ok();
}

// Whether a fused run of this choice moves tile parts (OpConfig::tile_parts): only a
// ReduceScatter's plan has parts (an AllReduce's gather waits for its reductions), and only
// comm CTAs count them (the copy engine moves whole chunks).
bool TileParts(const OpConfig& op, const PathChoice& choice) {
  return op.tile_parts && choice.fused && op.kind == OpKind::kMatmulReduceScatter &&
         choice.backend == Backend::kSm;
}

// The config's path preference, else the heuristic (see ChoosePath); sets choice.fused and
// returns why.
std::string HeuristicPath(const OpConfig& op, int world, int64_t rows_per_rank,
                          PathChoice& choice) {
  std::string why;
  switch (op.path) {
    case PathPreference::kFused:
      choice.fused = true;
      why = "fused: the config asks for it";
      break;
    case PathPreference::kUnfused:
      choice.fused = false;
      why = "unfused: the config asks for it";
      break;
    case PathPreference::kAuto:
      if (HasReductions(op.kind) && world == 2 && rows_per_rank >= kFusedReductionMinRowsPerRank) {
        choice.fused = true;
        // Tile parts leave no chunk's tail to hide: one chunk per shard measured fastest
        // (2 ranks, 8B, M=8192, H200: 1.33 ms against 1.45 at two chunks; whole chunks 1.40 at
        // two, bench/RESULTS.md eighteenth session).
        if (op.chunks <= 0) choice.chunks = TileParts(op, choice) ? 1 : kFusedReductionChunks;
        why = std::string("fused: ") +
              (op.kind == OpKind::kMatmulReduceScatter ? "a ReduceScatter" : "an AllReduce") +
              " at 2 ranks with " + std::to_string(rows_per_rank) +
              " rows per rank >= " + std::to_string(kFusedReductionMinRowsPerRank) +
              " (measured faster than unfused)";
      } else if (op.kind == OpKind::kMatmulReduceScatter && world == 4 &&
                 rows_per_rank >= kFusedTilePartsMinRowsPerRank4 &&
                 TileParts(op, PathChoice{.fused = true, .backend = choice.backend})) {
        choice.fused = true;
        if (op.chunks <= 0) choice.chunks = 1;
        why = "fused: a ReduceScatter in tile parts at 4 ranks with " +
              std::to_string(rows_per_rank) +
              " rows per rank >= " + std::to_string(kFusedTilePartsMinRowsPerRank4) +
              " (measured faster than unfused)";
      } else if (HasReductions(op.kind)) {
        choice.fused = false;
        why = "unfused: fused reductions measured slower than the local GEMM then the transfers";
      } else {
        choice.fused = rows_per_rank >= kFusedMinRowsPerRank;
        why = choice.fused ? "fused: " + std::to_string(rows_per_rank) +
                                 " rows per rank >= " + std::to_string(kFusedMinRowsPerRank)
                           : "unfused: " + std::to_string(rows_per_rank) + " rows per rank < " +
                                 std::to_string(kFusedMinRowsPerRank);
      }
      break;
  }
  return why;
}

}  // namespace

const char* OpKindName(OpKind kind) {
  static constexpr const char* kNames[] = {"all_gather_matmul", "matmul_reduce_scatter",
                                           "matmul_all_reduce"};
  const int i = static_cast<int>(kind);
  return i >= 0 && i < 3 ? kNames[i] : "unknown";
}

const char* BackendName(Backend backend) {
  static constexpr const char* kNames[] = {"auto", "ce", "sm"};
  const int i = static_cast<int>(backend);
  return i >= 0 && i < 3 ? kNames[i] : "unknown";
}

Status CheckConfig(const GroupConfig& group, const OpConfig& op) {
  if (!ValidJobName(group.job)) {
    return Invalid("group.job '" + group.job +
                   "' must be 1-64 letters, digits, '-', '_' or '.' (it names the rendezvous)");
  }
  if (group.world < 1 || group.world > kMaxWorld) {
    return Invalid("group.world " + std::to_string(group.world) + " is not in 1.." +
                   std::to_string(kMaxWorld));
  }
  if (group.rank < 0 || group.rank >= group.world) {
    return Invalid("group.rank " + std::to_string(group.rank) + " is not in 0.." +
                   std::to_string(group.world - 1));
  }
  if (group.device < 0) return Invalid("group.device " + std::to_string(group.device) + " < 0");
  if (group.rendezvous_timeout_ms <= 0) return Invalid("group.rendezvous_timeout_ms must be > 0");
  if (!group.rendezvous_dir.empty() && group.rendezvous_dir.front() != '/') {
    return Invalid("group.rendezvous_dir '" + group.rendezvous_dir + "' must be an absolute path");
  }
  const int kind = static_cast<int>(op.kind);
  if (kind < 0 || kind > 2) return Invalid("op.kind " + std::to_string(kind) + " is unknown");
  const int dtype = static_cast<int>(op.dtype);
  if (dtype < 0 || dtype > 1) return Invalid("op.dtype " + std::to_string(dtype) + " is unknown");
  const int backend = static_cast<int>(op.backend);
  if (backend < 0 || backend > 2) {
    return Invalid("op.backend " + std::to_string(backend) + " is unknown");
  }
  const int path = static_cast<int>(op.path);
  if (path < 0 || path > 2) return Invalid("op.path " + std::to_string(path) + " is unknown");
  if (op.max_m <= 0 || op.max_m > kMaxM || op.max_m % group.world != 0) {
    return Invalid("op.max_m " + std::to_string(op.max_m) +
                   " must be a positive multiple of the world size " + std::to_string(group.world) +
                   " up to " + std::to_string(kMaxM));
  }
  if (op.n <= 0 || op.n > kMaxDim) return Invalid("op.n " + std::to_string(op.n) + " out of range");
  if (op.k <= 0 || op.k > kMaxDim) return Invalid("op.k " + std::to_string(op.k) + " out of range");
  if (op.chunks < 0 || op.chunks > kMaxChunks) {
    return Invalid("op.chunks " + std::to_string(op.chunks) + " is not in 0.." +
                   std::to_string(kMaxChunks));
  }
  if (op.comm_ctas < 0 || op.comm_ctas > 1024) {
    return Invalid("op.comm_ctas " + std::to_string(op.comm_ctas) + " is not in 0..1024");
  }
  if (op.timeout_ms <= 0) return Invalid("op.timeout_ms must be > 0");
  if (op.backend == Backend::kCopyEngine && HasReductions(op.kind)) {
    return Invalid(std::string("op.backend ce cannot run ") + OpKindName(op.kind) +
                   ": the copy engine moves chunks but does not add them (use sm or auto)");
  }
  for (int64_t bucket : op.m_buckets) {
    if (bucket <= 0 || bucket > op.max_m || bucket % group.world != 0) {
      return Invalid("op.m_buckets entry " + std::to_string(bucket) +
                     " must be a positive multiple of the world size " +
                     std::to_string(group.world) + " up to max_m " + std::to_string(op.max_m));
    }
  }
  return CheckBucketPaths(op, group.world);
}

Result<std::vector<int64_t>> BucketsFor(const OpConfig& op, int world) {
  if (world < 1) return Invalid("world " + std::to_string(world) + " < 1");
  std::vector<int64_t> buckets = op.m_buckets;
  if (buckets.empty()) {
    const int64_t quantum = kBucketRowQuantumPerRank * world;
    for (int64_t b = op.max_m / 4; b >= kMinDefaultBucketRowsPerRank * world; b /= 4) {
      buckets.push_back(std::min(op.max_m, RoundUp(b, quantum)));
    }
  }
  buckets.push_back(op.max_m);
  std::sort(buckets.begin(), buckets.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  for (int64_t b : buckets) {
    if (b <= 0 || b > op.max_m || b % world != 0) {
      return Invalid("bucket " + std::to_string(b) +
                     " is not a positive multiple of the world size " + std::to_string(world) +
                     " up to max_m " + std::to_string(op.max_m));
    }
  }
  return buckets;
}

// The heuristic, from what bench/RESULTS.md measured (2026-12-04/05, ranks as MPS clients of one
// GPU, the stand-in for several GPUs):
// - the SM backend: the copy engine's side-stream copies stalled with four concurrent ranks on
//   one GPU (issue 16; since 2026-12-06 clean at 1-4 chunks, still stalling at 8), and its
//   fused AllGather ran slower than the SM backend's at every shape measured (2 ranks, M=8192:
//   1.41 against 1.33 ms; 4 ranks, M=2048: 0.58 against 0.53);
// - GEMM+ReduceScatter / AllReduce unfused: the fused kernel reduces each chunk in one CTA and
//   lost to the local GEMM followed by the transfers (70B TP=4 15.0 against 11.7 ms). Since the
//   eleventh session (2026-12-06: chunk-major plans, transfers in pieces that idle compute CTAs
//   join) the fused ReduceScatter wins at 2 ranks and 4096 rows per rank (8B, M=8192, H100:
//   1.40-1.48 ms at 2-4 chunks against unfused 1.63-1.65, two calls) and still loses at 4 ranks
//   and 512 rows (0.714 against 0.686). Since the fourteenth session (joined CTAs wait up to
//   200 us for a peer's step) the fused AllReduce wins there too (8B, M=8192, 2 chunks, H200:
//   1.502 against 1.514 and 1.471 against 1.565 ms, two calls) and loses at 4 ranks (0.709
//   against 0.638). So fused only where it was measured to win; `ops_bench --tune` measures the
//   rest;
// - AllGather+GEMM fused from kFusedMinRowsPerRank rows per rank, where its tiles' waits hide the
//   gather on separate GPUs; below, launch and handshake costs dominate and unfused is cheaper.
Result<PathChoice> ChoosePath(const OpConfig& op, int world, int64_t m) {
  if (world < 1) return Invalid("world " + std::to_string(world) + " < 1");
  if (m <= 0 || m % world != 0) {
    return Invalid("m " + std::to_string(m) + " is not a positive multiple of the world size " +
                   std::to_string(world));
  }
  if (m > op.max_m) {
    return Invalid("m " + std::to_string(m) + " exceeds the op's max_m " +
                   std::to_string(op.max_m));
  }
  Result<std::vector<int64_t>> buckets = BucketsFor(op, world);
  if (!buckets.ok()) return buckets.status();
  PathChoice choice;
  choice.m = m;
  choice.bucket_m = *std::lower_bound(buckets->begin(), buckets->end(), m);
  choice.backend = op.backend == Backend::kAuto ? Backend::kSm : op.backend;
  const int64_t rows_per_rank = choice.bucket_m / world;
  choice.chunks = op.chunks > 0 ? op.chunks : 1;
  std::string why;
  if (const BucketPath* set = PathSetFor(op, choice.bucket_m); set != nullptr) {
    choice.fused = set->fused;
    if (set->backend != Backend::kAuto) choice.backend = set->backend;
    if (set->chunks > 0) choice.chunks = set->chunks;
    why = std::string(choice.fused ? "fused" : "unfused") + ": " +
          (set->why.empty() ? "set for this bucket (OpConfig::bucket_paths)" : set->why);
  } else {
    why = HeuristicPath(op, world, rows_per_rank, choice);
  }
  choice.tile_parts = TileParts(op, choice);
  choice.plan = PlanTemplateFor(op, choice.bucket_m);
  choice.reason = why + "; bucket M " + std::to_string(choice.bucket_m) + ", " +
                  BackendName(choice.backend) + " backend, " + std::to_string(choice.chunks) +
                  (choice.chunks == 1 ? " chunk" : " chunks") + " per shard" +
                  (choice.tile_parts ? ", tile parts" : "") + "; plan " + choice.plan;
  return choice;
}

}  // namespace syncopate::ops
