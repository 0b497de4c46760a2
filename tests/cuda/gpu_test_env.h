// Skipping GPU tests with a reason where no driver / GPU is present (probed once, in a child
// process, so the test process stays free of CUDA state for its forked ranks).
#pragma once

#include <string>

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

}  // namespace syncopate::testing
