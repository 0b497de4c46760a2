// Flags, model shapes and problems of syncopate_tp_bench; see tp_config.h.
#include "bench/multigpu/tp_config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/flags.h"
#include "core/base/status_macros.h"

namespace syncopate::tp_bench {

const char* WorkloadName(Workload w) {
  switch (w) {
    case Workload::kAllGatherGemm:
      return "ag";
    case Workload::kGemmReduceScatter:
      return "rs";
    case Workload::kGemmAllReduce:
      return "ar";
  }
  return "?";
}

absl::StatusOr<Workload> ParseWorkload(const std::string& name) {
  if (name == "ag") return Workload::kAllGatherGemm;
  if (name == "rs") return Workload::kGemmReduceScatter;
  if (name == "ar") return Workload::kGemmAllReduce;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown workload '", name, "' (want ag, rs or ar)"));
}

const std::vector<ModelShape>& KnownModels() {
  static const auto* models = new std::vector<ModelShape>{
      {"llama3.1-8b", 4096, 14336},
      {"llama3.1-70b", 8192, 28672},
      {"qwen2-72b", 8192, 29568},
      {"llama3.1-405b", 16384, 53248},
  };
  return *models;
}

uint64_t Problem::seed() const {
  // Small products only, so baselines.py reproduces it with plain integers.
  return static_cast<uint64_t>(tokens) * 1000003ull + static_cast<uint64_t>(n) * 1009ull +
         static_cast<uint64_t>(k) * 17ull + static_cast<uint64_t>(workload);
}

std::string Problem::Label() const {
  return absl::StrFormat("%s %s M=%d TP=%d (%dx%dx%d)", WorkloadName(workload), model, tokens,
                         world, m, n, k);
}

namespace {

// What flags set before ParseFlags turns it into BenchFlags' types.
struct RawFlags {
  std::vector<std::string> workloads = {"ag", "rs", "ar"};
  std::string ce_copies = "dma";
  bool no_check = false;
};

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const ModelShape& s : KnownModels()) names.push_back(s.name);
  return names;
}

// Every flag of syncopate_tp_bench, writing into `f` and `raw`, in the order Usage() lists them.
void DeclareFlags(FlagSet& s, BenchFlags* f, RawFlags* raw) {
  s.Int("gpus", &f->gpus, "GPUs to use (rank r runs on GPU r / ranks-per-gpu)", 1, 64);
  s.Int("ranks-per-gpu", &f->ranks_per_gpu,
        "ranks sharing one GPU (single-GPU dry run: --gpus 1 --ranks-per-gpu 2)", 1, 16)
      .Metavar("R");
  s.IntList("tp", &f->tp, "world sizes to run, each <= gpus * ranks-per-gpu", 1, 64)
      .Metavar("LIST")
      .DefaultText("gpus * ranks-per-gpu");
  s.StringList("workloads", &raw->workloads,
               "ag (AllGather+GEMM), rs (GEMM+ReduceScatter), ar (GEMM+AllReduce)",
               {"ag", "rs", "ar"});
  s.StringList("models", &f->models, "model shapes", ModelNames())
      .Metavar("LIST")
      .DefaultText("all: " + absl::StrJoin(ModelNames(), ","));
  s.IntList("tokens", &f->tokens, "M values", 1, 1 << 20).Metavar("LIST");
  s.IntList("chunks", &f->chunks, "chunks per shard", 1, 64).Metavar("LIST");
  s.StringList("backends", &f->backends, "ce (copy engine), sm (communication CTAs)", {"ce", "sm"});
  s.Choice("gemm", &f->gemm, {"auto", "mma"},
           "auto: the project's GEMM for the GPU (wgmma on sm_90), mma: mma.sync");
  s.String("ag-plan", &f->ag_plan, "plan template of ag").Metavar("NAME");
  s.String("rs-plan", &f->rs_plan, "plan template of rs").Metavar("NAME");
  s.String("ar-plan", &f->ar_plan, "plan template of ar").Metavar("NAME");
  s.Int("warmup", &f->warmup, "per measured config", 0, 1000);
  s.Int("reps", &f->reps, "per measured config (median of reps; max over ranks)", 1, 100000);
  s.Int("timeout-ms", &f->timeout_ms, "device-side wait deadline", 1, 600000);
  s.Int("ce-free-ctas", &f->ce_free_ctas,
        "copy engine: CTA slots the fused kernel leaves for the driver's copies\n"
        "(cuda::DefaultCopyEngineFreeCtas says why)",
        0, 100000)
      .DefaultText("-1: default");
  s.Int("transfers-compute-ctas", &f->transfers_compute_ctas,
        "compute CTAs of the comm-only and unfused rows' transfer kernels\n"
        "(their tile CTAs only wait for chunks)",
        0, 100000)
      .DefaultText("0: the runtime's default");
  s.Choice("ce-copies", &raw->ce_copies, {"dma", "driver"},
           "copy engine: copies ask the driver for the copy engines (dma) or\n"
           "take its default, which may run them as kernels on the SMs");
  s.IntList("comm-ctas", &f->comm_ctas,
            "SM backend: comm CTA counts for the fused rows (0: the default)", 0, 1024)
      .Metavar("LIST");
  s.IntList("grid-pct", &f->grid_pct,
            "grid as % of the SMs a rank sees, local-gemm and fused SM rows", 1, 100)
      .Metavar("LIST");
  s.String("trace", &f->trace_dir,
           "after each fused row, one launch's per-CTA timeline to DIR/*.csv")
      .Metavar("DIR");
  s.StringList("tile-dealing", &f->tile_dealing,
               "static, dynamic: how the fused rows deal tiles to CTAs", {"static", "dynamic"})
      .Metavar("LIST");
  s.Bool("push-tiles", &f->push_tiles,
         "fused GEMMs move their outgoing chunks a tile at a time where exact\n"
         "(a ReduceScatter's reductions; jit KernelSpec::push_tiles)");
  s.Bool("no-check", &raw->no_check, "skip the correctness checks (not for reported numbers)");
  s.String("csv", &f->csv, "results (appended; header written when the file is new)")
      .Metavar("PATH");
  s.String("cache-dir", &f->cache_dir, "kernel cache shared by the ranks").Metavar("DIR");
  s.Int("run-timeout-s", &f->run_timeout_s, "per world size; ranks still running then are killed",
        1, 86400);
  s.Bool("list", &f->list, "print the problems and exit (no GPU needed)");
  s.Bool("plan-only", &f->plan_only,
         "build every plan and generate every kernel's source; no GPU needed");
  s.Bool("nvrtc", &f->plan_only_nvrtc, "with --plan-only: also compile each kernel with NVRTC");
  s.String("fill-cache", &f->fill_cache_dir,
           "implies --plan-only --nvrtc: build every kernel and its local variant through\n"
           "this kernel cache, keyed as the ranks key them (a --cache-dir for a later GPU\n"
           "run), instead of timing cold compiles")
      .Metavar("DIR");
  s.Repeated("nvrtc-option", &f->nvrtc_options,
             "with --nvrtc: one more NVRTC option (repeatable), e.g. --time=- (phase times); each "
             "kernel's NVRTC log is printed")
      .Metavar("OPT");
  s.String("arch", &f->arch, "with --plan-only: the GPU to generate and compile for")
      .Metavar("sm_NN");
}

constexpr char kAbout[] =
    R"(Fused AllGather+GEMM / GEMM+ReduceScatter / GEMM+AllReduce across ranks of one node (one
forked process per rank), against the local GEMM alone and the plan's communication alone, with
every output checked against an fp32 reference.)";

}  // namespace

std::string Usage() {
  BenchFlags f;
  RawFlags raw;
  FlagSet flags("syncopate_tp_bench", kAbout);
  DeclareFlags(flags, &f, &raw);
  return flags.Usage();
}

absl::StatusOr<BenchFlags> ParseFlags(int argc, char** argv) {
  BenchFlags f;
  RawFlags raw;
  FlagSet flags("syncopate_tp_bench", kAbout);
  DeclareFlags(flags, &f, &raw);
  RETURN_IF_ERROR(flags.Parse(argc, argv));
  f.help = flags.help();
  f.workloads.clear();
  for (const std::string& w : raw.workloads) {
    ASSIGN_OR_RETURN(Workload x, ParseWorkload(w));
    f.workloads.push_back(x);
  }
  f.ce_prefer_dma = raw.ce_copies == "dma";
  if (raw.no_check) f.check = false;
  if (!f.fill_cache_dir.empty()) f.plan_only_nvrtc = true;
  if (f.plan_only_nvrtc) f.plan_only = true;
  return f;
}

absl::StatusOr<std::vector<int>> WorldSizes(const BenchFlags& flags) {
  const int slots = flags.gpus * flags.ranks_per_gpu;
  std::vector<int> worlds = flags.tp.empty() ? std::vector<int>{slots} : flags.tp;
  for (int w : worlds) {
    if (w > slots) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tp ", w, " needs ", w, " ranks but --gpus ", flags.gpus, " x --ranks-per-gpu ",
          flags.ranks_per_gpu, " gives ", slots));
    }
  }
  return worlds;
}

std::vector<Problem> ProblemsFor(const BenchFlags& flags, int world,
                                 std::vector<std::string>* skipped) {
  std::vector<Problem> out;
  for (Workload w : flags.workloads) {
    for (const ModelShape& model : KnownModels()) {
      if (!flags.models.empty() &&
          std::find(flags.models.begin(), flags.models.end(), model.name) == flags.models.end()) {
        continue;
      }
      for (int64_t tokens : flags.tokens) {
        Problem p;
        p.workload = w;
        p.model = model.name;
        p.tokens = tokens;
        p.world = world;
        p.m = tokens;
        if (w == Workload::kAllGatherGemm) {
          p.n = model.ffn / world;
          p.k = model.hidden;
        } else {
          p.n = model.hidden;
          p.k = model.ffn / world;
        }
        // Equal shards keep the baselines (NCCL's *_into_tensor / *_tensor collectives need them)
        // and this program on the same data.
        if (model.ffn % world != 0 || tokens % world != 0) {
          if (skipped != nullptr) {
            skipped->push_back(absl::StrCat(p.Label(), ": FFN ", model.ffn, " or M ", tokens,
                                            " does not split into ", world, " equal shards"));
          }
          continue;
        }
        out.push_back(p);
      }
    }
  }
  return out;
}

}  // namespace syncopate::tp_bench
