// `syncopate tune`: autotunes the Hopper GEMM kernel (gemm_wgmma.cuh) for one shape on this GPU
// and stores the winner in the tuning table next to the kernel cache, where the runtime's kernel
// selection (FindTunedWgmma + SelectGemm, runtime/gemm/gemm_kernels.h) finds it.
//
//   syncopate tune --m 8192 --n 8192 --k 8192 [--dtype bf16|f16] [--cache-dir D] [--reps R]
//                  [--full] [--cublas=false] [--min-gain-pct 2]
//
// One line per candidate (tile and stages, load path, median ms, TFLOP/s, time relative to the
// winner, or why it was rejected), then cuBLAS and the winner with where it was stored.
// Exit 0: a winner was stored; 1: no GPU or the tuning failed; 2: bad flags.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "client/cli/command.h"
#include "client/cli/flag_parser.h"
#include "jit/cache/kernel_cache.h"
#include "runtime/cuda/driver.h"
#include "runtime/gemm/gemm_tuner.h"

namespace syncopate::cli {
namespace {

struct Options {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  std::string dtype = "bf16";
  std::string cache_dir;
  int reps = 20;
  bool full = false;
  bool cublas = true;
  int min_gain_pct = 2;
  bool help = false;
};

int Fail(int code, absl::string_view message) {
  std::fprintf(stderr, "syncopate tune: %s\n",
               absl::StrReplaceAll(message, {{"\n", "; "}}).c_str());
  return code;
}

void PrintResult(const gemm::TuneResult& r, const gemm::GemmShape& shape) {
  const double flop = 2.0 * shape.m * shape.n * shape.k;
  const double best = r.candidates[r.winner].ms;
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const gemm::TunedCandidate& c = r.candidates[i];
    const std::string name = gemm::WgmmaConfigName(c.config);
    if (!c.rejected.empty()) {
      std::printf("  %-20s rejected: %s\n", name.c_str(), c.rejected.c_str());
      continue;
    }
    std::printf("  %-20s %9.4f ms %7.1f TFLOP/s  time/winner %.3f%s\n", name.c_str(), c.ms,
                flop / (c.ms * 1e9), c.ms / best,
                static_cast<int>(i) == r.winner ? "  <- winner" : "");
  }
  if (r.cublas_ms) {
    std::printf(
        "  %-20s %9.4f ms %7.1f TFLOP/s  time/winner %.3f  (reference vs cuBLAS: "
        "relative error %.2e)\n",
        "cuBLAS", *r.cublas_ms, flop / (*r.cublas_ms * 1e9), *r.cublas_ms / best,
        *r.cublas_rel_err);
  } else {
    std::printf("  %s\n", r.cublas_note.c_str());
  }
  int fastest = r.winner;
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const double ms = r.candidates[i].ms;
    if (r.candidates[i].rejected.empty() && ms > 0 && ms < r.candidates[fastest].ms) {
      fastest = static_cast<int>(i);
    }
  }
  if (fastest != r.winner) {
    std::printf("kept the default: %s was only %.1f%% faster, within run-to-run noise\n",
                gemm::WgmmaConfigName(r.candidates[fastest].config).c_str(),
                (best / r.candidates[fastest].ms - 1) * 100);
  }
  std::printf(
      "winner %s: %.4f ms%s\nstored %s\n",
      gemm::WgmmaConfigName(r.candidates[r.winner].config).c_str(), best,
      r.cublas_ms ? absl::StrFormat(", %.3fx cuBLAS throughput", *r.cublas_ms / best).c_str() : "",
      r.stored_at.c_str());
}

int RunTune(const std::vector<std::string>& args) {
  Options o;
  FlagParser flags("syncopate tune");
  flags.AddInt64("m", &o.m, "rows of A and C (required)");
  flags.AddInt64("n", &o.n, "rows of B, columns of C (required)");
  flags.AddInt64("k", &o.k, "columns of A and B, a multiple of 8 (required)");
  flags.AddString("dtype", &o.dtype, "bf16 or f16");
  flags.AddString("cache-dir", &o.cache_dir,
                  "kernel cache directory; the winner goes to its tuning/ (default: "
                  "$SYNCOPATE_CACHE_DIR or ~/.cache/syncopate)");
  flags.AddInt("reps", &o.reps, "timed rounds per candidate (medians)");
  flags.AddBool("full", &o.full,
                "every tile_n x stages x load path that fits in shared memory, not the "
                "default four");
  flags.AddInt("min-gain-pct", &o.min_gain_pct,
               "a candidate replaces the default only if faster by more than this many percent");
  flags.AddBool("cublas", &o.cublas, "also time cuBLAS for the ratio (--cublas=false: skip)");
  flags.AddBool("help", &o.help, "print this help");
  if (absl::Status s = flags.Parse(args, nullptr); !s.ok()) return Fail(kExitUsage, s.message());
  if (o.help) {
    std::fputs(flags.Usage().c_str(), stdout);
    return kExitOk;
  }
  for (const char* name : {"m", "n", "k"}) {
    if (!flags.WasSet(name)) return Fail(kExitUsage, absl::StrCat("--", name, " is required"));
  }
  if (o.m <= 0 || o.n <= 0 || o.k <= 0) return Fail(kExitUsage, "--m, --n, --k must be positive");
  if (o.k % 8 != 0) {
    return Fail(kExitUsage, "--k must be a multiple of 8 (other k never run the wgmma kernel)");
  }
  if (o.dtype != "bf16" && o.dtype != "f16") return Fail(kExitUsage, "--dtype: bf16 or f16");
  if (o.reps < 1) return Fail(kExitUsage, "--reps must be at least 1");
  if (o.min_gain_pct < 0 || o.min_gain_pct > 50) {
    return Fail(kExitUsage, "--min-gain-pct must be in [0, 50]");
  }
  const plan::DType dtype = o.dtype == "bf16" ? plan::DType::kBF16 : plan::DType::kF16;

  // The kernel cache first: a bad --cache-dir is found before the GPU is touched.
  cache::KernelCache::Options cache_options;
  cache_options.dir = o.cache_dir;
  absl::StatusOr<std::unique_ptr<cache::KernelCache>> kernel_cache =
      cache::KernelCache::Open(cache_options);
  if (!kernel_cache.ok()) {
    // A --cache-dir given wrongly is bad usage; an unusable default directory is a failure.
    return Fail(flags.WasSet("cache-dir") ? kExitUsage : kExitFailed,
                kernel_cache.status().message());
  }

  std::string why;
  if (!cuda::GpuAvailable(&why)) return Fail(kExitFailed, absl::StrCat("needs a GPU: ", why));
  absl::StatusOr<cuda::Context> ctx = cuda::Context::Retain(0);
  if (!ctx.ok()) return Fail(kExitFailed, absl::StrCat("needs a GPU: ", ctx.status().message()));
  char device[128] = {};
  ctx->api().cuDeviceGetName(device, sizeof(device), ctx->device());
  const gemm::GemmShape shape{o.m, o.n, o.k};
  std::printf("tuning gemm_wgmma %s M=%ld N=%ld K=%ld on %s (sm_%d, %d SMs), %d reps\n",
              o.dtype.c_str(), o.m, o.n, o.k, device, ctx->compute_capability(), ctx->sm_count(),
              o.reps);
  std::fflush(stdout);

  gemm::TuneOptions options;
  options.cache_dir = o.cache_dir;
  options.reps = o.reps;
  options.full_sweep = o.full;
  options.cublas = o.cublas;
  options.min_gain = o.min_gain_pct / 100.0;
  absl::StatusOr<gemm::TuneResult> result =
      gemm::TuneGemm(*ctx, kernel_cache->get(), shape, dtype, options);
  if (!result.ok()) {
    return Fail(kExitFailed, absl::StrCat("tuning failed: ", result.status().message()));
  }
  PrintResult(*result, shape);
  return kExitOk;
}

const SubcommandRegistration kRegistration(
    "tune", "autotune the Hopper GEMM for one shape; the winner is cached for the runtime",
    RunTune);

}  // namespace
}  // namespace syncopate::cli
