// `syncopate ops path`: what an op (syncopate/ops.h) would do at each of its M buckets, without a
// GPU: fused or unfused, the backend, chunks, tile parts, the chunk plan and why; with
// --cache-dir, after the op's tuning file there (`ops_bench --tune`), as Op::Create reads it.
// For deciding an engine's buckets before a deployment, and for seeing why a run fell back.
//
//   syncopate ops path --kind ag|rs|ar --world W --max-m M --n N --k K [--m M]
//                      [--buckets 512,2048] [--dtype bf16|fp16] [--backend auto|ce|sm]
//                      [--path auto|fused|unfused] [--chunks C] [--tile-parts=false]
//                      [--cache-dir D --arch sm_90a]
//
// One line per bucket (or the one run at --m). Exit 0: printed; 1: the tuning file is
// unreadable or malformed (named with its line); 2: bad flags or a config the ops refuse, naming
// the field.
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cli/command.h"
#include "client/cli/flag_parser.h"
#include "ops/core/op_names.h"
#include "ops/core/op_tuning.h"
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
  bool help = false;
};

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "syncopate ops path: %s\n", message.c_str());
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

void PrintRow(const ops::PathChoice& p) {
  std::printf("%-8lld %-8lld %-8s %-7s %-6d %-10s %-22s %s\n", static_cast<long long>(p.m),
              static_cast<long long>(p.bucket_m), p.fused ? "fused" : "unfused",
              ops::BackendName(p.backend), p.chunks, p.tile_parts ? "yes" : "no", p.plan.c_str(),
              p.reason.c_str());
}

int RunPath(const std::vector<std::string>& args) {
  Options o;
  FlagParser flags("syncopate ops path");
  flags.AddString("kind", &o.kind, "ag, rs or ar (required)");
  flags.AddInt("world", &o.world, "ranks in the group (required)");
  flags.AddInt64("max-m", &o.max_m, "the op's max_m, a multiple of the world size (required)");
  flags.AddInt64("n", &o.n, "C's columns per rank (required)");
  flags.AddInt64("k", &o.k, "the reduction dimension per rank (required)");
  flags.AddInt64("m", &o.m, "one run's M: print only its path (default: every bucket's)");
  flags.AddString("buckets", &o.buckets,
                  "M buckets, comma-separated (default: max_m and quarters)");
  flags.AddString("dtype", &o.dtype, "bf16 or fp16");
  flags.AddString("backend", &o.backend, "auto, ce or sm");
  flags.AddString("path", &o.path, "auto, fused or unfused");
  flags.AddInt("chunks", &o.chunks, "chunks per shard, 1..8 (0: the heuristic's)");
  flags.AddBool("tile-parts", &o.tile_parts,
                "a fused ReduceScatter moves tile parts (--tile-parts=false: whole chunks)");
  flags.AddString("cache-dir", &o.cache_dir,
                  "the op's cache_dir: its tuning file's measured paths apply, as in Create");
  flags.AddString("arch", &o.arch, "the GPU the tuning file was measured on (with --cache-dir)");
  flags.AddBool("help", &o.help, "print this help");
  std::vector<std::string> positional;
  if (absl::Status s = flags.Parse(args, &positional); !s.ok()) {
    return Fail(kExitUsage, std::string(s.message()));
  }
  if (o.help) {
    std::fputs(flags.Usage().c_str(), stdout);
    return kExitOk;
  }
  if (positional.size() != 1 || positional[0] != "path") {
    return Fail(kExitUsage, "usage: syncopate ops path --kind ... (see --help)");
  }
  for (const char* name : {"kind", "world", "max-m", "n", "k"}) {
    if (!flags.WasSet(name)) return Fail(kExitUsage, absl::StrCat("--", name, " is required"));
  }
  OpConfig config;
  if (std::string bad = ConfigFromFlags(o, config); !bad.empty()) return Fail(kExitUsage, bad);
  ops::GroupConfig group;
  group.job = "cli";
  group.world = o.world;
  if (syncopate::Status s = ops::CheckConfig(group, config); !s.ok()) {
    return Fail(kExitUsage, s.message());
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

const SubcommandRegistration kRegistration(
    "ops", "ops path: each M bucket's path (fused or not, backend, plan, why), no GPU needed",
    RunPath);

}  // namespace
}  // namespace syncopate::cli
