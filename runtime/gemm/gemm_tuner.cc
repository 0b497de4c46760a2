// The wgmma GEMM autotuner; see gemm_tuner.h.
#include "runtime/gemm/gemm_tuner.h"

#include <algorithm>
#include <atomic>
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

// Compiles every candidate into `cache` on parallel threads (NVRTC compiles of different
// programs run concurrently; the cache is thread-safe), so the CompileAndLoad that follows each
// one hits in memory. Errors are left for CompileAndLoad to report.
void CompileInParallel(const jit::BuildOptions& options, const std::vector<Candidate>& candidates) {
  std::vector<const jit::PreparedKernel*> to_build;
  for (const Candidate& c : candidates) {
    if (c.prepared) to_build.push_back(&*c.prepared);
  }
  if (options.cache == nullptr || to_build.size() < 2) return;
  std::atomic<size_t> next{0};
  const size_t workers =
      std::min<size_t>(to_build.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < to_build.size(); i = next++) {
        (void)jit::BuildKernel(*to_build[i], options);
      }
    });
  }
  for (std::thread& t : threads) t.join();
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
  std::erase_if(all, [&](const WgmmaConfig& c) {
    return jit::GemmWgmmaSmemBytes(128, c.tile_n, c.stages) > max_smem_bytes;
  });
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
  const cuda::DriverApi& api = ctx.api();
  TuneResult r;
  r.key = WgmmaTuningKey(cc, shape.m, shape.n, shape.k, dtype);
  CU_RETURN_IF_ERROR(api.cuDeviceGetAttribute(
      &r.max_smem_bytes, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, ctx.device()));
  const std::vector<WgmmaConfig> configs =
      options.candidates.empty() ? WgmmaCandidates(r.max_smem_bytes, options.full_sweep)
                                 : options.candidates;
  if (configs.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("no wgmma configuration fits in ",
                                                      r.max_smem_bytes, " bytes of shared memory"));
  }

  // Generate and build every candidate; one that cannot is rejected, not fatal.
  ASSIGN_OR_RETURN(std::string_view source, jit::ExampleKernelSource("gemm_wgmma.cuh"));
  const jit::BuildOptions build = cuda::BuildOptionsFor(ctx, cache);
  std::vector<Candidate> built(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    const WgmmaConfig& c = configs[i];
    TunedCandidate& t = r.candidates.emplace_back(TunedCandidate{c});
    const int smem = jit::GemmWgmmaSmemBytes(128, c.tile_n, c.stages);
    if (std::string problem = WgmmaConfigProblem(c); !problem.empty()) {
      t.rejected = absl::StrCat("not a gemm_wgmma configuration: ", problem);
    } else if (smem > r.max_smem_bytes) {
      t.rejected = absl::StrCat("needs ", smem, " bytes of shared memory, the GPU allows ",
                                r.max_smem_bytes);
    } else {
      const GemmKernelChoice choice =
          SelectGemm(cc, GemmWorkload::kAllGather, shape.m, shape.n, shape.k, dtype, false, &c);
      absl::StatusOr<jit::PreparedKernel> prepared =
          jit::PrepareLocalKernel(choice.spec, source, build);
      if (prepared.ok()) {
        built[i].prepared = *std::move(prepared);
      } else {
        t.rejected = absl::StrCat("does not generate: ", prepared.status().message());
      }
    }
  }
  CompileInParallel(build, built);
  for (size_t i = 0; i < built.size(); ++i) {
    if (!built[i].prepared) continue;
    absl::StatusOr<cuda::LoadedKernel> loaded =
        cuda::CompileAndLoad(ctx, *built[i].prepared, build);
    if (!loaded.ok()) {
      r.candidates[i].rejected = absl::StrCat("does not build: ", loaded.status().message());
      continue;
    }
    built[i].loaded = *std::move(loaded);
    // A persistent grid: every tile, or as many CTAs as are resident at once.
    built[i].grid = static_cast<unsigned>(
        std::min<int64_t>(built[i].prepared->generated.metadata.num_tiles,
                          static_cast<int64_t>(built[i].loaded.ctas_per_sm) * ctx.sm_count()));
  }

  // The same random inputs for everyone; one output buffer, poisoned before each check.
  const int64_t mk = shape.m * shape.k, nk = shape.n * shape.k, mn = shape.m * shape.n;
  ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create(api));
  const CUstream s = stream.get();
  ASSIGN_OR_RETURN(workloads::TestKernels tk, workloads::TestKernels::Load(ctx));
  ASSIGN_OR_RETURN(cuda::DeviceBuffer a, cuda::DeviceBuffer::Allocate(api, mk * 2));
  ASSIGN_OR_RETURN(cuda::DeviceBuffer b, cuda::DeviceBuffer::Allocate(api, nk * 2));
  ASSIGN_OR_RETURN(cuda::DeviceBuffer c, cuda::DeviceBuffer::Allocate(api, mn * 2));
  RETURN_IF_ERROR(tk.Fill(a.get(), mk, dtype, options.seed, s));
  RETURN_IF_ERROR(tk.Fill(b.get(), nk, dtype, options.seed ^ 0x9e3779b97f4a7c15ull, s));
  // The local kernel's ABI: operands A, B, C in spec order; no peers, signals or chunks.
  FusedLaunchArgs args;
  std::memset(&args, 0, sizeof(args));
  args.operands[0] = reinterpret_cast<void*>(a.get());
  args.operands[1] = reinterpret_cast<void*>(b.get());
  args.operands[2] = reinterpret_cast<void*>(c.get());
  args.world_size = 1;
  args.epoch = 1;
  auto launch = [&](const Candidate& k) -> absl::Status {
    const jit::LaunchMetadata& md = k.prepared->generated.metadata;
    void* params[] = {&args};
    CU_RETURN_IF_ERROR(api.cuLaunchKernel(k.loaded.function, k.grid, 1, 1, md.block_dim, 1, 1,
                                          md.dynamic_smem_bytes, s, params, nullptr));
    return absl::OkStatus();
  };

  // One run into the poisoned output buffer, downloaded.
  auto output_of = [&](const Candidate& k) -> absl::StatusOr<std::vector<uint16_t>> {
    RETURN_IF_ERROR(tk.Poison16(c.get(), mn, s));
    RETURN_IF_ERROR(launch(k));
    return workloads::Download16(api, c.get(), mn, s);
  };

  // Correctness: the first candidate with a finite output is the reference; any other output
  // must equal it bit for bit (same k order per element, whatever the tile, depth or load path).
  std::vector<uint16_t> reference;
  for (size_t i = 0; i < built.size(); ++i) {
    TunedCandidate& t = r.candidates[i];
    if (!t.rejected.empty()) continue;
    // A fault here leaves the context unusable, so it ends the tuning, naming the candidate.
    absl::StatusOr<std::vector<uint16_t>> ran = output_of(built[i]);
    if (!ran.ok()) {
      return absl::Status(ran.status().code(), absl::StrCat(WgmmaConfigName(t.config),
                                                            " failed: ", ran.status().message()));
    }
    std::vector<uint16_t> out = *std::move(ran);
    const auto nonfinite =
        std::find_if(out.begin(), out.end(), [&](uint16_t v) { return !Finite16(v, dtype); });
    if (nonfinite != out.end()) {
      t.rejected = absl::StrCat("output not finite at ", At(nonfinite - out.begin(), shape.n),
                                " (left unwritten, or overflowed)");
      continue;
    }
    if (r.reference < 0) {
      r.reference = static_cast<int>(i);
      reference = std::move(out);
      continue;
    }
    int64_t differ = 0, first = -1;
    for (int64_t e = 0; e < mn; ++e) {
      if (out[e] == reference[e]) continue;
      if (differ++ == 0) first = e;
    }
    if (differ > 0) {
      t.rejected =
          absl::StrCat("output differs from ", WgmmaConfigName(r.candidates[r.reference].config),
                       "'s in ", differ, " elements, first at ", At(first, shape.n));
    }
  }
  if (r.reference < 0) {
    std::string why;
    for (const TunedCandidate& t : r.candidates) {
      absl::StrAppend(&why, "; ", WgmmaConfigName(t.config), ": ", t.rejected);
    }
    return absl::FailedPreconditionError(absl::StrCat("no candidate ran correctly", why));
  }

  // cuBLAS: a sanity check of the reference and, timed alongside, the ratio the table keeps.
  std::unique_ptr<CublasLib> blas;
  cuda::DeviceBuffer c_blas;
  if (!options.cublas) {
    r.cublas_note = "cuBLAS not timed (disabled)";
  } else if (absl::StatusOr<std::unique_ptr<CublasLib>> loaded = CublasLib::Open(s); !loaded.ok()) {
    r.cublas_note = absl::StrCat("cuBLAS not timed: ", loaded.status().message());
  } else {
    blas = *std::move(loaded);
    ASSIGN_OR_RETURN(c_blas, cuda::DeviceBuffer::Allocate(api, mn * 2));
    RETURN_IF_ERROR(blas->Gemm(a.get(), b.get(), c_blas.get(), shape.m, shape.n, shape.k, dtype,
                               /*out_f32=*/false, /*accumulate=*/false));
    ASSIGN_OR_RETURN(std::vector<uint16_t> want, workloads::Download16(api, c_blas.get(), mn, s));
    r.cublas_rel_err = RelativeError(reference, want, dtype);
    if (!(*r.cublas_rel_err <= kMaxCublasRelErr)) {
      return absl::InternalError(
          absl::StrCat(WgmmaConfigName(r.candidates[r.reference].config),
                       " (the reference) disagrees with cuBLAS: relative error ", *r.cublas_rel_err,
                       " > ", kMaxCublasRelErr));
    }
  }

  // Time every candidate that passed (and cuBLAS) in alternation.
  std::vector<int> timed;
  std::vector<TimedRun> runs;
  for (size_t i = 0; i < built.size(); ++i) {
    if (!r.candidates[i].rejected.empty()) continue;
    timed.push_back(static_cast<int>(i));
    runs.push_back([&launch, &k = built[i]] { return launch(k); });
  }
  if (blas) {
    runs.push_back([&] {
      return blas->Gemm(a.get(), b.get(), c_blas.get(), shape.m, shape.n, shape.k, dtype, false,
                        false);
    });
  }
  ASSIGN_OR_RETURN(std::vector<double> ms,
                   MedianMsInterleaved(api, s, options.warmup, options.reps, runs));
  std::vector<double> all_ms(r.candidates.size(), 0.0);
  for (size_t j = 0; j < timed.size(); ++j) all_ms[timed[j]] = r.candidates[timed[j]].ms = ms[j];
  int default_index = -1;
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    if (r.candidates[i].config == WgmmaConfig{}) default_index = static_cast<int>(i);
  }
  r.winner = PickWinner(all_ms, default_index, options.min_gain);
  if (blas) r.cublas_ms = ms.back();

  const TunedCandidate& w = r.candidates[r.winner];
  tune::TunedGemm tuned{w.config.tile_n, w.config.stages, w.config.cp_async ? "cpasync" : "tma",
                        w.ms, std::nullopt};
  if (r.cublas_ms) tuned.vs_cublas = *r.cublas_ms / w.ms;
  const tune::TuningTable table(cache_dir);
  RETURN_IF_ERROR(table.Store(r.key, tuned));
  r.stored_at = table.PathFor(r.key);
  return r;
}

}  // namespace syncopate::gemm
