// Flags, model shapes and problems of syncopate_tp_bench; see tp_config.h.
#include "bench/multigpu/tp_config.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/base/status_macros.h"

namespace syncopate::tp_bench {
namespace {

absl::StatusOr<int64_t> ParseInt(const std::string& flag, const std::string& v, int64_t lo,
                                 int64_t hi) {
  int64_t x = 0;
  if (!absl::SimpleAtoi(v, &x) || x < lo || x > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", v, ": want an integer in [", lo, ", ", hi, "]"));
  }
  return x;
}

template <class T>
absl::StatusOr<std::vector<T>> ParseIntList(const std::string& flag, const std::string& v,
                                            int64_t lo, int64_t hi) {
  std::vector<T> out;
  for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipEmpty())) {
    ASSIGN_OR_RETURN(int64_t x, ParseInt(flag, std::string(part), lo, hi));
    out.push_back(static_cast<T>(x));
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  return out;
}

std::vector<std::string> ParseNameList(const std::string& v) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipEmpty())) {
    out.emplace_back(part);
  }
  return out;
}

// A comma-separated list of `flag` whose every entry is one of `allowed`, at least one.
absl::StatusOr<std::vector<std::string>> ParseChoiceList(const std::string& flag,
                                                         const std::string& what,
                                                         const std::string& value,
                                                         const std::vector<std::string>& allowed) {
  std::vector<std::string> out = ParseNameList(value);
  for (const std::string& x : out) {
    if (std::find(allowed.begin(), allowed.end(), x) == allowed.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown ", what, " '", x, "' (want ",
                                                     absl::StrJoin(allowed, ", "), ")"));
    }
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  return out;
}

}  // namespace

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

std::string Usage() {
  return R"(syncopate_tp_bench: fused AllGather+GEMM / GEMM+ReduceScatter / GEMM+AllReduce across
ranks of one node (one forked process per rank), against the local GEMM alone and the plan's
communication alone, with every output checked against an fp32 reference.

  --gpus N              GPUs to use (rank r runs on GPU r / ranks-per-gpu)          [1]
  --ranks-per-gpu R     ranks sharing one GPU (single-GPU dry run: --gpus 1 --ranks-per-gpu 2)
  --tp LIST             world sizes to run, each <= gpus * ranks-per-gpu   [gpus * ranks-per-gpu]
  --workloads LIST      ag,rs,ar                                                    [ag,rs,ar]
  --models LIST         llama3.1-8b,llama3.1-70b,qwen2-72b,llama3.1-405b                 [all]
  --tokens LIST         M values                                           [8192,2048,1024]
  --chunks LIST         chunks per shard                                             [1,2,4,8]
  --backends LIST       ce (copy engine), sm (communication CTAs)                      [ce,sm]
  --gemm auto|mma       auto: the project's GEMM for the GPU (wgmma on sm_90), mma: mma.sync [auto]
  --ag-plan/--rs-plan/--ar-plan NAME   plan templates   [allgather.push, reducescatter.direct,
                                                                              allreduce.rs_ag]
  --warmup N --reps N   per measured config (median of reps; max over ranks)          [3, 10]
  --timeout-ms N        device-side wait deadline                                     [10000]
  --ce-free-ctas N      copy engine: CTA slots the fused kernel leaves for the driver's copies
                        (cuda::DefaultCopyEngineFreeCtas says why)              [-1: default]
  --ce-copies dma|driver  copy engine: copies ask the driver for the copy engines (dma) or
                        take its default, which may run them as kernels on the SMs    [dma]
  --comm-ctas LIST      SM backend: comm CTA counts for the fused rows (0: the default) [0]
  --grid-pct LIST       grid as % of the SMs a rank sees, local-gemm and fused SM rows  [100]
  --trace DIR           after each fused row, one launch's per-CTA timeline to DIR/*.csv
  --tile-dealing LIST   static, dynamic: how the fused rows deal tiles to CTAs       [dynamic]
  --no-check            skip the correctness checks (not for reported numbers)
  --csv PATH            results (appended; header written when the file is new) [tp_bench.csv]
  --cache-dir DIR       kernel cache shared by the ranks     [/tmp/syncopate-tp-bench-cache]
  --run-timeout-s N     per world size; ranks still running then are killed            [3000]
  --list                print the problems and exit (no GPU needed)
  --plan-only           build every plan and generate every kernel's source; no GPU needed
  --nvrtc               with --plan-only: also compile each kernel with NVRTC
  --arch sm_NN          with --plan-only: the GPU to generate and compile for            [sm_90]
)";
}

absl::StatusOr<BenchFlags> ParseFlags(int argc, char** argv) {
  BenchFlags f;
  const std::set<std::string> kBoolFlags = {"list", "plan-only", "nvrtc", "no-check", "help"};
  const std::set<std::string> kValueFlags = {
      "gpus",    "ranks-per-gpu", "tp",         "workloads", "models",       "tokens",
      "chunks",  "backends",      "ag-plan",    "rs-plan",   "ar-plan",      "warmup",
      "reps",    "timeout-ms",    "run-timeout-s", "csv",   "cache-dir",    "arch",
      "gemm",    "ce-free-ctas",  "ce-copies", "comm-ctas",    "grid-pct",  "trace",  "tile-dealing"};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    std::string name = arg.substr(2), value;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (!kBoolFlags.count(name) && !kValueFlags.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (eq == std::string::npos && kValueFlags.count(name)) {
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      value = argv[++i];
    }
    if (name == "help") {
      f.help = true;
    } else if (name == "list") {
      f.list = true;
    } else if (name == "plan-only") {
      f.plan_only = true;
    } else if (name == "nvrtc") {
      f.plan_only_nvrtc = true;
    } else if (name == "no-check") {
      f.check = false;
    } else if (name == "gpus") {
      ASSIGN_OR_RETURN(int64_t v, ParseInt(name, value, 1, 64));
      f.gpus = static_cast<int>(v);
    } else if (name == "ranks-per-gpu") {
      ASSIGN_OR_RETURN(int64_t v, ParseInt(name, value, 1, 16));
      f.ranks_per_gpu = static_cast<int>(v);
    } else if (name == "tp") {
      ASSIGN_OR_RETURN(f.tp, ParseIntList<int>(name, value, 1, 64));
    } else if (name == "workloads") {
      f.workloads.clear();
      for (const std::string& w : ParseNameList(value)) {
        ASSIGN_OR_RETURN(Workload x, ParseWorkload(w));
        f.workloads.push_back(x);
      }
      if (f.workloads.empty()) return absl::InvalidArgumentError("--workloads is empty");
    } else if (name == "models") {
      f.models = ParseNameList(value);
      for (const std::string& m : f.models) {
        const auto& known = KnownModels();
        if (std::none_of(known.begin(), known.end(), [&](const ModelShape& s) { return s.name == m; })) {
          std::vector<std::string> names;
          for (const ModelShape& s : known) names.push_back(s.name);
          return absl::InvalidArgumentError(absl::StrCat("unknown model '", m, "' (known: ",
                                                         absl::StrJoin(names, ", "), ")"));
        }
      }
    } else if (name == "tokens") {
      ASSIGN_OR_RETURN(f.tokens, ParseIntList<int64_t>(name, value, 1, 1 << 20));
    } else if (name == "chunks") {
      ASSIGN_OR_RETURN(f.chunks, ParseIntList<int>(name, value, 1, 64));
    } else if (name == "backends") {
      ASSIGN_OR_RETURN(f.backends, ParseChoiceList(name, "backend", value, {"ce", "sm"}));
    } else if (name == "ag-plan") {
      f.ag_plan = value;
    } else if (name == "rs-plan") {
      f.rs_plan = value;
    } else if (name == "ar-plan") {
      f.ar_plan = value;
    } else if (name == "warmup") {
      ASSIGN_OR_RETURN(int64_t v, ParseInt(name, value, 0, 1000));
      f.warmup = static_cast<int>(v);
    } else if (name == "reps") {
      ASSIGN_OR_RETURN(int64_t v, ParseInt(name, value, 1, 100000));
      f.reps = static_cast<int>(v);
    } else if (name == "timeout-ms") {
      ASSIGN_OR_RETURN(int64_t v, ParseInt(name, value, 1, 600000));
      f.timeout_ms = static_cast<int>(v);
    } else if (name == "ce-free-ctas") {
      ASSIGN_OR_RETURN(int64_t v, ParseInt(name, value, 0, 100000));
      f.ce_free_ctas = static_cast<int>(v);
    } else if (name == "ce-copies") {
      if (value != "dma" && value != "driver") {
        return absl::InvalidArgumentError(
            absl::StrCat("--ce-copies: '", value, "' is neither dma nor driver"));
      }
      f.ce_prefer_dma = value == "dma";
    } else if (name == "comm-ctas") {
      ASSIGN_OR_RETURN(f.comm_ctas, ParseIntList<int>(name, value, 0, 1024));
    } else if (name == "tile-dealing") {
      ASSIGN_OR_RETURN(f.tile_dealing,
                       ParseChoiceList(name, "tile dealing", value, {"static", "dynamic"}));
    } else if (name == "trace") {
      f.trace_dir = value;
    } else if (name == "grid-pct") {
      ASSIGN_OR_RETURN(f.grid_pct, ParseIntList<int>(name, value, 1, 100));
    } else if (name == "run-timeout-s") {
      ASSIGN_OR_RETURN(int64_t v, ParseInt(name, value, 1, 86400));
      f.run_timeout_s = static_cast<int>(v);
    } else if (name == "csv") {
      f.csv = value;
    } else if (name == "cache-dir") {
      f.cache_dir = value;
    } else if (name == "arch") {
      f.arch = value;
    } else if (name == "gemm") {
      if (value != "auto" && value != "mma") {
        return absl::InvalidArgumentError(absl::StrCat("--gemm=", value, ": want auto or mma"));
      }
      f.gemm = value;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
  }
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
