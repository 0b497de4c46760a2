// The wgmma GEMM autotuner; see gemm_tuner.h.
#include "runtime/gemm/gemm_tuner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "jit/build/kernel_build.h"
#include "jit/cache/disk_store.h"
#include "jit/compiler/codegen.h"
#include "jit/compiler/embedded_headers.h"
#include "runtime/cuda/kernel_loader.h"
#include "runtime/cuda/workloads/test_kernels.h"
#include "runtime/gemm/cublas_lib.h"
#include "runtime/gemm/kernel_timing.h"
#include "syncopate/launch_abi.h"

namespace syncopate::gemm {
namespace {

// Both sides round fp32 sums to 16 bits (bf16: 2^-9 relative); a reference further from cuBLAS
// than this is wrong, not rounded differently.
constexpr double kMaxCublasRelErr = 1e-2;

// One candidate's kernel, ready to launch.
struct Candidate {
  std::optional<jit::PreparedKernel> prepared;
  cuda::LoadedKernel loaded;
  unsigned grid = 0;
};

// Shared memory per block the fused kernel of configuration `c` needs: its dynamic size and the
// static reserve (the tuner's winner also runs fused, beside the comm CTAs' state).
int FusedSmemBytes(const WgmmaConfig& c) {
  return jit::GemmWgmmaSmemBytes(128, c.tile_n, c.stages) + jit::kFusedStaticSmemReserve;
}

bool Finite16(uint16_t bits, plan::DType dtype) {
  const uint16_t exponent = dtype == plan::DType::kBF16 ? 0x7f80 : 0x7c00;
  return (bits & exponent) != exponent;
}

std::string At(int64_t index, int64_t n) {
  return absl::StrCat("[", index / n, ", ", index % n, "]");
}

// ||got - want|| / ||want||.
double RelativeError(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want,
                     plan::DType dtype) {
  double e2 = 0, r2 = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double a = workloads::HalfBitsToFloat(got[i], dtype);
    const double b = workloads::HalfBitsToFloat(want[i], dtype);
    e2 += (a - b) * (a - b);
    r2 += b * b;
  }
  return r2 > 0 ? std::sqrt(e2 / r2) : std::sqrt(e2);
}

absl::Status CheckArguments(int cc, const GemmShape& s, plan::DType dtype, const TuneOptions& o) {
  if (s.m <= 0 || s.n <= 0 || s.k <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape ", s.m, "x", s.n, "x", s.k, " is not positive"));
  }
  if (dtype != plan::DType::kBF16 && dtype != plan::DType::kF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype ", plan::DTypeName(dtype), ": the wgmma kernel takes bf16 or f16"));
  }
  if (s.k % 8 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "k ", s.k, " is not a multiple of 8: SelectGemm never picks the wgmma kernel for it"));
  }
  if (o.reps < 1 || o.warmup < 0) {
    return absl::InvalidArgumentError("reps must be at least 1 and warmup not negative");
  }
  // The same rule the runtime's selection applies, so only what it would run is tuned.
  if (!SelectGemm(cc, GemmWorkload::kAllGather, s.m, s.n, s.k, dtype).wgmma) {
    return absl::FailedPreconditionError(
        absl::StrCat("the wgmma kernel needs an sm_90 GPU; this one is sm_", cc));
  }
  return absl::OkStatus();
}

// One tuning, as passes over shared state: build the candidates, set up the inputs, check every
// output against the first correct one, check that one against cuBLAS, time them all.
class TuningRun {
 public:
  TuningRun(const cuda::Context& ctx, const GemmShape& shape, plan::DType dtype,
            const TuneOptions& options)
      : ctx_(ctx), api_(ctx.api()), shape_(shape), dtype_(dtype), options_(options) {}

  TuneResult r;

  // Generates and builds every candidate; one that cannot is rejected, not fatal.
  absl::Status BuildCandidates(cache::KernelCache* cache) {
    CU_RETURN_IF_ERROR(api_.cuDeviceGetAttribute(
        &r.max_smem_bytes, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, ctx_.device()));
    const std::vector<WgmmaConfig> configs =
        options_.candidates.empty() ? WgmmaCandidates(r.max_smem_bytes, options_.full_sweep)
                                    : options_.candidates;
    if (configs.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no wgmma configuration fits in ", r.max_smem_bytes, " bytes of shared memory"));
    }
    ASSIGN_OR_RETURN(std::string_view source, jit::ExampleKernelSource("gemm_wgmma.cuh"));
    const jit::BuildOptions build = cuda::BuildOptionsFor(ctx_, cache);
    built_.resize(configs.size());
    for (size_t i = 0; i < configs.size(); ++i) {
      TunedCandidate& t = r.candidates.emplace_back(TunedCandidate{configs[i]});
      absl::StatusOr<jit::PreparedKernel> prepared = Prepare(configs[i], source, build);
      if (prepared.ok()) {
        built_[i].prepared = *std::move(prepared);
      } else {
        t.rejected = std::string(prepared.status().message());
      }
    }
    // Every candidate into the cache at once, so CompileAndLoad below hits it in memory.
    std::vector<const jit::PreparedKernel*> to_build;
    for (const Candidate& c : built_) {
      if (c.prepared) to_build.push_back(&*c.prepared);
    }
    jit::BuildInParallel(to_build, build, static_cast<int>(std::thread::hardware_concurrency()));
    for (size_t i = 0; i < built_.size(); ++i) {
      if (!built_[i].prepared) continue;
      absl::StatusOr<cuda::LoadedKernel> loaded =
          cuda::CompileAndLoad(ctx_, *built_[i].prepared, build);
      if (!loaded.ok()) {
        r.candidates[i].rejected = absl::StrCat("does not build: ", loaded.status().message());
        continue;
      }
      built_[i].loaded = *std::move(loaded);
      // A persistent grid: every tile, or as many CTAs as are resident at once.
      built_[i].grid = static_cast<unsigned>(
          std::min<int64_t>(built_[i].prepared->generated.metadata.num_tiles,
                            static_cast<int64_t>(built_[i].loaded.ctas_per_sm) * ctx_.sm_count()));
    }
    return absl::OkStatus();
  }

  // The same random inputs for everyone; one output buffer, poisoned before each check.
  absl::Status SetUpInputs() {
    const int64_t mk = shape_.m * shape_.k, nk = shape_.n * shape_.k, mn = shape_.m * shape_.n;
    ASSIGN_OR_RETURN(stream_, cuda::Stream::Create(api_));
    ASSIGN_OR_RETURN(tk_, workloads::TestKernels::Load(ctx_));
    ASSIGN_OR_RETURN(a_, cuda::DeviceBuffer::Allocate(api_, mk * 2));
    ASSIGN_OR_RETURN(b_, cuda::DeviceBuffer::Allocate(api_, nk * 2));
    ASSIGN_OR_RETURN(c_, cuda::DeviceBuffer::Allocate(api_, mn * 2));
    RETURN_IF_ERROR(tk_->Fill(a_.get(), mk, dtype_, options_.seed, stream_.get()));
    RETURN_IF_ERROR(
        tk_->Fill(b_.get(), nk, dtype_, options_.seed ^ 0x9e3779b97f4a7c15ull, stream_.get()));
    // The local kernel's ABI: operands A, B, C in spec order; no peers, signals or chunks.
    std::memset(&args_, 0, sizeof(args_));
    args_.operands[0] = reinterpret_cast<void*>(a_.get());
    args_.operands[1] = reinterpret_cast<void*>(b_.get());
    args_.operands[2] = reinterpret_cast<void*>(c_.get());
    args_.world_size = 1;
    args_.epoch = 1;
    return absl::OkStatus();
  }

  // Correctness: the first candidate with a finite output is the reference; any other output
  // must equal it bit for bit (same k order per element, whatever the tile, depth or load path).
  absl::Status CheckCandidates() {
    for (size_t i = 0; i < built_.size(); ++i) {
      TunedCandidate& t = r.candidates[i];
      if (!t.rejected.empty()) continue;
      // A fault here leaves the context unusable, so it ends the tuning, naming the candidate.
      absl::StatusOr<std::vector<uint16_t>> ran = OutputOf(built_[i]);
      if (!ran.ok()) {
        return absl::Status(ran.status().code(), absl::StrCat(WgmmaConfigName(t.config),
                                                              " failed: ", ran.status().message()));
      }
      t.rejected = Disagreement(static_cast<int>(i), *std::move(ran));
    }
    if (r.reference < 0) {
      std::string why;
      for (const TunedCandidate& t : r.candidates) {
        absl::StrAppend(&why, "; ", WgmmaConfigName(t.config), ": ", t.rejected);
      }
      return absl::FailedPreconditionError(absl::StrCat("no candidate ran correctly", why));
    }
    return absl::OkStatus();
  }

  // cuBLAS: a sanity check of the reference and, timed alongside, the ratio the table keeps.
  absl::Status CheckReferenceAgainstCublas() {
    if (!options_.cublas) {
      r.cublas_note = "cuBLAS not timed (disabled)";
      return absl::OkStatus();
    }
    absl::StatusOr<std::unique_ptr<CublasLib>> loaded = CublasLib::Open(stream_.get());
    if (!loaded.ok()) {
      r.cublas_note = absl::StrCat("cuBLAS not timed: ", loaded.status().message());
      return absl::OkStatus();
    }
    blas_ = *std::move(loaded);
    const int64_t mn = shape_.m * shape_.n;
    ASSIGN_OR_RETURN(c_blas_, cuda::DeviceBuffer::Allocate(api_, mn * 2));
    RETURN_IF_ERROR(CublasGemm());
    ASSIGN_OR_RETURN(std::vector<uint16_t> want,
                     workloads::Download16(api_, c_blas_.get(), mn, stream_.get()));
    r.cublas_rel_err = RelativeError(reference_, want, dtype_);
    if (!(*r.cublas_rel_err <= kMaxCublasRelErr)) {
      return absl::InternalError(
          absl::StrCat(WgmmaConfigName(r.candidates[r.reference].config),
                       " (the reference) disagrees with cuBLAS: relative error ", *r.cublas_rel_err,
                       " > ", kMaxCublasRelErr));
    }
    return absl::OkStatus();
  }

  // Times every candidate that passed (and cuBLAS) in alternation and picks the winner.
  absl::Status TimeCandidates() {
    std::vector<int> timed;
    std::vector<TimedRun> runs;
    for (size_t i = 0; i < built_.size(); ++i) {
      if (!r.candidates[i].rejected.empty()) continue;
      timed.push_back(static_cast<int>(i));
      runs.push_back([this, &k = built_[i]] { return Launch(k); });
    }
    if (blas_) runs.push_back([this] { return CublasGemm(); });
    ASSIGN_OR_RETURN(
        std::vector<double> ms,
        MedianMsInterleaved(api_, stream_.get(), options_.warmup, options_.reps, runs));
    std::vector<double> all_ms(r.candidates.size(), 0.0);
    for (size_t j = 0; j < timed.size(); ++j) all_ms[timed[j]] = r.candidates[timed[j]].ms = ms[j];
    int default_index = -1;
    for (size_t i = 0; i < r.candidates.size(); ++i) {
      if (r.candidates[i].config == WgmmaConfig{}) default_index = static_cast<int>(i);
    }
    r.winner = PickWinner(all_ms, default_index, options_.min_gain);
    if (blas_) r.cublas_ms = ms.back();
    return absl::OkStatus();
  }

 private:
  // The candidate's prepared kernel, or why it has none.
  absl::StatusOr<jit::PreparedKernel> Prepare(const WgmmaConfig& c, std::string_view source,
                                              const jit::BuildOptions& build) const {
    const int smem = jit::GemmWgmmaSmemBytes(128, c.tile_n, c.stages);
    if (std::string problem = WgmmaConfigProblem(c); !problem.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("not a gemm_wgmma configuration: ", problem));
    }
    if (FusedSmemBytes(c) > r.max_smem_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "needs ", smem, " bytes of shared memory (and ", jit::kFusedStaticSmemReserve,
          " static in a fused kernel), the GPU allows ", r.max_smem_bytes));
    }
    const GemmKernelChoice choice = SelectGemm(ctx_.compute_capability(), GemmWorkload::kAllGather,
                                               shape_.m, shape_.n, shape_.k, dtype_, false, &c);
    absl::StatusOr<jit::PreparedKernel> prepared =
        jit::PrepareLocalKernel(choice.spec, source, build);
    if (!prepared.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("does not generate: ", prepared.status().message()));
    }
    return prepared;
  }

  absl::Status Launch(const Candidate& k) {
    const jit::LaunchMetadata& md = k.prepared->generated.metadata;
    void* params[] = {&args_};
    CU_RETURN_IF_ERROR(api_.cuLaunchKernel(k.loaded.function, k.grid, 1, 1, md.block_dim, 1, 1,
                                           md.dynamic_smem_bytes, stream_.get(), params, nullptr));
    return absl::OkStatus();
  }

  absl::Status CublasGemm() {
    return blas_->Gemm(a_.get(), b_.get(), c_blas_.get(), shape_.m, shape_.n, shape_.k, dtype_,
                       /*out_f32=*/false, /*accumulate=*/false);
  }

  // One run into the poisoned output buffer, downloaded.
  absl::StatusOr<std::vector<uint16_t>> OutputOf(const Candidate& k) {
    const int64_t mn = shape_.m * shape_.n;
    RETURN_IF_ERROR(tk_->Poison16(c_.get(), mn, stream_.get()));
    RETURN_IF_ERROR(Launch(k));
    return workloads::Download16(api_, c_.get(), mn, stream_.get());
  }

  // Why candidate `i`'s output is rejected ("" when it is not); the first finite output becomes
  // the reference.
  std::string Disagreement(int i, std::vector<uint16_t> out) {
    const auto nonfinite =
        std::find_if(out.begin(), out.end(), [&](uint16_t v) { return !Finite16(v, dtype_); });
    if (nonfinite != out.end()) {
      return absl::StrCat("output not finite at ", At(nonfinite - out.begin(), shape_.n),
                          " (left unwritten, or overflowed)");
    }
    if (r.reference < 0) {
      r.reference = i;
      reference_ = std::move(out);
      return "";
    }
    int64_t differ = 0, first = -1;
    for (size_t e = 0; e < out.size(); ++e) {
      if (out[e] == reference_[e]) continue;
      if (differ++ == 0) first = static_cast<int64_t>(e);
    }
    if (differ == 0) return "";
    return absl::StrCat("output differs from ", WgmmaConfigName(r.candidates[r.reference].config),
                        "'s in ", differ, " elements, first at ", At(first, shape_.n));
  }

  const cuda::Context& ctx_;
  const cuda::DriverApi& api_;
  const GemmShape shape_;
  const plan::DType dtype_;
  const TuneOptions& options_;
  std::vector<Candidate> built_;
  cuda::Stream stream_;
  std::optional<workloads::TestKernels> tk_;
  cuda::DeviceBuffer a_, b_, c_, c_blas_;
  FusedLaunchArgs args_{};
  std::vector<uint16_t> reference_;
  std::unique_ptr<CublasLib> blas_;
};

}  // namespace

int PickWinner(const std::vector<double>& ms, int default_index, double min_gain) {
  int best = -1;
  for (size_t i = 0; i < ms.size(); ++i) {
    if (ms[i] > 0 && (best < 0 || ms[i] < ms[best])) best = static_cast<int>(i);
  }
  if (best < 0 || default_index < 0 || ms[default_index] <= 0 || default_index == best) {
    return best;
  }
  return ms[default_index] <= ms[best] * (1.0 + min_gain) ? default_index : best;
}

std::vector<WgmmaConfig> WgmmaCandidates(int max_smem_bytes, bool full_sweep) {
  // The untuned default first: it is the reference the others are compared with.
  std::vector<WgmmaConfig> all = {WgmmaConfig{}};
  auto add = [&](const WgmmaConfig& c) {
    if (!(c == WgmmaConfig{})) all.push_back(c);
  };
  if (!full_sweep) {
    for (const WgmmaConfig& c : {WgmmaConfig{256, 3, false}, WgmmaConfig{256, 4, false},
                                 WgmmaConfig{128, 4, false}, WgmmaConfig{128, 6, false}}) {
      add(c);
    }
  } else {
    for (bool cp_async : {false, true}) {
      for (int tile_n : {256, 128}) {
        for (int stages = 2; stages <= jit::kWgmmaMaxStages; ++stages)
          add({tile_n, stages, cp_async});
      }
    }
  }
  // Not a loop bound: the shared-memory formula need not grow with the stages (the epilogue's
  // staging tile is only added where it fits).
  std::erase_if(all, [&](const WgmmaConfig& c) { return FusedSmemBytes(c) > max_smem_bytes; });
  return all;
}

absl::StatusOr<TuneResult> TuneGemm(const cuda::Context& ctx, cache::KernelCache* cache,
                                    const GemmShape& shape, plan::DType dtype,
                                    const TuneOptions& options) {
  const int cc = ctx.compute_capability();
  RETURN_IF_ERROR(CheckArguments(cc, shape, dtype, options));
  std::string cache_dir = options.cache_dir;
  if (cache_dir.empty()) {
    ASSIGN_OR_RETURN(cache_dir, cache::DefaultCacheDir());
  }
  RETURN_IF_ERROR(ctx.MakeCurrent());
  TuningRun run(ctx, shape, dtype, options);
  run.r.key = WgmmaTuningKey(cc, shape.m, shape.n, shape.k, dtype);
  RETURN_IF_ERROR(run.BuildCandidates(cache));
  RETURN_IF_ERROR(run.SetUpInputs());
  RETURN_IF_ERROR(run.CheckCandidates());
  RETURN_IF_ERROR(run.CheckReferenceAgainstCublas());
  RETURN_IF_ERROR(run.TimeCandidates());
  const TunedCandidate& w = run.r.candidates[run.r.winner];
  tune::TunedGemm tuned{w.config.tile_n, w.config.stages, w.config.cp_async ? "cpasync" : "tma",
                        w.ms, std::nullopt};
  if (run.r.cublas_ms) tuned.vs_cublas = *run.r.cublas_ms / w.ms;
  const tune::TuningTable table(cache_dir);
  RETURN_IF_ERROR(table.Store(run.r.key, tuned));
  run.r.stored_at = table.PathFor(run.r.key);
  return std::move(run.r);
}

}  // namespace syncopate::gemm
