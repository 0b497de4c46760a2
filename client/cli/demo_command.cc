// `syncopate demo`: the main job, on an embedded default (no daemon). For an AllGather+GEMM over
// 4 ranks it builds the chunk plan, validates it, simulates it on host buffers, shows its
// timeline, lowers it against the GEMM's kernel spec (which tiles wait for which chunks),
// compiles the fused and the local kernel through NVRTC and the kernel cache (twice, to show the
// hit), does the same through syncopated's services embedded in this process (ranks join, agree,
// the daemon compiles, the runtime's build takes its binary), and where a GPU is present runs the
// fused kernel with the ranks as processes and checks every output element. Exit 1 when any
// step fails.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/cli/command.h"
#if SYNCOPATE_HAVE_DAEMON_STEP
#include "client/cli/demo_daemon_step.h"
#endif
#include "client/cli/flag_parser.h"
#include "client/cli/plan_flags.h"
#include "client/cli/workload_flags.h"
#include "core/plan/simulate.h"
#include "core/plan/timeline.h"
#include "core/plan/validate.h"
#include "jit/build/kernel_build.h"
#include "jit/cache/kernel_cache.h"
#include "jit/compiler/lowering.h"
#include "runtime/cuda/workloads/multiprocess.h"
#include "runtime/cuda/workloads/workloads.h"

namespace syncopate::cli {
namespace {

struct Options : KernelBuildOptions {
  bool quiet_timeline = false;
  bool help = false;
};

int Fail(const std::string& step, absl::string_view message) {
  std::fprintf(stderr, "syncopate demo: %s failed: %s\n", step.c_str(),
               absl::StrReplaceAll(message, {{"\n", "; "}}).c_str());
  return kExitFailed;
}

// How many tiles of rank 0 wait for each number of chunks, and in how many waves they run.
void PrintLoweringSummary(const jit::LoweredSchedule& lowered) {
  const jit::RankSchedule& rank0 = lowered.ranks.front();
  std::map<size_t, int> tiles_by_wait_count;
  std::map<int, int> tiles_by_wave;
  for (size_t tile = 0; tile < rank0.waits.size(); ++tile) {
    ++tiles_by_wait_count[rank0.waits[tile].size()];
    ++tiles_by_wave[rank0.tile_wave[tile]];
  }
  std::printf("  rank 0: %zu tiles;", rank0.waits.size());
  for (const auto& [waits, tiles] : tiles_by_wait_count) {
    std::printf(" %d wait for %zu chunk%s;", tiles, waits, waits == 1 ? "" : "s");
  }
  std::printf("\n  rank 0 waves (estimated arrival step: tiles):");
  for (const auto& [wave, tiles] : tiles_by_wave) std::printf(" %d:%d", wave, tiles);
  std::printf("\n  rank 0 outgoing chunks: %zu, landing guards: %zu\n", rank0.outgoing.size(),
              rank0.guards.size());
}

// Step 8: where a GPU is present, the fused kernel runs for real — `world` ranks as processes
// on the GPU(s), fresh random inputs, poisoned outputs, every element checked against an fp32
// reference GEMM — with the copy-engine and the SM backend.
int RunOnGpu(const Options& o, plan::DType dtype) {
  std::printf("== 8. run on the GPU: %d ranks as processes, checked against a reference\n",
              o.source.world);
  std::string why;
  if (!workloads::ProbeGpu(&why)) {
    std::printf("  skipped: %s\n", why.c_str());
    return kExitOk;
  }
  const bool reduce_scatter = o.workload.workload == "gemm_rs";
  if ((o.workload.workload != "ag_gemm" && !reduce_scatter) || !o.source.file.empty() ||
      o.source.split > 1 || !o.workload.spec_file.empty()) {
    std::printf(
        "  skipped: the GPU run covers the built-in ag_gemm and gemm_rs workloads with a "
        "template plan\n");
    return kExitOk;
  }
  std::vector<cuda::Backend> backends = {cuda::Backend::kSm};
  // The copy engine moves copies only; reductions need the SM backend.
  if (!reduce_scatter) backends.insert(backends.begin(), cuda::Backend::kCopyEngine);
  for (cuda::Backend backend : backends) {
    workloads::WorkloadConfig config;
    config.group_id = workloads::UniqueGroupId("demo");  // before the fork: one id for all ranks
    config.world = o.source.world;
    config.dtype = dtype;
    config.backend = backend;
    config.plan_template = o.source.template_name;
    config.chunks = o.source.chunks;
    config.m = o.workload.m;
    config.n = o.workload.n;
    config.k = o.workload.k;
    config.launches = 3;
    const std::vector<absl::Status> results =
        workloads::RunRanks(config.world, absl::Seconds(120), [&](int rank) {
          workloads::WorkloadConfig mine = config;
          mine.rank = rank;
          return reduce_scatter ? workloads::RunGemmReduceScatter(mine)
                                : workloads::RunAllGatherGemm(mine);
        });
    const char* name = backend == cuda::Backend::kSm ? "SM" : "copy engine";
    for (size_t rank = 0; rank < results.size(); ++rank) {
      if (!results[rank].ok()) {
        return Fail(absl::StrCat("the GPU run (", name, " backend, rank ", rank, ")"),
                    results[rank].message());
      }
    }
    std::printf(
        "  %s backend: %d ranks x 3 launches, every output element matches the "
        "reference\n",
        name, config.world);
  }
  return kExitOk;
}

// Steps 1-5, on the CPU: the plan, its validation and simulation, its timeline, its lowering
// against the kernel spec. kExitOk with *plan set, or the exit code after Fail said which step.
int PlanSteps(const Options& o, const Workload& w, plan::Plan* plan_out) {
  std::printf(
      "== 1. chunk plan: %s for %s (M=%lld N=%lld K=%lld, %s), %d ranks\n",
      o.source.template_name.empty() ? o.source.file.c_str() : o.source.template_name.c_str(),
      w.spec.name.c_str(), static_cast<long long>(o.workload.m),
      static_cast<long long>(o.workload.n), static_cast<long long>(o.workload.k),
      o.source.dtype.c_str(), o.source.world);
  auto plan = PlanFromFlags(o.source, w.default_shape);
  if (!plan.ok()) return Fail("building the plan", plan.status().message());
  std::printf("  %s: %d transfers, hash %.16s\n", plan->name.c_str(), plan->NumTransfers(),
              plan::PlanHash(*plan).c_str());

  std::printf("== 2. validation\n");
  if (absl::Status s = plan::ValidatePlan(*plan); !s.ok()) return Fail("validation", s.message());
  std::printf("  OK: postcondition holds, no races, dependencies form a DAG\n");

  std::printf("== 3. simulation (one thread per rank, random delays)\n");
  plan::SimulationOptions sim;
  auto report = plan::SimulatePlan(*plan, sim);
  if (!report.ok()) return Fail("simulation", report.status().message());
  std::printf("  %s\n", report->Summary().c_str());

  if (!o.quiet_timeline) {
    std::printf("== 4. timeline\n%s", plan::RenderTimeline(*plan).c_str());
  }

  std::printf("== 5. lowering against the kernel spec (%s)\n", w.kernel_name.c_str());
  if (absl::Status s = jit::CheckSpecAgainstPlan(w.spec, *plan); !s.ok()) {
    return Fail("spec check", s.message());
  }
  auto lowered = jit::Lower(*plan, w.spec);
  if (!lowered.ok()) return Fail("lowering", lowered.status().message());
  PrintLoweringSummary(*lowered);
  *plan_out = *std::move(plan);
  return kExitOk;
}

// Step 6: the fused and local kernels through NVRTC and the kernel cache, twice (the second
// time from the cache). kExitOk, or the exit code after Fail said which kernel.
int CompileSteps(const Options& o, const Workload& w, const plan::Plan& plan,
                 cache::KernelCache* kernel_cache) {
  std::printf("== 6. fused and local kernels through NVRTC (%s) and the kernel cache\n",
              o.arch.c_str());
  jit::BuildOptions build;
  build.arch = o.arch;
  build.cache = kernel_cache;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto fused = jit::BuildFusedKernel(plan, w.spec, w.kernel_source, build);
    if (!fused.ok()) return Fail("compiling the fused kernel", fused.status().message());
    auto local = jit::BuildLocalKernel(w.spec, w.kernel_source, build);
    if (!local.ok()) return Fail("compiling the local kernel", local.status().message());
    for (const auto* k : {&*fused, &*local}) {
      std::printf("  %s %s: %zu-byte %s in %.1f ms (cache: %s)\n", k == &*fused ? "fused" : "local",
                  k->generated.entry_symbol.c_str(), k->compiled->binary.size(),
                  k->compiled->is_ptx ? "PTX" : "cubin", k->elapsed_ms,
                  cache::SourceName(k->source));
    }
  }
  return kExitOk;
}

int RunDemo(const std::vector<std::string>& args) {
  Options o;
  o.source.world = 4;
  o.source.chunks = 2;
  o.workload.m = 2048;
  o.workload.n = 2048;
  o.workload.k = 1024;
  FlagParser flags("syncopate demo");
  AddPlanSourceFlags(flags, &o.source);
  AddWorkloadFlags(flags, &o.workload);
  flags.AddString("arch", &o.arch, "NVRTC target for the fused kernel");
  flags.AddString("cache-dir", &o.cache_dir, "kernel cache directory");
  flags.AddBool("quiet-timeline", &o.quiet_timeline, "skip printing the plan timeline");
  flags.AddBool("help", &o.help, "print this help");
  if (absl::Status s = flags.Parse(args, nullptr); !s.ok()) {
    std::fprintf(stderr, "syncopate demo: %s\n", std::string(s.message()).c_str());
    return kExitUsage;
  }
  if (o.help) {
    std::fputs(flags.Usage().c_str(), stdout);
    return kExitOk;
  }
  if (absl::Status s = CheckPlanSourceFlags(flags, o.source, /*allow_none=*/true); !s.ok()) {
    std::fprintf(stderr, "syncopate demo: %s\n", std::string(s.message()).c_str());
    return kExitUsage;
  }
  auto dtype = plan::ParseDType(o.source.dtype);
  if (!dtype.ok()) return Fail("--dtype", dtype.status().message());
  auto workload = WorkloadFromFlags(o.workload, *dtype);
  if (!workload.ok()) return Fail("workload", workload.status().message());
  if (o.source.template_name.empty() && o.source.file.empty()) {
    o.source.template_name = workload->default_template;
  }

  // Step 8's rank processes are forked by a child forked now: step 6's NVRTC initialises the
  // CUDA driver in this process, after which forked ranks could not use the GPU.
  auto gpu_step = workloads::DeferredChild::Fork([&] { return RunOnGpu(o, *dtype); });
  if (!gpu_step.ok()) return Fail("starting the GPU step's process", gpu_step.status().message());

  plan::Plan plan;
  if (int rc = PlanSteps(o, *workload, &plan); rc != kExitOk) return rc;
  cache::KernelCache::Options cache_options;
  cache_options.dir = o.cache_dir;
  auto kernel_cache = cache::KernelCache::Open(cache_options);
  if (!kernel_cache.ok()) return Fail("opening the kernel cache", kernel_cache.status().message());
  if (int rc = CompileSteps(o, *workload, plan, kernel_cache->get()); rc != kExitOk) return rc;

  std::printf("== 7. the same through syncopated's services (embedded: no daemon to start)\n");
#if SYNCOPATE_HAVE_DAEMON_STEP
  const std::string daemon_cache =
      (*kernel_cache)->disk() != nullptr ? (*kernel_cache)->disk()->dir() : "";
  if (absl::Status s =
          RunThroughDaemon(plan, workload->spec, workload->kernel_source, o.arch, daemon_cache);
      !s.ok()) {
    return Fail("the daemon step", s.message());
  }
#else
  std::printf("  skipped: built without the daemon (SYNCOPATE_BUILD_SERVER=OFF)\n");
#endif
  auto gpu_rc = gpu_step->Run();
  if (!gpu_rc.ok()) return Fail("the GPU step", gpu_rc.status().message());
  return *gpu_rc;
}

const SubcommandRegistration kRegistration(
    "demo", "the main job: plan, validate, simulate and compile an AllGather+GEMM for 4 ranks",
    RunDemo);

}  // namespace
}  // namespace syncopate::cli
