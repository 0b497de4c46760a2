// Measured per-bucket paths of an op, persisted next to the kernel cache's GEMM tuning table:
// <cache dir>/tuning/op.<kind>.<arch>.<dtype>.w<world>.<n>x<k>[.parts][.<plan>].tune, written by
// the op tuner (ops/tuner/op_tuner.h: `syncopate ops tune`, `ops_bench --tune`) and read by
// Op::Create (when OpConfig::path is kAuto), which turns each entry into an
// OpConfig::bucket_paths entry for the buckets the caller did not set. Every rank of a node reads
// the same file, so the ranks agree. No CUDA.
//
// File format, one line per measured bucket ('#' comments allowed):
//   format 1
//   bucket <M> fused|unfused ce|sm <chunks> <ms> <unfused ms>
// Lookup is strict: a malformed line is an error naming the file and the line.
//
// Thread-safety: every function is safe from any thread and process; Store writes a temp file and
// renames it over the entry.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "syncopate/ops.h"

namespace syncopate::ops {

struct OpTuningKey {
  OpKind kind = OpKind::kAllGatherMatmul;
  std::string arch;  // NVRTC target, e.g. "sm_90a"
  DType dtype = DType::kBF16;
  int world = 1;
  int64_t n = 0, k = 0;
  // A ReduceScatter measured with tile parts (OpConfig::tile_parts): its fused variants ran with
  // them, so its table is apart from one measured with whole chunks (".parts" in the file name).
  bool tile_parts = false;
  // An AllReduce measured with SYNCOPATE_OPS_ALLREDUCE_PLAN set (one plan for every bucket): its
  // table is apart from the default plans' ("." and the plan in the file name); "" otherwise.
  std::string plan_knob;
};

// The key of `config`'s op at `world` ranks on an `arch` GPU; tile_parts and plan_knob only where
// they apply.
OpTuningKey OpTuningKeyFor(const OpConfig& config, int world, std::string arch);

struct MeasuredBucket {
  int64_t bucket_m = 0;
  bool fused = false;
  Backend backend = Backend::kSm;
  int chunks = 1;
  double ms = 0;          // the winner's time per run
  double unfused_ms = 0;  // the unfused path's, for the reason line
  friend bool operator==(const MeasuredBucket&, const MeasuredBucket&) = default;
};

// One path the op tuner times: fused or not, backend, chunks per shard.
struct TuningCandidate {
  bool fused = false;
  Backend backend = Backend::kSm;
  int chunks = 1;
};

// Each bucket's fastest candidate from every rank's times, ms_by_rank[rank][candidate][bucket
// index]. A candidate's time at a bucket is its slowest rank's: a collective op ends when its
// last rank does, and judged by one rank's times the choice would follow that rank's share of
// the GPU. candidates[0] must be the unfused path (each entry's unfused_ms). InvalidArgument
// naming the rank, candidate or bucket whose times are missing or not positive.
absl::StatusOr<std::vector<MeasuredBucket>> FastestPerBucket(
    const std::vector<int64_t>& buckets, const std::vector<TuningCandidate>& candidates,
    const std::vector<std::vector<std::vector<double>>>& ms_by_rank);

// [candidate][bucket index]: each candidate's time at its slowest rank, from times of the shape
// FastestPerBucket accepted.
std::vector<std::vector<double>> SlowestRankMs(
    const std::vector<std::vector<std::vector<double>>>& ms_by_rank);

// One rank's figures as the op tuner's ranks hand them to the process that chooses:
// "arch <target>" when `arch` is not empty, then "times <candidate> <ms per bucket>..." per
// candidate (ms[candidate][bucket index]).
std::string FormatRankTimes(const std::string& arch, const std::vector<std::vector<double>>& ms);

// The reverse: `ms` gets `candidates` rows, `arch` the target if the text names one. DataLoss
// naming the line for anything else, a candidate out of range or a bad number.
absl::Status ParseRankTimes(const std::string& text, size_t candidates,
                            std::vector<std::vector<double>>* ms, std::string* arch);

// <cache_dir>/tuning/op.<...>.tune.
std::string OpTuningPath(const std::string& cache_dir, const OpTuningKey& key);

// Replaces the key's file. InvalidArgument for an entry that could not be read back.
absl::Status StoreOpTuning(const std::string& cache_dir, const OpTuningKey& key,
                           const std::vector<MeasuredBucket>& buckets);

// The key's entries; empty when there is no file; DataLoss naming the file and line when the file
// is malformed.
absl::StatusOr<std::vector<MeasuredBucket>> LookupOpTuning(const std::string& cache_dir,
                                                           const OpTuningKey& key);

// `config` with a bucket_paths entry for each measured bucket that is one of its buckets and has
// none yet (the caller's entries win), on the caller's backend where it named one; unchanged
// unless config.path is kAuto.
OpConfig WithMeasuredPaths(const OpConfig& config, int world,
                           const std::vector<MeasuredBucket>& measured, const std::string& source);

}  // namespace syncopate::ops
