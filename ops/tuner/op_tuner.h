// Measures an op's paths per M bucket on this node and stores each bucket's fastest in the op
// tuning table (ops/core/op_tuning.h) that Op::Create reads when its cache_dir is the table's.
// For `syncopate ops tune` and `ops_bench --tune`: the engine's shapes, measured once per GPU
// model and deployment, no rebuild.
//
// The ranks are forked processes (rank r on GPU r % gpus; several ranks on one GPU stand in for
// a node's GPUs only as MPS clients, README "Concurrent ranks on one GPU"). Every path's op is
// created first; per M,
// each of `rounds` rounds times every path for `reps` runs, in an order that rotates by round,
// and a path's figure is the median of its rounds. Timed one whole path after the other, the
// first path ran on a GPU fresh from idle and won where it should not have (bench/RESULTS.md,
// twenty-fifth session). A path counts at its slowest rank: a collective op ends when its last
// rank does. The parent never touches CUDA (the ranks could not initialise it after the fork).
// Thread-compatible; call from the program's main thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ops/core/op_tuning.h"
#include "syncopate/ops.h"

namespace syncopate::ops {

struct OpTuneOptions {
  // The op as the engine creates it: kind, max_m, n, k, dtype, tile_parts, and cache_dir, where
  // the table is stored (required). A backend other than auto keeps the paths to that backend
  // (Create skips a measured path of another backend than the caller's). path, chunks and
  // m_buckets are set per path here.
  OpConfig config;
  int world = 2;
  int gpus = 0;             // rank r runs on GPU r % gpus; 0: r % the GPUs the rank sees
  std::vector<int64_t> ms;  // the Ms timed, each its own bucket, ascending or not
  int reps = 20;            // runs per path and round
  int rounds = 5;
  std::string job = "op_tune";  // the ranks' group id prefix (unique per call)
  absl::Duration timeout = absl::Minutes(9);
};

struct OpTuneResult {
  std::vector<TuningCandidate> candidates;      // the paths timed, the unfused one first
  std::vector<std::vector<double>> slowest_ms;  // [candidate][M index], at the slowest rank
  std::vector<MeasuredBucket> best;             // per M, as stored
  std::string stored;                           // the table's path
};

// The paths timed for `kind`: unfused; fused on the SM backend at 1 and 2 chunks; fused on the
// copy engine for AllGather. With `backend` named, only the unfused path and the fused ones on
// that backend.
std::vector<TuningCandidate> TuneCandidates(OpKind kind, Backend backend = Backend::kAuto);

// The op config that runs path `c` at every M of `o` (each M a bucket with that path).
OpConfig ConfigForCandidate(const OpTuneOptions& o, const TuningCandidate& c);

// "fused sm x2" and the like.
std::string CandidateName(const TuningCandidate& c);

// InvalidArgument naming the option when the options cannot be tuned (no cache_dir, no M, an M
// the op refuses, world, gpus, reps, rounds or timeout out of range, a job name too long for the
// paths' groups), before anything is forked.
absl::Status CheckTuneOptions(const OpTuneOptions& o);

// Times every path on every rank and stores the table. Failed ranks come back named, each with
// its error (a rank that failed first often leaves its peers only a timeout); nothing is stored
// then.
absl::StatusOr<OpTuneResult> TuneOp(const OpTuneOptions& o);

// The result as a table: each M's fastest path, its time and the unfused one's, then every
// path's figure.
void PrintTuneTable(const OpTuneOptions& o, const OpTuneResult& r, std::FILE* out);

}  // namespace syncopate::ops
