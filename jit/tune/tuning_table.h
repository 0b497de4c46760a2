// Tuned GEMM configurations, persisted next to the kernel cache: <cache dir>/tuning/, one small
// human-readable file per key, so `syncopate tune` runs once per (kernel, GPU arch, dtype, shape)
// and every later process picks the winner up. No CUDA: the table only stores what a tuner
// measured (runtime/gemm/gemm_tuner.h) and answers lookups (runtime/gemm/gemm_kernels.h).
//
// File <family>.<arch>.<dtype>.<M>x<N>x<K>.tune, "key value" lines ('#' comments allowed):
//   format 1
//   family gemm_wgmma
//   arch sm_90a
//   dtype bf16
//   m 8192
//   n 8192
//   k 8192
//   tile_n 256
//   stages 4
//   loads tma            tma | cpasync
//   ms 1.2345            the winner's median time
//   vs_cublas 0.98       optional: cuBLAS ms / winner ms (> 1: faster than cuBLAS)
// Lookup is strict: an unknown, duplicated, missing or unparsable line, or a key that does not
// match the file's name, is an error naming the file and the line; a bad file is never used.
//
// Thread-safety: every method is const and safe from any thread and any process. Store writes a
// temp file in the same directory and renames it over the entry, so readers see a whole old or a
// whole new file; with concurrent writers of one key the last rename wins.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/plan/plan.h"

namespace syncopate::tune {

struct TuningKey {
  std::string family;  // the kernel, e.g. "gemm_wgmma"; [A-Za-z0-9_]+
  std::string arch;    // NVRTC target, e.g. "sm_90a"; [A-Za-z0-9_]+
  plan::DType dtype = plan::DType::kBF16;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
};

struct TunedGemm {
  int tile_n = 0;
  int stages = 0;
  std::string loads = "tma";        // "tma" or "cpasync"
  double ms = 0;                    // median milliseconds of the winner when it was tuned
  std::optional<double> vs_cublas;  // cuBLAS ms / ms, when cuBLAS was timed
  friend bool operator==(const TunedGemm&, const TunedGemm&) = default;
};

class TuningTable {
 public:
  // `cache_dir` is the kernel cache's directory (resolved by the caller, e.g. with
  // cache::DefaultCacheDir()); nothing is created until the first Store.
  explicit TuningTable(const std::string& cache_dir);

  // Creates <cache_dir>/tuning/ if needed and replaces the key's file atomically.
  // InvalidArgument for a key or value that could not be read back.
  absl::Status Store(const TuningKey& key, const TunedGemm& value) const;

  // NotFound when the key has no file; DataLoss naming the file and line when it is malformed.
  absl::StatusOr<TunedGemm> Lookup(const TuningKey& key) const;

  std::string PathFor(const TuningKey& key) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;  // <cache_dir>/tuning
};

}  // namespace syncopate::tune
