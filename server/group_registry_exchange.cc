// GroupRegistry, blob exchange rounds (see group_registry.h): an all-gather of blobs (UCX worker
// addresses, remote keys, barriers) in a formed group. Exchange rounds are counted apart from
// Agree rounds but enter and wait in them the same way (AddToRound); the rank that completes a
// round compares the ranks' keys and hands every rank the same blobs, in rank order.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/group_registry.h"
#include "spdlog/spdlog.h"

namespace syncopate::server {

GroupRegistry::WaiterId GroupRegistry::Exchange(const std::string& group_id, int rank,
                                                std::string key, std::string blob,
                                                absl::Time deadline, ExchangeDone done) {
  absl::Status reject;
  WaiterId id = 0;
  std::map<int, AgreeWaiter> ready;
  uint64_t round_index = 0;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<FormedGroup*> found = FindFormedGroup(group_id, rank);
    if (!found.ok()) {
      reject = found.status();
    } else {
      FormedGroup& group = **found;
      group.last_used = absl::Now();
      round_index = group.next_exchange[rank]++;
      id = next_waiter_++;
      AgreeWaiter waiter;
      waiter.id = id;
      waiter.key = std::move(key);
      waiter.blob = std::move(blob);
      waiter.exchange_done = std::move(done);
      ready = AddToRound(group, group.exchanges,
                         Location{false, group_id, rank, round_index, /*is_exchange=*/true},
                         deadline, std::move(waiter));
    }
  }
  if (!reject.ok()) {
    LogRejected("exchange_rejected", group_id, rank, reject);
    done(reject);
    return 0;
  }
  if (ready.empty()) return id;

  // Every rank has contributed. Differing keys mean the ranks' exchanges are out of step; that
  // fails this round only (like a diverging proposal), naming what each rank sent.
  const std::string& first_key = ready.begin()->second.key;
  bool same_key = true;
  for (auto& [r, w] : ready) same_key = same_key && w.key == first_key;
  if (!same_key) {
    std::vector<std::string> keys;
    for (auto& [r, w] : ready) keys.push_back(absl::StrCat("rank ", r, ": '", w.key, "'"));
    const absl::Status status = absl::FailedPreconditionError(
        absl::StrCat("exchange round ", round_index, " of group ", group_id,
                     ": ranks gave different keys (their exchanges are out of step): ",
                     absl::StrJoin(keys, ", ")));
    spdlog::info("event=exchange_failed group={} round={} msg=\"{}\"", group_id, round_index,
                 std::string(status.message()));
    for (auto& [r, w] : ready) w.exchange_done(status);
    return id;
  }
  auto blobs = std::make_shared<std::vector<std::string>>();
  blobs->reserve(ready.size());
  for (auto& [r, w] : ready) blobs->push_back(std::move(w.blob));
  spdlog::debug("event=exchanged group={} round={} key={}", group_id, round_index, first_key);
  std::shared_ptr<const std::vector<std::string>> shared = std::move(blobs);
  for (auto& [r, w] : ready) w.exchange_done(ExchangeOutcome{shared, round_index});
  return id;
}

}  // namespace syncopate::server
