// In-process Bootstrap for single-process tests: several transports (one per thread) exchange
// through shared memory. LocalBootstrapGroup owns the rounds; each rank gets a LocalBootstrap.
//
// Thread-safety: LocalBootstrapGroup is thread-safe; each LocalBootstrap is used by one thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "runtime/ucx/bootstrap.h"

namespace syncopate::ucx::testing {

class LocalBootstrapGroup {
 public:
  explicit LocalBootstrapGroup(int world_size) : world_size_(world_size) {}

  absl::StatusOr<std::vector<std::string>> AllGather(int rank, std::string mine,
                                                     absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    const uint64_t my_round = round_;
    contributions_[rank] = std::move(mine);
    if (static_cast<int>(contributions_.size()) == world_size_) {
      result_.clear();
      for (auto& [r, blob] : contributions_) result_.push_back(std::move(blob));
      contributions_.clear();
      ++round_;
      return result_;
    }
    auto done = [&] { return round_ != my_round; };
    if (!mu_.AwaitWithDeadline(absl::Condition(&done), deadline)) {
      return absl::DeadlineExceededError(absl::StrCat("local bootstrap: rank ", rank,
                                                      " waited for the other ranks"));
    }
    return result_;
  }
  int world_size() const { return world_size_; }

 private:
  const int world_size_;
  absl::Mutex mu_;
  uint64_t round_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int, std::string> contributions_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> result_ ABSL_GUARDED_BY(mu_);
};

class LocalBootstrap : public Bootstrap {
 public:
  LocalBootstrap(LocalBootstrapGroup* group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return group_->world_size(); }
  absl::StatusOr<std::vector<std::string>> AllGather(absl::string_view mine,
                                                     absl::Time deadline) override {
    return group_->AllGather(rank_, std::string(mine), deadline);
  }

 private:
  LocalBootstrapGroup* group_;
  int rank_;
};

}  // namespace syncopate::ucx::testing
