// GroupRegistry, failing groups (see group_registry.h): a waiter's deadline (Expire) or its
// caller going away (Cancel) fails the whole group it is in: a pending group through FailPending,
// a formed one through BreakGroup, which leaves a tombstone so late callers learn why. Shutdown,
// supersession and the idle sweep fail groups through the same two functions.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/group_registry.h"
#include "spdlog/spdlog.h"

namespace syncopate::server {
namespace {

// "[1, 5, 7]", shortened for huge groups.
std::string FormatRanks(const std::vector<int>& ranks) {
  constexpr size_t kShown = 32;
  if (ranks.size() <= kShown) return absl::StrCat("[", absl::StrJoin(ranks, ", "), "]");
  std::vector<int> head(ranks.begin(), ranks.begin() + kShown);
  return absl::StrCat("[", absl::StrJoin(head, ", "), ", ... (", ranks.size(), " ranks)]");
}

// The key of the exchange a waiter is in, for messages; "" when it is gone.
template <class FormedEntry, class Loc>
std::string ExchangeKey(const FormedEntry& entry, const Loc& loc) {
  auto round = entry.second.exchanges.find(loc.round);
  if (round == entry.second.exchanges.end()) return "";
  auto waiter = round->second.proposals.find(loc.rank);
  return waiter == round->second.proposals.end() ? "" : waiter->second.key;
}

}  // namespace

void GroupRegistry::FailWaiterGroup(
    WaiterId id, WaiterId cancelled_waiter, const std::string& cancelled_why,
    absl::FunctionRef<absl::Status(const Location&, const PendingGroup&)> pending_status,
    absl::FunctionRef<absl::Status(const Location&, const FormedGroup&, const std::string&)>
        round_status) {
  Deferred deferred;
  {
    absl::MutexLock lock(&mu_);
    auto loc_it = waiters_.find(id);
    if (loc_it == waiters_.end()) return;
    const Location loc = loc_it->second;
    if (loc.is_join) {
      auto it = pending_.find(loc.key);
      if (it == pending_.end()) return;
      FailPending(loc.key, pending_status(loc, it->second), cancelled_waiter, cancelled_why,
                  deferred);
    } else {
      auto it = formed_.find(loc.key);
      if (it == formed_.end()) return;
      const std::string what = loc.is_exchange
                                   ? absl::StrCat("exchange '", ExchangeKey(*it, loc), "' round")
                                   : std::string("plan agreement round");
      BreakGroup(loc.key, round_status(loc, it->second, what), cancelled_waiter, cancelled_why,
                 deferred);
    }
  }
  for (auto& fn : deferred) fn();
}

void GroupRegistry::Expire(WaiterId id) {
  FailWaiterGroup(
      id, 0, "",
      [](const Location& loc, const PendingGroup& group) {
        std::vector<int> missing;
        for (int r = 0; r < group.world_size; ++r) {
          if (!group.joined.contains(r)) missing.push_back(r);
        }
        return absl::DeadlineExceededError(
            absl::StrCat("group for job '", loc.key, "' did not form by rank ", loc.rank,
                         "'s deadline: missing ranks ", FormatRanks(missing), " of world size ",
                         group.world_size, " (", group.joined.size(), " joined)"));
      },
      [](const Location& loc, const FormedGroup& group, const std::string& what) {
        std::vector<int> missing;
        auto& rounds = loc.is_exchange ? group.exchanges : group.rounds;
        auto round = rounds.find(loc.round);
        for (int r = 0; r < group.info.world_size; ++r) {
          if (round == rounds.end() || !round->second.proposals.contains(r)) {
            missing.push_back(r);
          }
        }
        return absl::DeadlineExceededError(
            absl::StrCat(what, " ", loc.round, " of group ", loc.key, " did not complete by rank ",
                         loc.rank, "'s deadline: ranks ", FormatRanks(missing),
                         loc.is_exchange ? " did not contribute" : " did not propose"));
      });
}

void GroupRegistry::Cancel(WaiterId id, const std::string& why) {
  FailWaiterGroup(
      id, id, why,
      [&](const Location& loc, const PendingGroup& group) {
        const MemberInfo& member = group.joined.at(loc.rank).member;
        return absl::AbortedError(absl::StrCat(Describe(member), " left job '", loc.key,
                                               "' before its group formed: ", why));
      },
      [&](const Location& loc, const FormedGroup& group, const std::string& what) {
        const MemberInfo& member = group.info.members.at(loc.rank);
        return absl::AbortedError(absl::StrCat(Describe(member), " vanished during ", what, " ",
                                               loc.round, " of group ", loc.key, ": ", why));
      });
}

void GroupRegistry::FailPending(const std::string& job_id, const absl::Status& status,
                                WaiterId cancelled_waiter, const std::string& cancelled_why,
                                Deferred& deferred) {
  auto it = pending_.find(job_id);
  if (it == pending_.end()) return;
  spdlog::warn("event=group_failed job={} group={} code={} msg=\"{}\"", job_id, it->second.group_id,
               absl::StatusCodeToString(status.code()), std::string(status.message()));
  for (auto& [rank, waiter] : it->second.joined) {
    timers_.Cancel(waiter.timer);
    waiters_.erase(waiter.id);
    absl::Status mine =
        waiter.id == cancelled_waiter ? absl::CancelledError(cancelled_why) : status;
    deferred.push_back([done = std::move(waiter.done), mine]() mutable { done(mine); });
  }
  ++stats_.groups_failed;
  pending_.erase(it);
}

void GroupRegistry::BreakGroup(const std::string& group_id, const absl::Status& status,
                               WaiterId cancelled_waiter, const std::string& cancelled_why,
                               Deferred& deferred) {
  auto it = formed_.find(group_id);
  if (it == formed_.end()) return;
  spdlog::warn("event=group_broken group={} code={} msg=\"{}\"", group_id,
               absl::StatusCodeToString(status.code()), std::string(status.message()));
  for (auto* rounds : {&it->second.rounds, &it->second.exchanges}) {
    for (auto& [index, round] : *rounds) {
      for (auto& [rank, waiter] : round.proposals) {
        timers_.Cancel(waiter.timer);
        waiters_.erase(waiter.id);
        absl::Status mine =
            waiter.id == cancelled_waiter ? absl::CancelledError(cancelled_why) : status;
        deferred.push_back([w = std::move(waiter), mine]() mutable { w.Fail(mine); });
      }
    }
  }
  auto by_job = formed_by_job_.find(it->second.info.job_id);
  if (by_job != formed_by_job_.end() && by_job->second == group_id) formed_by_job_.erase(by_job);
  formed_.erase(it);
  ++stats_.groups_failed;
  AddTombstone(group_id, absl::AbortedError(
                             absl::StrCat("group ", group_id, " has failed: ", status.message())));
}

void GroupRegistry::AddTombstone(const std::string& group_id, const absl::Status& status) {
  if (tombstones_.insert_or_assign(group_id, status).second) tombstone_order_.push_back(group_id);
  while (static_cast<int>(tombstone_order_.size()) > options_.tombstones) {
    tombstones_.erase(tombstone_order_.front());
    tombstone_order_.pop_front();
  }
}

}  // namespace syncopate::server
