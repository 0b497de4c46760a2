// What a test of forked ranks (workloads::RunRanks) checks last: every rank's run returned OK.
// Header-only; shared by the GPU tests of the runtime and of the ops.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace syncopate::testing {

// A failure names the case (`what`, when given) and the rank.
inline void ExpectEveryRankOk(const std::vector<absl::Status>& results,
                              std::string_view what = "") {
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_TRUE(results[r].ok()) << what << (what.empty() ? "" : ", ") << "rank " << r << ": "
                                 << results[r];
  }
}

}  // namespace syncopate::testing
