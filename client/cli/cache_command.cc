// `syncopate cache ls|stat|gc|key`: inspect and trim the on-disk kernel cache, and explain how a
// key is formed (which part changed when a kernel unexpectedly recompiles).
//
//   syncopate cache ls   [--dir D]                     entries, most recently used first
//   syncopate cache stat [--dir D]                     totals
//   syncopate cache gc   [--dir D] [--max-bytes N]     evict least recently used down to N
//                                                      (suffixes K, M, G; default 4G)
//   syncopate cache key  --source FILE [--arch A] [--plan-hash H] [--option OPT]...
//                        [--header NAME=FILE]... [--nvrtc-version V] [--explain]
//
// --dir defaults to $SYNCOPATE_CACHE_DIR, $XDG_CACHE_HOME/syncopate, ~/.cache/syncopate.
// Exit codes (command.h): 0 ok, 1 the operation failed, 2 bad usage (one line on stderr).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/command.h"
#include "core/base/flags.h"
#include "core/base/status_macros.h"
#include "jit/cache/cache_key.h"
#include "jit/cache/disk_store.h"
#include "jit/cache/kernel_cache.h"
#include "jit/nvrtc/nvrtc_compiler.h"

namespace syncopate::cli {
namespace {

constexpr char kUsage[] =
    "usage: syncopate cache ls|stat [--dir D]\n"
    "       syncopate cache gc [--dir D] [--max-bytes N[K|M|G]]\n"
    "       syncopate cache key --source FILE [--arch sm_90] [--plan-hash H] [--option OPT]...\n"
    "                           [--header NAME=FILE]... [--nvrtc-version V] [--explain]\n";

// Flags as parsed: repeated flags keep every value in order; boolean flags map to "".
struct Flags {
  std::map<std::string, std::vector<std::string>> values;

  std::optional<std::string> Get(const std::string& name) const {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second.back();
  }
  std::vector<std::string> All(const std::string& name) const {
    auto it = values.find(name);
    return it == values.end() ? std::vector<std::string>{} : it->second;
  }
};

int Usage(const std::string& error) {
  std::fprintf(stderr, "syncopate cache: %s\n", error.c_str());
  return kExitUsage;
}

int Fail(const absl::Status& status) {
  // One line: newlines in a status message (compile logs) would break scripts reading stderr.
  std::string message(status.message());
  for (char& c : message) {
    if (c == '\n') c = ' ';
  }
  std::fprintf(stderr, "syncopate cache: %s\n", message.c_str());
  return kExitFailed;
}

// Parses `args` (after the sub-subcommand) against `valued` (flags taking a value; each may be
// repeated) and `bools`, with FlagSet (core/base/flags.h).
absl::StatusOr<Flags> ParseFlags(const std::vector<std::string>& args, size_t first,
                                 const std::vector<std::string>& valued,
                                 const std::vector<std::string>& bools) {
  Flags flags;
  std::map<std::string, bool> bool_values;
  FlagSet set(absl::StrCat("syncopate cache ", args[0]));
  for (const std::string& name : valued) set.Repeated(name, &flags.values[name], name);
  for (const std::string& name : bools) set.Bool(name, &bool_values[name], name);
  RETURN_IF_ERROR(set.Parse(std::vector<std::string>(args.begin() + first, args.end())));
  if (set.help()) return absl::InvalidArgumentError("unknown flag --help");
  std::erase_if(flags.values, [](const auto& entry) { return entry.second.empty(); });
  for (const auto& [name, on] : bool_values) {
    if (on) flags.values[name].push_back("");
  }
  return flags;
}

absl::StatusOr<uint64_t> ParseBytes(std::string text) {
  uint64_t multiplier = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K':
      case 'k':
        multiplier = 1ull << 10;
        break;
      case 'M':
      case 'm':
        multiplier = 1ull << 20;
        break;
      case 'G':
      case 'g':
        multiplier = 1ull << 30;
        break;
      default:
        break;
    }
    if (multiplier != 1) text.pop_back();
  }
  uint64_t n = 0;
  if (!absl::SimpleAtoi(text, &n)) {
    return absl::InvalidArgumentError(absl::StrCat("--max-bytes '", text, "' is not a byte count"));
  }
  return n * multiplier;
}

std::string HumanBytes(uint64_t n) {
  if (n >= (1ull << 30)) return absl::StrFormat("%.1fG", n / double(1ull << 30));
  if (n >= (1ull << 20)) return absl::StrFormat("%.1fM", n / double(1ull << 20));
  if (n >= (1ull << 10)) return absl::StrFormat("%.1fK", n / double(1ull << 10));
  return absl::StrCat(n, "B");
}

std::string Age(std::chrono::system_clock::time_point t) {
  auto s = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now() - t)
               .count();
  if (s < 0) s = 0;
  if (s < 120) return absl::StrCat(s, "s");
  if (s < 7200) return absl::StrCat(s / 60, "m");
  if (s < 172800) return absl::StrCat(s / 3600, "h");
  return absl::StrCat(s / 86400, "d");
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<std::unique_ptr<cache::DiskStore>> OpenStore(const Flags& flags) {
  std::string dir;
  if (auto d = flags.Get("dir")) {
    dir = *d;
  } else {
    absl::StatusOr<std::string> def = cache::DefaultCacheDir();
    if (!def.ok()) return def.status();
    dir = *def;
  }
  // Looking must not create: `ls` on a typo'd --dir should say so, not make an empty cache.
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("no kernel cache at '", dir, "'"));
  }
  return cache::DiskStore::Open(dir, 0);
}

int RunLs(const Flags& flags) {
  auto store = OpenStore(flags);
  if (!store.ok()) return Fail(store.status());
  auto entries = (*store)->List();
  if (!entries.ok()) return Fail(entries.status());
  std::printf("%-64s  %8s  %5s  %-12s  %s\n", "KEY", "SIZE", "AGE", "TARGET", "NVRTC");
  for (auto it = entries->rbegin(); it != entries->rend(); ++it) {
    std::string target =
        it->problem.empty() ? it->target + (it->is_ptx ? " (ptx)" : "") : "INVALID: " + it->problem;
    std::printf("%-64s  %8s  %5s  %-12s  %s\n", it->key.c_str(), HumanBytes(it->size_bytes).c_str(),
                Age(it->last_used).c_str(), target.c_str(), it->nvrtc_version.c_str());
  }
  return kExitOk;
}

int RunStat(const Flags& flags) {
  auto store = OpenStore(flags);
  if (!store.ok()) return Fail(store.status());
  auto entries = (*store)->List();
  if (!entries.ok()) return Fail(entries.status());
  uint64_t bytes = 0;
  int cubins = 0, ptx = 0, invalid = 0;
  for (const auto& e : *entries) {
    bytes += e.size_bytes;
    if (!e.problem.empty()) {
      ++invalid;
    } else if (e.is_ptx) {
      ++ptx;
    } else {
      ++cubins;
    }
  }
  std::printf("dir          %s\n", (*store)->dir().c_str());
  std::printf("entries      %zu (%d cubin, %d ptx, %d invalid)\n", entries->size(), cubins, ptx,
              invalid);
  std::printf("bytes        %llu (%s)\n", static_cast<unsigned long long>(bytes),
              HumanBytes(bytes).c_str());
  if (!entries->empty()) {
    std::printf("least recent %s ago\n", Age(entries->front().last_used).c_str());
    std::printf("most recent  %s ago\n", Age(entries->back().last_used).c_str());
  }
  std::printf("schema       %s\n", cache::CacheSchemaVersion().c_str());
  std::printf("nvrtc        %s\n", nvrtc::NvrtcVersion().c_str());
  return kExitOk;
}

int RunGc(const Flags& flags) {
  uint64_t budget = cache::KernelCache::Options{}.disk_budget_bytes;
  if (auto max = flags.Get("max-bytes")) {
    auto parsed = ParseBytes(*max);
    if (!parsed.ok()) return Usage(std::string(parsed.status().message()));
    budget = *parsed;
  }
  auto store = OpenStore(flags);
  if (!store.ok()) return Fail(store.status());
  auto gc = (*store)->GarbageCollect(budget);
  if (!gc.ok()) return Fail(gc.status());
  std::printf("removed %d entries (%d invalid), %d temp files, %d stale locks; freed %s\n",
              gc->removed_entries + gc->removed_invalid, gc->removed_invalid, gc->removed_temp,
              gc->removed_locks, HumanBytes(gc->freed_bytes).c_str());
  std::printf("remaining %d entries, %s (budget %s)\n", gc->remaining_entries,
              HumanBytes(gc->remaining_bytes).c_str(), HumanBytes(budget).c_str());
  return kExitOk;
}

int RunKey(const Flags& flags) {
  auto source_path = flags.Get("source");
  if (!source_path) return Usage("cache key needs --source FILE");
  cache::CacheKeyParts parts;
  auto source = ReadWholeFile(*source_path);
  if (!source.ok()) return Usage(std::string(source.status().message()));
  parts.source = *std::move(source);
  for (const std::string& spec : flags.All("header")) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Usage(absl::StrCat("--header '", spec, "' must be NAME=FILE"));
    }
    auto content = ReadWholeFile(spec.substr(eq + 1));
    if (!content.ok()) return Usage(std::string(content.status().message()));
    parts.headers[spec.substr(0, eq)] = *std::move(content);
  }
  parts.arch = flags.Get("arch").value_or("sm_90");
  if (auto arch = nvrtc::ParseArch(parts.arch); !arch.ok()) {
    return Usage(std::string(arch.status().message()));
  }
  parts.plan_hash = flags.Get("plan-hash").value_or("");
  parts.options = flags.All("option");
  parts.nvrtc_version = flags.Get("nvrtc-version").value_or(nvrtc::NvrtcVersion());
  cache::CacheKey key = cache::CacheKey::FromParts(parts);
  if (flags.Get("explain")) {
    std::printf("%s", key.Explain().c_str());
  } else {
    std::printf("%s\n", key.hex().c_str());
  }
  return kExitOk;
}

int RunCache(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return kExitUsage;
  }
  const std::string& verb = args[0];
  if (verb == "--help" || verb == "-h" || verb == "help") {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  absl::StatusOr<Flags> flags;
  if (verb == "ls" || verb == "stat") {
    flags = ParseFlags(args, 1, {"dir"}, {});
  } else if (verb == "gc") {
    flags = ParseFlags(args, 1, {"dir", "max-bytes"}, {});
  } else if (verb == "key") {
    flags = ParseFlags(
        args, 1, {"source", "arch", "plan-hash", "option", "header", "nvrtc-version"}, {"explain"});
  } else {
    return Usage(absl::StrCat("unknown cache command '", verb, "' (ls, stat, gc, key)"));
  }
  if (!flags.ok()) return Usage(std::string(flags.status().message()));
  if (verb == "ls") return RunLs(*flags);
  if (verb == "stat") return RunStat(*flags);
  if (verb == "gc") return RunGc(*flags);
  return RunKey(*flags);
}

const SubcommandRegistration kRegistration(
    "cache", "inspect and trim the kernel cache (ls, stat, gc, key --explain)", RunCache);

}  // namespace
}  // namespace syncopate::cli
