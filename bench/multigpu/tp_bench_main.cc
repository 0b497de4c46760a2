// syncopate_tp_bench: the multi-GPU tensor-parallel benchmark of issue 8 (see README.md).
// The parent never touches CUDA: it parses flags, probes the driver in a forked child, then per
// world size forks one process per rank (runtime/cuda/workloads/multiprocess.h) — the CUDA driver does not
// survive fork, and ranks must be processes (kernels of one context cannot wait on each other).
// Exit codes: 0 every configuration ran and passed its check; 1 something failed; 2 bad
// arguments; 3 no usable CUDA driver or too few GPUs (nothing ran).
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/multigpu/plan_check.h"
#include "bench/multigpu/rank_runner.h"
#include "bench/multigpu/results.h"
#include "bench/multigpu/tp_config.h"
#include "core/base/status_macros.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/workloads/multiprocess.h"

namespace syncopate::tp_bench {
namespace {

// In a child: the driver loads and at least `gpus` devices are visible.
absl::Status ProbeDevices(int gpus) {
  std::vector<absl::Status> s = workloads::RunRanks(1, absl::Seconds(60), [gpus](int) -> absl::Status {
    ASSIGN_OR_RETURN(const cuda::DriverApi* api, cuda::Driver());
    int count = 0;
    if (CUresult r = api->cuDeviceGetCount(&count); r != CUDA_SUCCESS) {
      return absl::UnavailableError(absl::StrCat("cuDeviceGetCount: ", cuda::CuResultName(r)));
    }
    if (count < gpus) {
      return absl::UnavailableError(
          absl::StrCat("--gpus ", gpus, " but only ", count, " CUDA device(s) visible"));
    }
    return absl::OkStatus();
  });
  return s[0];
}

void PrintList(const BenchFlags& flags, const std::vector<int>& worlds) {
  for (int world : worlds) {
    std::vector<std::string> skipped;
    const std::vector<Problem> problems = ProblemsFor(flags, world, &skipped);
    std::printf("TP=%d: %zu problems x chunks {%s} x backends {%s}\n", world, problems.size(),
                absl::StrJoin(flags.chunks, ",").c_str(), absl::StrJoin(flags.backends, ",").c_str());
    for (const Problem& p : problems) std::printf("  %s\n", p.Label().c_str());
    for (const std::string& s : skipped) std::printf("  skipped: %s\n", s.c_str());
  }
}

int Main(int argc, char** argv) {
  absl::StatusOr<BenchFlags> parsed = ParseFlags(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "syncopate_tp_bench: %s\n\n%s", std::string(parsed.status().message()).c_str(),
                 Usage().c_str());
    return 2;
  }
  const BenchFlags& flags = *parsed;
  if (flags.help) {
    std::printf("%s", Usage().c_str());
    return 0;
  }
  absl::StatusOr<std::vector<int>> worlds = WorldSizes(flags);
  if (!worlds.ok()) {
    std::fprintf(stderr, "syncopate_tp_bench: %s\n", std::string(worlds.status().message()).c_str());
    return 2;
  }
  if (flags.list) {
    PrintList(flags, *worlds);
    return 0;
  }
  if (flags.plan_only) {
    absl::Status s = CheckPlans(flags);
    if (!s.ok()) std::fprintf(stderr, "syncopate_tp_bench: %s\n", std::string(s.message()).c_str());
    return s.ok() ? 0 : 1;
  }
  if (absl::Status s = ProbeDevices(flags.gpus); !s.ok()) {
    std::fprintf(stderr,
                 "syncopate_tp_bench: no usable GPU: %s\n"
                 "(nothing was run; --list and --plan-only [--nvrtc] work without a GPU)\n",
                 std::string(s.message()).c_str());
    return 3;
  }
  if (flags.ranks_per_gpu > 1) {
    std::printf("NOTE: %d ranks share each GPU (time-sliced processes): a correctness dry run; "
                "its times are not NVLink overlap figures.\n", flags.ranks_per_gpu);
  }
  std::printf("results appended to %s\n", flags.csv.c_str());
  PrintTableHeader(stdout);
  std::fflush(stdout);
  int failures = 0;
  for (int world : *worlds) {
    // Said before the run, so a world that runs nothing is not read as one that ran clean.
    std::vector<std::string> skipped;
    if (ProblemsFor(flags, world, &skipped).empty()) {
      std::printf("TP=%d: no problem splits into %d equal shards; nothing runs\n", world, world);
    }
    for (const std::string& s : skipped) std::printf("  skipped: %s\n", s.c_str());
    std::fflush(stdout);
    const std::string group_id = absl::StrCat("tpb", ::getpid(), "_w", world);
    std::vector<absl::Status> results = workloads::RunRanks(
        world, absl::Seconds(flags.run_timeout_s),
        [&](int rank) { return RunRank(flags, world, rank, group_id); });
    for (int r = 0; r < world; ++r) {
      if (!results[r].ok()) {
        ++failures;
        std::fprintf(stderr, "syncopate_tp_bench: TP=%d rank %d: %s\n", world, r,
                     results[r].ToString().c_str());
      }
    }
  }
  // Failed checks are rows in the CSV; the exit code reports only runs that did not finish.
  std::printf("\ndone: %d rank failure(s); rows in %s\n", failures, flags.csv.c_str());
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace syncopate::tp_bench

int main(int argc, char** argv) { return syncopate::tp_bench::Main(argc, argv); }
