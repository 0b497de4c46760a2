// The wgmma GEMM autotuner behind `syncopate tune`: for one (shape, dtype) on this GPU it compiles
// each candidate WgmmaConfig as a local (identity-schedule) kernel through the kernel cache, runs
// each once on the same random inputs and rejects any whose output is not bitwise equal to the
// first good candidate's, times the rest in alternation (MedianMsInterleaved, optionally with
// cuBLAS for the ratio), and stores the fastest in the tuning table (jit/tune/tuning_table.h),
// where FindTunedWgmma (gemm_kernels.h) finds it for SelectGemm.
// Thread-safety: one TuneGemm per context at a time (it owns the GPU while it times).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/plan.h"
#include "jit/cache/kernel_cache.h"
#include "jit/tune/tuning_table.h"
#include "runtime/cuda/handles.h"
#include "runtime/gemm/gemm_kernels.h"

namespace syncopate::gemm {

struct GemmShape {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
};

struct TuneOptions {
  std::string cache_dir;  // tuning table location; "": cache::DefaultCacheDir()
  int warmup = 3;
  int reps = 20;
  // Every tile_n x stages x loads that fits in shared memory; else the default subset.
  bool full_sweep = false;
  // Non-empty: exactly these, in this order (candidates[0] is then the reference).
  std::vector<WgmmaConfig> candidates;
  bool cublas = true;  // also time cuBLAS (libcublas.so.13, dlopen'ed) for the stored ratio
  // A candidate replaces the untuned default only when faster by more than this fraction: run
  // to run, the H200's clocks move medians by ~1-3% (bench/RESULTS.md), and a winner inside
  // that noise is a coin toss that the next process would pay for on every launch.
  double min_gain = 0.02;
  uint64_t seed = 0x7a3e;
};

struct TunedCandidate {
  WgmmaConfig config;
  double ms = 0;         // median time; 0 when not timed (rejected)
  std::string rejected;  // why it cannot win ("" when it can): does not build, wrong output
};

struct TuneResult {
  tune::TuningKey key;
  int max_smem_bytes = 0;  // the device's opt-in shared memory per block, bounding the sweep
  std::vector<TunedCandidate> candidates;  // in the order tried
  int reference = -1;                      // the candidate every other output was compared with
  int winner = -1;                         // the fastest candidate not rejected
  std::optional<double> cublas_ms;
  std::optional<double> cublas_rel_err;  // ||reference - cuBLAS|| / ||cuBLAS||
  std::string cublas_note;               // why cuBLAS was not timed
  std::string stored_at;                 // the tuning-table file written
};

// The index of the winner among candidates with median times `ms` (<= 0: not timed): the
// fastest, unless the default (index `default_index`, -1 if absent) is within `min_gain` of it.
int PickWinner(const std::vector<double>& ms, int default_index, double min_gain);

// The candidates TuneGemm tries unless told otherwise, in order, all within `max_smem_bytes`
// (jit::GemmWgmmaSmemBytes, plus jit::kFusedStaticSmemReserve: the winner also runs fused), the
// untuned default WgmmaConfig{} first (the reference): by default
// 256x{3,4} and 128x{4,6} with TMA; full_sweep: tile_n {256, 128} x stages 2.. x {tma, cpasync}.
std::vector<WgmmaConfig> WgmmaCandidates(int max_smem_bytes, bool full_sweep);

// Tunes C[m, n] = A[m, k] B[n, k]^T for `dtype` (bf16 or f16) on `ctx`'s GPU, which must be
// sm_90 (FailedPrecondition otherwise); k % 8 == 0 (InvalidArgument otherwise). `cache` may be
// null (every candidate compiles every time). Fails when no candidate builds and gives a finite
// output, or when the reference disagrees with cuBLAS; a single bad candidate is only rejected.
absl::StatusOr<TuneResult> TuneGemm(const cuda::Context& ctx, cache::KernelCache* cache,
                                    const GemmShape& shape, plan::DType dtype,
                                    const TuneOptions& options);

}  // namespace syncopate::gemm
