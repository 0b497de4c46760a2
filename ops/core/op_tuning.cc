// The ops' measured per-bucket paths; see op_tuning.h.
#include "ops/core/op_tuning.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/base/atomic_file.h"
#include "ops/core/op_plans.h"

namespace syncopate::ops {
namespace {

const char* DTypeText(DType dtype) { return dtype == DType::kFP16 ? "f16" : "bf16"; }

template <class T>
bool ParseNumber(absl::string_view text, T* out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

std::string Problem(const MeasuredBucket& b) {
  if (b.bucket_m <= 0) return absl::StrCat("bucket ", b.bucket_m, " is not positive");
  if (b.backend != Backend::kSm && b.backend != Backend::kCopyEngine)
    return "backend is not ce or sm";
  if (b.chunks < 1 || b.chunks > 8) return absl::StrCat("chunks ", b.chunks, " is not in 1..8");
  if (!std::isfinite(b.ms) || b.ms <= 0 || !std::isfinite(b.unfused_ms) || b.unfused_ms <= 0) {
    return "times must be positive";
  }
  return "";
}

absl::StatusOr<MeasuredBucket> ParseBucketLine(const std::vector<absl::string_view>& words) {
  MeasuredBucket b;
  if (words.size() != 7) return absl::InvalidArgumentError("expected 7 words");
  if (!ParseNumber(words[1], &b.bucket_m)) return absl::InvalidArgumentError("bad bucket M");
  if (words[2] != "fused" && words[2] != "unfused") {
    return absl::InvalidArgumentError("expected fused or unfused");
  }
  b.fused = words[2] == "fused";
  if (words[3] != "ce" && words[3] != "sm") return absl::InvalidArgumentError("expected ce or sm");
  b.backend = words[3] == "ce" ? Backend::kCopyEngine : Backend::kSm;
  if (!ParseNumber(words[4], &b.chunks) || !ParseNumber(words[5], &b.ms) ||
      !ParseNumber(words[6], &b.unfused_ms)) {
    return absl::InvalidArgumentError("bad number");
  }
  if (std::string problem = Problem(b); !problem.empty()) {
    return absl::InvalidArgumentError(problem);
  }
  return b;
}

}  // namespace

OpTuningKey OpTuningKeyFor(const OpConfig& config, int world, std::string arch) {
  return {.kind = config.kind,
          .arch = std::move(arch),
          .dtype = config.dtype,
          .world = world,
          .n = config.n,
          .k = config.k,
          .tile_parts = config.tile_parts && config.kind == OpKind::kMatmulReduceScatter,
          .plan_knob = config.kind == OpKind::kMatmulAllReduce ? AllReducePlanKnob() : ""};
}

absl::StatusOr<std::vector<MeasuredBucket>> FastestPerBucket(
    const std::vector<int64_t>& buckets, const std::vector<TuningCandidate>& candidates,
    const std::vector<std::vector<std::vector<double>>>& ms_by_rank) {
  if (candidates.empty() || candidates[0].fused) {
    return absl::InvalidArgumentError("the first candidate must be the unfused path");
  }
  if (ms_by_rank.empty()) return absl::InvalidArgumentError("no rank's times");
  for (size_t r = 0; r < ms_by_rank.size(); ++r) {
    if (ms_by_rank[r].size() != candidates.size()) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", r, " timed ", ms_by_rank[r].size(),
                                                     " candidates, not ", candidates.size()));
    }
    for (size_t c = 0; c < candidates.size(); ++c) {
      if (ms_by_rank[r][c].size() != buckets.size()) {
        return absl::InvalidArgumentError(absl::StrCat("rank ", r, " candidate ", c, ": ",
                                                       ms_by_rank[r][c].size(), " times for ",
                                                       buckets.size(), " buckets"));
      }
      for (size_t j = 0; j < buckets.size(); ++j) {
        const double ms = ms_by_rank[r][c][j];
        if (!std::isfinite(ms) || ms <= 0) {
          return absl::InvalidArgumentError(absl::StrCat("rank ", r, " candidate ", c, " bucket ",
                                                         buckets[j], ": time ", ms,
                                                         " is not positive"));
        }
      }
    }
  }
  const std::vector<std::vector<double>> slowest = SlowestRankMs(ms_by_rank);
  std::vector<MeasuredBucket> best;
  for (size_t j = 0; j < buckets.size(); ++j) {
    size_t w = 0;
    for (size_t c = 1; c < candidates.size(); ++c) {
      if (slowest[c][j] < slowest[w][j]) w = c;
    }
    best.push_back({.bucket_m = buckets[j],
                    .fused = candidates[w].fused,
                    .backend = candidates[w].backend,
                    .chunks = candidates[w].chunks,
                    .ms = slowest[w][j],
                    .unfused_ms = slowest[0][j]});
  }
  return best;
}

std::vector<std::vector<double>> SlowestRankMs(
    const std::vector<std::vector<std::vector<double>>>& ms_by_rank) {
  std::vector<std::vector<double>> slowest =
      ms_by_rank.empty() ? std::vector<std::vector<double>>{} : ms_by_rank[0];
  for (const auto& rank : ms_by_rank) {
    for (size_t c = 0; c < slowest.size(); ++c) {
      for (size_t j = 0; j < slowest[c].size(); ++j) {
        slowest[c][j] = std::max(slowest[c][j], rank[c][j]);
      }
    }
  }
  return slowest;
}

std::string FormatRankTimes(const std::string& arch, const std::vector<std::vector<double>>& ms) {
  std::string text = arch.empty() ? "" : absl::StrCat("arch ", arch, "\n");
  for (size_t c = 0; c < ms.size(); ++c) {
    absl::StrAppend(&text, "times ", c);
    for (double t : ms[c]) absl::StrAppend(&text, " ", absl::StrFormat("%.6f", t));
    absl::StrAppend(&text, "\n");
  }
  return text;
}

absl::Status ParseRankTimes(const std::string& text, size_t candidates,
                            std::vector<std::vector<double>>* ms, std::string* arch) {
  ms->assign(candidates, {});
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (words.size() == 2 && words[0] == "arch") {
      *arch = std::string(words[1]);
      continue;
    }
    size_t c = 0;
    if (words.size() < 2 || words[0] != "times" || !ParseNumber(words[1], &c) || c >= candidates) {
      return absl::DataLossError(
          absl::StrCat("unexpected line '", line, "' (", candidates, " candidates)"));
    }
    for (size_t w = 2; w < words.size(); ++w) {
      double t = 0;
      if (!ParseNumber(words[w], &t)) {
        return absl::DataLossError(absl::StrCat("bad time '", words[w], "' in '", line, "'"));
      }
      (*ms)[c].push_back(t);
    }
  }
  return absl::OkStatus();
}

std::string OpTuningPath(const std::string& cache_dir, const OpTuningKey& key) {
  return absl::StrCat(cache_dir, "/tuning/op.", OpKindName(key.kind), ".", key.arch, ".",
                      DTypeText(key.dtype), ".w", key.world, ".", key.n, "x", key.k,
                      key.tile_parts ? ".parts" : "", key.plan_knob.empty() ? "" : ".",
                      key.plan_knob, ".tune");
}

absl::Status StoreOpTuning(const std::string& cache_dir, const OpTuningKey& key,
                           const std::vector<MeasuredBucket>& buckets) {
  std::string text = "format 1\n";
  for (const MeasuredBucket& b : buckets) {
    if (std::string problem = Problem(b); !problem.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("bucket ", b.bucket_m, ": ", problem));
    }
    absl::StrAppend(&text, "bucket ", b.bucket_m, " ", b.fused ? "fused" : "unfused", " ",
                    BackendName(b.backend), " ", b.chunks, " ", b.ms, " ", b.unfused_ms, "\n");
  }
  const std::string path = OpTuningPath(cache_dir, key);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", path, "'s folder: ", ec.message()));
  }
  return ReplaceFileAtomically(path, text);
}

absl::StatusOr<std::vector<MeasuredBucket>> LookupOpTuning(const std::string& cache_dir,
                                                           const OpTuningKey& key) {
  const std::string path = OpTuningPath(cache_dir, key);
  std::ifstream in(path);
  if (!in) return std::vector<MeasuredBucket>{};
  std::vector<MeasuredBucket> buckets;
  std::string line;
  bool format_seen = false;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (words.empty() || words[0].front() == '#') continue;
    auto bad = [&](absl::string_view why) {
      return absl::DataLossError(absl::StrCat(path, ":", lineno, ": ", why, ": '", line, "'"));
    };
    if (!format_seen) {
      if (words.size() != 2 || words[0] != "format" || words[1] != "1") {
        return bad("expected 'format 1' first");
      }
      format_seen = true;
      continue;
    }
    if (words[0] != "bucket") return bad("expected a bucket line");
    absl::StatusOr<MeasuredBucket> b = ParseBucketLine(words);
    if (!b.ok()) return bad(b.status().message());
    buckets.push_back(*b);
  }
  if (!format_seen) return absl::DataLossError(absl::StrCat(path, ": empty, no 'format 1'"));
  return buckets;
}

OpConfig WithMeasuredPaths(const OpConfig& config, int world,
                           const std::vector<MeasuredBucket>& measured, const std::string& source) {
  OpConfig out = config;
  if (config.path != PathPreference::kAuto) return out;
  Result<std::vector<int64_t>> buckets = BucketsFor(config, world);
  if (!buckets.ok()) return out;
  for (const MeasuredBucket& m : measured) {
    if (!std::binary_search(buckets->begin(), buckets->end(), m.bucket_m)) continue;
    const bool set = std::any_of(out.bucket_paths.begin(), out.bucket_paths.end(),
                                 [&](const BucketPath& p) { return p.bucket_m == m.bucket_m; });
    if (set) continue;
    // A measured copy engine cannot serve a reduction (a hand-edited file could say so).
    if (m.backend == Backend::kCopyEngine && config.kind != OpKind::kAllGatherMatmul) continue;
    // The caller's backend wins too (e.g. the SM backend, which graph capture needs).
    if (config.backend != Backend::kAuto && m.backend != config.backend) continue;
    std::ostringstream why;
    why << "measured " << m.ms << " ms against unfused " << m.unfused_ms << " ms (" << source
        << ")";
    out.bucket_paths.push_back({.bucket_m = m.bucket_m,
                                .fused = m.fused,
                                .backend = m.backend,
                                .chunks = m.chunks,
                                .why = why.str()});
  }
  return out;
}

}  // namespace syncopate::ops
