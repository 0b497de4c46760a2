// The op tuner; see op_tuner.h.
#include "ops/tuner/op_tuner.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/atomic_file.h"
#include "core/base/status_macros.h"
#include "ops/tuner/op_rank.h"
#include "runtime/cuda/kernel_loader.h"
#include "runtime/cuda/workloads/multiprocess.h"

namespace syncopate::ops {
namespace {

std::string RankTimesPath(const std::string& dir, int rank) {
  return absl::StrCat(dir, "/rank", rank, ".times");
}

// One rank: every path's op, timed in rotating rounds per M; its figures (and, on rank 0, the
// GPU's arch) into its file in `dir` (FormatRankTimes).
absl::Status TuneRank(const OpTuneOptions& o, const std::string& job, int rank,
                      const std::string& dir) {
  const std::vector<TuningCandidate> candidates = TuneCandidates(o.config.kind, o.config.backend);
  int gpus = o.gpus;
  if (gpus == 0) {
    ASSIGN_OR_RETURN(const cuda::DriverApi* api, cuda::Driver());
    CU_RETURN_IF_ERROR(api->cuDeviceGetCount(&gpus));
    if (gpus < 1) return absl::UnavailableError("no GPU is visible");
  }
  const GroupConfig base{.job = "", .rank = rank, .world = o.world, .device = rank % gpus};
  std::vector<OpRank> ops;
  for (size_t i = 0; i < candidates.size(); ++i) {
    GroupConfig group = base;
    group.job = absl::StrCat(job, "_", i);
    ASSIGN_OR_RETURN(ops.emplace_back(), SetUpOpRank(group, ConfigForCandidate(o, candidates[i])));
  }
  auto timed_runs = [&](OpRank& r, int64_t m, int reps) {
    const RunArgs args = RunArgsAt(r, m);
    return GpuMs(*r.api, r.stream.get(), reps,
                 [&] { return ToAbsl(r.op->Run(args, r.stream.get())); });
  };
  std::vector<std::vector<double>> ms(candidates.size());  // [candidate][M]
  for (int64_t m : o.ms) {
    for (OpRank& r : ops) {
      const RunArgs args = RunArgsAt(r, m);
      RETURN_IF_ERROR(WarmUp(r, [&] { return ToAbsl(r.op->Run(args, r.stream.get())); }));
    }
    std::vector<std::vector<double>> rounds(candidates.size());
    for (int round = 0; round < o.rounds; ++round) {
      for (size_t j = 0; j < candidates.size(); ++j) {
        const size_t i = (j + static_cast<size_t>(round)) % candidates.size();
        ASSIGN_OR_RETURN(rounds[i].emplace_back(), timed_runs(ops[i], m, o.reps));
      }
    }
    for (size_t i = 0; i < candidates.size(); ++i) {
      RETURN_IF_ERROR(ToAbsl(ops[i].op->Synchronize(ops[i].stream.get())));
      ms[i].push_back(Median(rounds[i]));
    }
  }
  std::string arch;
  if (rank == 0) {
    ASSIGN_OR_RETURN(const cuda::Context context, cuda::Context::Retain(base.device));
    arch = cuda::ArchFor(context.compute_capability());
  }
  return ReplaceFileAtomically(RankTimesPath(dir, rank), FormatRankTimes(arch, ms));
}

// Rank `rank`'s file of TuneRank into `times` ([candidate][M]) and, from rank 0's, `arch`.
absl::Status ReadRankTimes(const std::string& dir, int rank, size_t candidates,
                           std::vector<std::vector<double>>* times, std::string* arch) {
  const std::string path = RankTimesPath(dir, rank);
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("rank ", rank, " wrote no times (", path, ")"));
  std::stringstream text;
  text << in.rdbuf();
  absl::Status parsed = ParseRankTimes(text.str(), candidates, times, arch);
  if (parsed.ok()) return parsed;
  return absl::Status(parsed.code(), absl::StrCat(path, ": ", parsed.message()));
}

// A folder under $TMPDIR (or /tmp) for the ranks' files, removed with the object.
class ScratchDir {
 public:
  static absl::StatusOr<ScratchDir> Create() {
    const char* tmp = std::getenv("TMPDIR");
    std::string name =
        absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/syncopate_op_tune.XXXXXX");
    if (::mkdtemp(name.data()) == nullptr) {
      return absl::UnavailableError(absl::StrCat("mkdtemp ", name, ": ", std::strerror(errno)));
    }
    return ScratchDir(std::move(name));
  }
  ScratchDir(ScratchDir&& other) noexcept : path_(std::exchange(other.path_, "")) {}
  ScratchDir& operator=(ScratchDir&&) = delete;
  ~ScratchDir() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace

std::vector<TuningCandidate> TuneCandidates(OpKind kind, Backend backend) {
  std::vector<TuningCandidate> candidates = {
      {.fused = false, .backend = Backend::kSm, .chunks = 1}};
  if (backend != Backend::kCopyEngine) {
    candidates.push_back({.fused = true, .backend = Backend::kSm, .chunks = 1});
    candidates.push_back({.fused = true, .backend = Backend::kSm, .chunks = 2});
  }
  if (kind == OpKind::kAllGatherMatmul && backend != Backend::kSm) {
    candidates.push_back({.fused = true, .backend = Backend::kCopyEngine, .chunks = 1});
  }
  return candidates;
}

OpConfig ConfigForCandidate(const OpTuneOptions& o, const TuningCandidate& c) {
  OpConfig config = o.config;
  config.path = PathPreference::kAuto;  // the table is read only then; each bucket is set here
  config.backend = Backend::kAuto;
  config.chunks = 0;
  config.m_buckets = o.ms;
  config.bucket_paths.clear();
  for (int64_t m : o.ms) {
    config.bucket_paths.push_back(
        {.bucket_m = m, .fused = c.fused, .backend = c.backend, .chunks = c.chunks});
  }
  return config;
}

std::string CandidateName(const TuningCandidate& c) {
  return absl::StrCat(c.fused ? "fused " : "unfused ", BackendName(c.backend), " x", c.chunks);
}

absl::Status CheckTuneOptions(const OpTuneOptions& o) {
  if (o.config.cache_dir.empty()) {
    return absl::InvalidArgumentError("cache_dir is empty: the table is stored there");
  }
  if (o.ms.empty()) return absl::InvalidArgumentError("no M to time");
  if (o.gpus < 0 || o.gpus > o.world) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpus ", o.gpus, " is not in 0..world (", o.world, "; 0: every GPU seen)"));
  }
  if (o.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the timeout must be positive");
  }
  if (o.reps < 1 || o.rounds < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("reps ", o.reps, " and rounds ", o.rounds, " must be at least 1"));
  }
  // The op as the engine asks for it (a backend that cannot serve the op, say), then each path.
  if (const Status engine = CheckConfig({.job = o.job, .world = o.world}, o.config); !engine.ok()) {
    return absl::InvalidArgumentError(engine.message());
  }
  const std::vector<TuningCandidate> candidates = TuneCandidates(o.config.kind, o.config.backend);
  for (size_t i = 0; i < candidates.size(); ++i) {
    const TuningCandidate& c = candidates[i];
    // Each path's op joins a group of its own, named as TuneRank names it.
    const Status checked = CheckConfig({.job = absl::StrCat(o.job, "_", i), .world = o.world},
                                       ConfigForCandidate(o, c));
    if (!checked.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(CandidateName(c), ": ", checked.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<OpTuneResult> TuneOp(const OpTuneOptions& o) {
  RETURN_IF_ERROR(CheckTuneOptions(o));
  ASSIGN_OR_RETURN(ScratchDir dir, ScratchDir::Create());
  std::vector<absl::Status> results = workloads::RunRanks(
      o.world, o.timeout, [&](int rank) { return TuneRank(o, o.job, rank, dir.path()); });
  // Every failed rank: the one that failed first often left its peers only a timeout.
  std::string failed;
  absl::StatusCode code = absl::StatusCode::kOk;
  for (int r = 0; r < o.world; ++r) {
    if (results[r].ok()) continue;
    absl::StrAppend(&failed, failed.empty() ? "" : "; ", "rank ", r, ": ", results[r].message());
    if (code == absl::StatusCode::kOk || code == absl::StatusCode::kDeadlineExceeded) {
      code = results[r].code();
    }
  }
  if (!failed.empty()) return absl::Status(code, failed);
  OpTuneResult result;
  result.candidates = TuneCandidates(o.config.kind, o.config.backend);
  std::vector<std::vector<std::vector<double>>> ms_by_rank(o.world);
  std::string arch;
  for (int r = 0; r < o.world; ++r) {
    RETURN_IF_ERROR(ReadRankTimes(dir.path(), r, result.candidates.size(), &ms_by_rank[r], &arch));
  }
  if (arch.empty()) return absl::DataLossError("rank 0 wrote no arch");
  ASSIGN_OR_RETURN(result.best, FastestPerBucket(o.ms, result.candidates, ms_by_rank));
  result.slowest_ms = SlowestRankMs(ms_by_rank);
  const OpTuningKey key = OpTuningKeyFor(o.config, o.world, arch);
  RETURN_IF_ERROR(StoreOpTuning(o.config.cache_dir, key, result.best));
  result.stored = OpTuningPath(o.config.cache_dir, key);
  return result;
}

void PrintTuneTable(const OpTuneOptions& o, const OpTuneResult& r, std::FILE* out) {
  std::fprintf(out,
               "ms per run, each path at its slowest rank, the median of %d rounds of %d runs\n",
               o.rounds, o.reps);
  std::fprintf(out, "%-6s %-26s %10s %12s", "M", "fastest", "ms", "unfused ms");
  for (const TuningCandidate& c : r.candidates)
    std::fprintf(out, " %14s", CandidateName(c).c_str());
  std::fprintf(out, "\n");
  for (size_t j = 0; j < r.best.size(); ++j) {
    const MeasuredBucket& w = r.best[j];
    std::fprintf(
        out, "%-6lld %-26s %10.3f %12.3f", static_cast<long long>(w.bucket_m),
        CandidateName({.fused = w.fused, .backend = w.backend, .chunks = w.chunks}).c_str(), w.ms,
        w.unfused_ms);
    for (const std::vector<double>& path_ms : r.slowest_ms)
      std::fprintf(out, " %14.3f", path_ms[j]);
    std::fprintf(out, "\n");
  }
  std::fprintf(out, "stored %s\n", r.stored.c_str());
  std::fflush(out);
}

}  // namespace syncopate::ops
