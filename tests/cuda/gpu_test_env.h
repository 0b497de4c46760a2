// Skipping GPU tests with a reason where no driver / GPU is present (probed once, in a child
// process, so the test process stays free of CUDA state for its forked ranks).
#pragma once

#include <cstdlib>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "runtime/cuda/workloads/multiprocess.h"

namespace syncopate::testing {

inline const std::string* NoGpuReason() {
  static const std::string* reason = [] {
    std::string why;
    return workloads::ProbeGpu(&why) ? nullptr : new std::string(why);
  }();
  return reason;
}

#define SYNCOPATE_REQUIRE_GPU()                                               \
  do {                                                                        \
    if (const std::string* why = ::syncopate::testing::NoGpuReason())         \
      GTEST_SKIP() << "no GPU: " << *why;                                     \
  } while (0)

// Empty when `world` ranks fit on the GPU at once, else why not: under MPS (the scripts give it
// a private pipe folder, CUDA_MPS_PIPE_DIRECTORY), the server's shared pool of connections is
// exhausted (RanksFitOnGpu: ResourceExhausted at context creation). Other failures, and any
// failure without MPS, are not reasons to skip: the test runs and reports them itself. A fit is
// remembered per world; a misfit is probed again by the next test (it may have been transient).
inline std::string RanksDoNotFitReason(int world) {
  static auto* fits = new std::set<int>();
  if (fits->count(world) != 0 || std::getenv("CUDA_MPS_PIPE_DIRECTORY") == nullptr) return "";
  absl::Status fit = workloads::RanksFitOnGpu(world);
  if (fit.code() == absl::StatusCode::kResourceExhausted) return std::string(fit.message());
  fits->insert(world);
  return "";
}

// Empty unless `world` ranks run as MPS clients (CUDA_MPS_PIPE_DIRECTORY) at
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE percent of the SMs each, and together ask for more than the
// GPU has (world * percent > 100). Their persistent grids then need more slots than exist, and a
// rank may wait for slots its peers' spinning CTAs hold: a hazard of the one-GPU stand-in at the
// wrong share, not of ranks on GPUs of their own (gpu-checks.sh runs 4 ranks at 25% as well).
inline std::string MpsOversubscribedReason(int world) {
  const char* pipe = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const char* pct = std::getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
  if (pipe == nullptr || pct == nullptr) return "";
  const int percent = std::atoi(pct);
  if (percent <= 0 || world * percent <= 100) return "";
  return std::to_string(world) + " ranks at " + std::to_string(percent) +
         "% of the SMs each oversubscribe the one GPU (a stand-in for " + std::to_string(world) +
         " GPUs gives each at most " + std::to_string(100 / world) + "%)";
}

// Skips a test whose `world` ranks cannot all hold a context on the one GPU (MPS with many
// connections per client): a limit of the one-GPU stand-in, where each rank of a real system
// has a GPU of its own. Says so in the skip message.
#define SYNCOPATE_REQUIRE_RANKS_FIT(world)                                                 \
  do {                                                                                     \
    if (std::string why = ::syncopate::testing::RanksDoNotFitReason(world); !why.empty())  \
      GTEST_SKIP() << (world)                                                              \
                   << " ranks do not fit on this GPU at once (one-GPU stand-in): " << why; \
  } while (0)

}  // namespace syncopate::testing
