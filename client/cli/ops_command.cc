// `syncopate ops path`: what an op (syncopate/ops.h) would do at each of its M buckets, without a
// GPU: fused or unfused, the backend, chunks, tile parts, the chunk plan and why; with
// --cache-dir, after the op's tuning file there, as Op::Create reads it. For deciding an
// engine's buckets before a deployment, and for seeing why a run fell back.
// `syncopate ops tune`: measures every path at each bucket on this node's GPUs and writes that
// tuning file (ops/tuner/op_tuner.h), which the engine's ops then read from the same cache_dir.
//
//   syncopate ops path --kind ag|rs|ar --world W --max-m M --n N --k K [--m M]
//                      [--buckets 512,2048] [--dtype bf16|fp16] [--backend auto|ce|sm]
//                      [--path auto|fused|unfused] [--chunks C] [--tile-parts=false]
//                      [--cache-dir D --arch sm_90a]
//   syncopate ops tune --kind ag|rs|ar --world W --max-m M --n N --k K --cache-dir D
//                      [--buckets 512,2048] [--dtype bf16|fp16] [--tile-parts=false]
//                      [--backend auto|ce|sm] [--gpus G (0: every GPU seen)] [--reps R]
//                      [--rounds N]
//
// path: one line per bucket (or the one run at --m). tune: the table of each bucket's fastest
// path and every path's time, then the file written. Exit 0: done; 1: the tuning file is
// unreadable or malformed (named with its line), or no GPU, or a rank failed; 2: bad flags or a
// config the ops refuse, naming the field.
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/command.h"
#include "client/cli/flag_parser.h"
#include "ops/core/op_names.h"
#include "ops/core/op_tuning.h"
#include "ops/tuner/op_tuner.h"
#include "runtime/cuda/workloads/multiprocess.h"
#include "syncopate/ops.h"

namespace syncopate::cli {
namespace {

using ops::OpConfig;

struct Options {
  std::string kind;
  int world = 0;
  int64_t max_m = 0, n = 0, k = 0, m = 0;
  std::string buckets;
  std::string dtype = "bf16";
  std::string backend = "auto";
  std::string path = "auto";
  int chunks = 0;
  bool tile_parts = true;
  std::string cache_dir;
  std::string arch = "sm_90a";
  int gpus = 0, reps = 20, rounds = 5;  // tune
  bool help = false;
};

int Fail(int code, const std::string& message, const char* verb = "path") {
  std::fprintf(stderr, "syncopate ops %s: %s\n", verb, message.c_str());
  return code;
}

// `name` as `parse` reads it into *out; false when it names none.
template <class T, class Parse>
bool Parsed(Parse parse, const std::string& name, T* out) {
  const std::optional<T> value = parse(name);
  if (value) *out = *value;
  return value.has_value();
}

// The config the flags describe; "" or the usage error naming the flag.
std::string ConfigFromFlags(const Options& o, OpConfig& c) {
  if (!Parsed(ops::OpKindFromName, o.kind, &c.kind)) {
    return "--kind: ag, rs or ar (or the op's full name)";
  }
  if (!Parsed(ops::DTypeFromName, o.dtype, &c.dtype)) return "--dtype: bf16 or fp16";
  if (!Parsed(ops::BackendFromName, o.backend, &c.backend)) return "--backend: auto, ce or sm";
  if (!Parsed(ops::PathPreferenceFromName, o.path, &c.path)) {
    return "--path: auto, fused or unfused";
  }
  c.max_m = o.max_m;
  c.n = o.n;
  c.k = o.k;
  c.chunks = o.chunks;
  c.tile_parts = o.tile_parts;
  c.cache_dir = o.cache_dir;
  absl::StatusOr<std::vector<int64_t>> buckets = ParseInt64List(o.buckets, "--buckets");
  if (!buckets.ok()) return std::string(buckets.status().message());
  c.m_buckets = *std::move(buckets);
  return "";
}

// The flags both verbs read: the op's shape and options.
void AddOpFlags(FlagParser& flags, Options& o) {
  flags.AddString("kind", &o.kind, "ag, rs or ar (required)");
  flags.AddInt("world", &o.world, "ranks in the group (required)");
  flags.AddInt64("max-m", &o.max_m, "the op's max_m, a multiple of the world size (required)");
  flags.AddInt64("n", &o.n, "C's columns per rank (required)");
  flags.AddInt64("k", &o.k, "the reduction dimension per rank (required)");
  flags.AddString("buckets", &o.buckets,
                  "M buckets, comma-separated (default: max_m and quarters)");
  flags.AddString("dtype", &o.dtype, "bf16 or fp16");
  flags.AddBool("tile-parts", &o.tile_parts,
                "a fused ReduceScatter moves tile parts (--tile-parts=false: whole chunks)");
}

// The steps both verbs take after adding their flags: parse `args`, print the help, check the
// positional verb and the required flags, then read the op's config from the flags and check it
// as Create would. Returns the exit code to end with, or nullopt with `config` filled.
std::optional<int> ParseOpConfig(FlagParser& flags, const Options& o,
                                 const std::vector<std::string>& args, const char* verb,
                                 const std::string& usage,
                                 std::initializer_list<const char*> also_required,
                                 OpConfig& config) {
  std::vector<std::string> positional;
  if (absl::Status s = flags.Parse(args, &positional); !s.ok()) {
    return Fail(kExitUsage, std::string(s.message()), verb);
  }
  if (o.help) {
    std::fputs(flags.Usage().c_str(), stdout);
    return kExitOk;
  }
  if (positional.size() != 1 || positional[0] != verb) return Fail(kExitUsage, usage, verb);
  std::vector<const char*> required = {"kind", "world", "max-m", "n", "k"};
  required.insert(required.end(), also_required);
  for (const char* name : required) {
    if (!flags.WasSet(name))
      return Fail(kExitUsage, absl::StrCat("--", name, " is required"), verb);
  }
  if (std::string bad = ConfigFromFlags(o, config); !bad.empty()) {
    return Fail(kExitUsage, bad, verb);
  }
  ops::GroupConfig group;
  group.job = "cli";
  group.world = o.world;
  if (syncopate::Status s = ops::CheckConfig(group, config); !s.ok()) {
    return Fail(kExitUsage, s.message(), verb);
  }
  return std::nullopt;
}

void PrintRow(const ops::PathChoice& p) {
  std::printf("%-8lld %-8lld %-8s %-7s %-6d %-10s %-22s %s\n", static_cast<long long>(p.m),
              static_cast<long long>(p.bucket_m), p.fused ? "fused" : "unfused",
              ops::BackendName(p.backend), p.chunks, p.tile_parts ? "yes" : "no", p.plan.c_str(),
              p.reason.c_str());
}

int RunPath(const std::vector<std::string>& args) {
  Options o;
  FlagParser flags("syncopate ops path");
  AddOpFlags(flags, o);
  flags.AddInt64("m", &o.m, "one run's M: print only its path (default: every bucket's)");
  flags.AddString("backend", &o.backend, "auto, ce or sm");
  flags.AddString("path", &o.path, "auto, fused or unfused");
  flags.AddInt("chunks", &o.chunks, "chunks per shard, 1..8 (0: the heuristic's)");
  flags.AddString("cache-dir", &o.cache_dir,
                  "the op's cache_dir: its tuning file's measured paths apply, as in Create");
  flags.AddString("arch", &o.arch, "the GPU the tuning file was measured on (with --cache-dir)");
  flags.AddBool("help", &o.help, "print this help");
  OpConfig config;
  if (std::optional<int> done = ParseOpConfig(
          flags, o, args, "path",
          "usage: syncopate ops path|tune --kind ... (see syncopate ops path|tune --help)", {},
          config)) {
    return *done;
  }

  std::string tuning = "none (no --cache-dir): the heuristic's paths";
  if (!o.cache_dir.empty()) {
    const ops::OpTuningKey key = ops::OpTuningKeyFor(config, o.world, o.arch);
    const std::string file = ops::OpTuningPath(o.cache_dir, key);
    absl::StatusOr<std::vector<ops::MeasuredBucket>> measured =
        ops::LookupOpTuning(o.cache_dir, key);
    if (!measured.ok()) return Fail(kExitFailed, std::string(measured.status().message()));
    tuning =
        absl::StrCat(file, " (", measured->size(), " measured buckets)",
                     config.path == ops::PathPreference::kAuto ? "" : ", not used: --path is set");
    config = ops::WithMeasuredPaths(config, o.world, *measured, file);
  }
  // Every row first, so an M the op refuses is the only output.
  std::vector<int64_t> ms;
  if (flags.WasSet("m")) {
    ms.push_back(o.m);
  } else {
    syncopate::Result<std::vector<int64_t>> buckets = ops::BucketsFor(config, o.world);
    if (!buckets.ok()) return Fail(kExitUsage, buckets.status().message());
    ms = *buckets;
  }
  std::vector<ops::PathChoice> rows;
  for (int64_t m : ms) {
    syncopate::Result<ops::PathChoice> p = ops::ChoosePath(config, o.world, m);
    if (!p.ok()) return Fail(kExitUsage, p.status().message());
    rows.push_back(*p);
  }

  std::printf("%s, world %d, max_m %lld, n %lld, k %lld, %s\ntuning: %s\n",
              ops::OpKindName(config.kind), o.world, static_cast<long long>(config.max_m),
              static_cast<long long>(config.n), static_cast<long long>(config.k), o.dtype.c_str(),
              tuning.c_str());
  std::printf("%-8s %-8s %-8s %-7s %-6s %-10s %-22s %s\n", "m", "bucket", "path", "backend",
              "chunks", "tile-parts", "plan", "why");
  for (const ops::PathChoice& p : rows) PrintRow(p);
  return kExitOk;
}

int RunTune(const std::vector<std::string>& args) {
  Options o;
  FlagParser flags("syncopate ops tune");
  AddOpFlags(flags, o);
  flags.AddString("cache-dir", &o.cache_dir,
                  "the engine's OpConfig::cache_dir: the table is written to its tuning/ "
                  "(required)");
  flags.AddString("backend", &o.backend,
                  "auto, ce or sm: time only the paths on this backend (as the engine's ops ask)");
  flags.AddInt("gpus", &o.gpus,
               "rank r runs on GPU r % gpus (0: every GPU the ranks see; 1: all on GPU 0, "
               "for ranks as MPS clients of one GPU)");
  flags.AddInt("reps", &o.reps, "runs per path and round");
  flags.AddInt("rounds", &o.rounds, "rounds per bucket, each timing every path (medians)");
  flags.AddBool("help", &o.help, "print this help");
  ops::OpTuneOptions tune;
  if (std::optional<int> done =
          ParseOpConfig(flags, o, args, "tune", "usage: syncopate ops tune --kind ... (see --help)",
                        {"cache-dir"}, tune.config)) {
    return *done;
  }
  tune.world = o.world;
  tune.gpus = o.gpus;
  tune.reps = o.reps;
  tune.rounds = o.rounds;
  tune.job = workloads::UniqueGroupId("ops_tune");
  syncopate::Result<std::vector<int64_t>> buckets = ops::BucketsFor(tune.config, o.world);
  if (!buckets.ok()) return Fail(kExitUsage, buckets.status().message(), "tune");
  tune.ms = *buckets;
  if (absl::Status s = ops::CheckTuneOptions(tune); !s.ok()) {
    return Fail(kExitUsage, std::string(s.message()), "tune");
  }
  // In a child: this process forks the ranks, which must initialise CUDA themselves.
  std::string why;
  if (!workloads::ProbeGpu(&why)) return Fail(kExitFailed, "needs a GPU: " + why, "tune");
  std::printf("%s, world %d, max_m %lld, n %lld, k %lld, %s; buckets %s\n",
              ops::OpKindName(tune.config.kind), o.world, static_cast<long long>(tune.config.max_m),
              static_cast<long long>(tune.config.n), static_cast<long long>(tune.config.k),
              o.dtype.c_str(), absl::StrJoin(tune.ms, ",").c_str());
  std::fflush(stdout);
  absl::StatusOr<ops::OpTuneResult> result = ops::TuneOp(tune);
  if (!result.ok()) return Fail(kExitFailed, std::string(result.status().message()), "tune");
  ops::PrintTuneTable(tune, *result, stdout);
  return kExitOk;
}

int RunOps(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "tune") return RunTune(args);
  return RunPath(args);
}

const SubcommandRegistration kRegistration(
    "ops",
    "ops path: each M bucket's path (fused or not, backend, plan, why), no GPU needed; "
    "ops tune: measure them on this node's GPUs for the ops' cache_dir",
    RunOps);

}  // namespace
}  // namespace syncopate::cli
