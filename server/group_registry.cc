// See group_registry.h.
#include "server/group_registry.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
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

std::string RandomHex() {
  std::random_device device;
  return absl::StrFormat("%08x", device());
}

// The key of the exchange a waiter is in, for messages; "" when it is gone.
template <class FormedEntry, class Loc>
std::string ExchangeKey(const FormedEntry& entry, const Loc& loc) {
  auto round = entry.second.exchanges.find(loc.round);
  if (round == entry.second.exchanges.end()) return "";
  auto waiter = round->second.proposals.find(loc.rank);
  return waiter == round->second.proposals.end() ? "" : waiter->second.key;
}

int ProposalWorldSize(const v1::Proposal& proposal) {
  if (proposal.has_template_request()) return proposal.template_request().world_size();
  if (proposal.has_plan()) return proposal.plan().world_size();
  return -1;
}

absl::Duration SweepInterval(const GroupRegistry::Options& options) {
  if (options.sweep_interval > absl::ZeroDuration()) return options.sweep_interval;
  return std::clamp(options.group_idle_ttl / 4, absl::Milliseconds(10), absl::Seconds(60));
}

}  // namespace

GroupRegistry::GroupRegistry(Options options)
    : options_(std::move(options)), sweep_interval_(SweepInterval(options_)),
      incarnation_(RandomHex()) {
  // Sweeping on a timer, not only on Join: a node with no new jobs still lets idle groups go.
  timers_.Schedule(absl::Now() + sweep_interval_, [this] { SweepTick(); });
}

GroupRegistry::~GroupRegistry() { Shutdown("the group registry is being destroyed"); }

std::string GroupRegistry::Describe(const MemberInfo& member) {
  std::string text = absl::StrCat("rank ", member.rank);
  if (!member.node_name.empty()) absl::StrAppend(&text, " (node ", member.node_name);
  if (!member.daemon.empty()) {
    absl::StrAppend(&text, member.node_name.empty() ? " (" : ", ", "via daemon ", member.daemon);
  }
  if (!member.node_name.empty() || !member.daemon.empty()) text += ")";
  return text;
}

GroupRegistry::WaiterId GroupRegistry::Join(const std::string& job_id, int world_size,
                                            MemberInfo member, absl::Time deadline,
                                            JoinDone done) {
  Deferred deferred;
  absl::Status reject;
  WaiterId id = 0;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    SweepIdle(now, deferred);
    if (shutdown_) {
      reject = absl::UnavailableError(shutdown_why_);
    } else {
      if (auto formed = formed_by_job_.find(job_id); formed != formed_by_job_.end()) {
        const std::string old_group = formed->second;
        BreakGroup(old_group,
                   absl::AbortedError(absl::StrCat(
                       "group ", old_group, " of job '", job_id, "' was superseded: ",
                       Describe(member), " joined a new group with the same job id")),
                   0, "", deferred);
      }
      auto it = pending_.find(job_id);
      if (it == pending_.end()) {
        if (static_cast<int>(pending_.size() + formed_.size()) >= options_.max_groups &&
            !EvictIdlest(job_id, now, deferred)) {
          reject = absl::ResourceExhaustedError(absl::StrCat(
              "daemon ", options_.daemon_name, " already holds ", options_.max_groups,
              " groups (max_groups), each forming or with a call in flight; job '", job_id,
              "' cannot start another"));
        } else {
          PendingGroup group;
          group.group_id = absl::StrCat(job_id, "#", incarnation_, "-", next_group_++);
          group.job_id = job_id;
          group.world_size = world_size;
          group.founder = Describe(member);
          it = pending_.emplace(job_id, std::move(group)).first;
        }
      }
      if (reject.ok()) {
        PendingGroup& group = it->second;
        if (group.world_size != world_size) {
          reject = absl::InvalidArgumentError(absl::StrCat(
              "world_size: ", world_size, " from ", Describe(member),
              " does not match the world size ", group.world_size, " of job '", job_id,
              "' set by ", group.founder));
        } else if (auto dup = group.joined.find(member.rank); dup != group.joined.end()) {
          reject = absl::InvalidArgumentError(absl::StrCat(
              "rank: ", member.rank, " already joined job '", job_id, "' as ",
              Describe(dup->second.member), "; ", Describe(member),
              " is a duplicate (each rank joins once)"));
        } else {
          id = next_waiter_++;
          JoinWaiter waiter;
          waiter.id = id;
          waiter.member = member;
          waiter.done = std::move(done);
          waiter.timer = timers_.Schedule(deadline, [this, id] { Expire(id); });
          waiters_[id] = Location{true, job_id, member.rank, 0};
          const int rank = member.rank;
          group.joined.emplace(rank, std::move(waiter));
          spdlog::debug("event=join job={} rank={} joined={}/{}", job_id, rank,
                        group.joined.size(), group.world_size);
          if (static_cast<int>(group.joined.size()) == group.world_size) {
            Form(group, deferred);
            pending_.erase(it);
          }
        }
      }
    }
  }
  for (auto& fn : deferred) fn();
  if (!reject.ok()) {
    spdlog::info("event=join_rejected job={} rank={} code={} msg=\"{}\"", job_id, member.rank,
                 absl::StatusCodeToString(reject.code()), std::string(reject.message()));
    done(reject);
  }
  return id;
}

void GroupRegistry::Form(PendingGroup& pending, Deferred& deferred) {
  FormedGroup formed;
  formed.info.group_id = pending.group_id;
  formed.info.job_id = pending.job_id;
  formed.info.world_size = pending.world_size;
  formed.next_round.assign(pending.world_size, 0);
  formed.next_exchange.assign(pending.world_size, 0);
  formed.last_used = absl::Now();
  for (auto& [rank, waiter] : pending.joined) formed.info.members.push_back(waiter.member);
  for (auto& [rank, waiter] : pending.joined) {
    timers_.Cancel(waiter.timer);
    waiters_.erase(waiter.id);
    deferred.push_back([done = std::move(waiter.done), info = formed.info]() mutable {
      done(std::move(info));
    });
  }
  spdlog::info("event=group_formed job={} group={} world_size={}", pending.job_id,
               pending.group_id, pending.world_size);
  ++stats_.groups_formed;
  formed_by_job_[pending.job_id] = pending.group_id;
  const std::string group_id = pending.group_id;
  formed_.emplace(group_id, std::move(formed));
}

absl::StatusOr<GroupRegistry::FormedGroup*> GroupRegistry::FindFormedGroup(
    const std::string& group_id, int rank) {
  if (shutdown_) return absl::UnavailableError(shutdown_why_);
  auto it = formed_.find(group_id);
  if (it == formed_.end()) {
    if (auto tomb = tombstones_.find(group_id); tomb != tombstones_.end()) return tomb->second;
    return absl::NotFoundError(absl::StrCat(
        "group_id: group ", group_id, " is not known to daemon ", options_.daemon_name,
        " (it never formed here, expired, or leader_address names another daemon)"));
  }
  if (rank >= it->second.info.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank: ", rank, " is out of range [0, ",
                                                   it->second.info.world_size, ") for group ",
                                                   group_id));
  }
  return &it->second;
}

std::map<int, GroupRegistry::AgreeWaiter> GroupRegistry::AddToRound(
    FormedGroup& group, std::map<uint64_t, Round>& rounds, Location location,
    absl::Time deadline, AgreeWaiter waiter) {
  const WaiterId id = waiter.id;
  const uint64_t round_index = location.round;
  Round& round = rounds[round_index];
  waiter.timer = timers_.Schedule(deadline, [this, id] { Expire(id); });
  round.proposals.emplace(location.rank, std::move(waiter));
  waiters_[id] = std::move(location);
  if (static_cast<int>(round.proposals.size()) < group.info.world_size) return {};
  for (auto& [r, w] : round.proposals) {
    timers_.Cancel(w.timer);
    waiters_.erase(w.id);
  }
  std::map<int, AgreeWaiter> ready = std::move(round.proposals);
  rounds.erase(round_index);
  return ready;
}

GroupRegistry::WaiterId GroupRegistry::Agree(const std::string& group_id, int rank,
                                             v1::Proposal proposal, absl::Time deadline,
                                             AgreeDone done) {
  absl::Status reject;
  WaiterId id = 0;
  std::map<int, AgreeWaiter> ready;
  std::vector<std::pair<std::string, std::shared_ptr<const AgreeResult>>> decided;
  uint64_t round_index = 0;
  int world_size = 0;
  std::vector<std::string> node_of_rank;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<FormedGroup*> found = FindFormedGroup(group_id, rank);
    if (!found.ok()) {
      reject = found.status();
    } else if (ProposalWorldSize(proposal) != (*found)->info.world_size) {
      reject = absl::InvalidArgumentError(absl::StrCat(
          proposal.has_plan() ? "proposal.plan.world_size: " : "proposal.template_request.world_size: ",
          ProposalWorldSize(proposal), " does not match the world size ",
          (*found)->info.world_size, " of group ", group_id));
    } else {
      FormedGroup& group = **found;
      group.last_used = absl::Now();
      world_size = group.info.world_size;
      round_index = group.next_round[rank]++;
      id = next_waiter_++;
      AgreeWaiter waiter;
      waiter.id = id;
      waiter.proposal = std::move(proposal);
      waiter.done = std::move(done);
      ready = AddToRound(group, group.rounds, Location{false, group_id, rank, round_index},
                         deadline, std::move(waiter));
      if (!ready.empty()) {
        decided.assign(group.decided.begin(), group.decided.end());
        for (const MemberInfo& m : group.info.members) node_of_rank.push_back(m.node_name);
      }
    }
  }
  if (!reject.ok()) {
    spdlog::info("event=agree_rejected group={} rank={} code={} msg=\"{}\"", group_id, rank,
                 absl::StatusCodeToString(reject.code()), std::string(reject.message()));
    done(reject);
    return 0;
  }
  if (ready.empty()) return id;

  // Every rank has proposed: decide outside the lock (building and validating a plan can take a
  // while), reusing an earlier decision when the proposals are the same as one already decided.
  std::vector<const v1::Proposal*> by_rank;
  for (auto& [r, w] : ready) by_rank.push_back(&w.proposal);
  absl::StatusOr<std::shared_ptr<const AgreeResult>> result;
  const std::string fingerprint = ProposalFingerprint(*by_rank[0]);
  bool all_same = true;
  for (int r = 1; r < world_size && all_same; ++r) {
    all_same = ProposalFingerprint(*by_rank[r]) == fingerprint;
  }
  bool reused = false;
  if (all_same) {
    for (auto& [fp, earlier] : decided) {
      if (fp == fingerprint) {
        result = earlier;
        reused = true;
      }
    }
  }
  if (!reused) result = DecideAgreement(group_id, world_size, by_rank, node_of_rank);
  {
    absl::MutexLock lock(&mu_);
    if (result.ok()) {
      ++stats_.agreements;
      if (!reused) {
        if (auto it = formed_.find(group_id); it != formed_.end()) {
          auto& cache = it->second.decided;
          cache.emplace_back(fingerprint, *result);
          if (cache.size() > 8) cache.pop_front();
        }
      }
    } else {
      ++stats_.agreements_failed;
    }
  }
  if (result.ok()) {
    spdlog::debug("event=agreed group={} round={} plan_hash={} reused={}", group_id, round_index,
                  (*result)->plan_hash, reused);
  } else {
    spdlog::info("event=agreement_failed group={} round={} code={} msg=\"{}\"", group_id,
                 round_index, absl::StatusCodeToString(result.status().code()),
                 std::string(result.status().message()));
  }
  for (auto& [r, w] : ready) {
    if (result.ok()) {
      w.done(AgreeOutcome{*result, round_index});
    } else {
      w.done(result.status());
    }
  }
  return id;
}

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
    spdlog::info("event=exchange_rejected group={} rank={} code={} msg=\"{}\"", group_id, rank,
                 absl::StatusCodeToString(reject.code()), std::string(reject.message()));
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
    const absl::Status status = absl::FailedPreconditionError(absl::StrCat(
        "exchange round ", round_index, " of group ", group_id,
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
        return absl::DeadlineExceededError(absl::StrCat(
            "group for job '", loc.key, "' did not form by rank ", loc.rank,
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
        return absl::DeadlineExceededError(absl::StrCat(
            what, " ", loc.round, " of group ", loc.key, " did not complete by rank ", loc.rank,
            "'s deadline: ranks ", FormatRanks(missing),
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
  spdlog::warn("event=group_failed job={} group={} code={} msg=\"{}\"", job_id,
               it->second.group_id, absl::StatusCodeToString(status.code()), std::string(status.message()));
  for (auto& [rank, waiter] : it->second.joined) {
    timers_.Cancel(waiter.timer);
    waiters_.erase(waiter.id);
    absl::Status mine = waiter.id == cancelled_waiter ? absl::CancelledError(cancelled_why) : status;
    deferred.push_back(
        [done = std::move(waiter.done), mine]() mutable { done(mine); });
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
  AddTombstone(group_id, absl::AbortedError(absl::StrCat("group ", group_id, " has failed: ",
                                                         status.message())));
}

void GroupRegistry::AddTombstone(const std::string& group_id, const absl::Status& status) {
  if (tombstones_.insert_or_assign(group_id, status).second) tombstone_order_.push_back(group_id);
  while (static_cast<int>(tombstone_order_.size()) > options_.tombstones) {
    tombstones_.erase(tombstone_order_.front());
    tombstone_order_.pop_front();
  }
}

void GroupRegistry::SweepIdle(absl::Time now, Deferred& deferred) {
  std::vector<std::string> idle;
  for (const auto& [id, group] : formed_) {
    if (group.rounds.empty() && group.exchanges.empty() &&
        now - group.last_used > options_.group_idle_ttl) {
      idle.push_back(id);
    }
  }
  for (const std::string& id : idle) {
    ++stats_.groups_expired;
    BreakGroup(id,
               absl::AbortedError(absl::StrCat("the group was idle longer than group_idle_ttl (",
                                               absl::FormatDuration(options_.group_idle_ttl),
                                               ")")),
               0, "", deferred);
  }
}

void GroupRegistry::SweepTick() {
  Deferred deferred;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return;
    SweepIdle(absl::Now(), deferred);
    timers_.Schedule(absl::Now() + sweep_interval_, [this] { SweepTick(); });
  }
  for (auto& fn : deferred) fn();
}

bool GroupRegistry::EvictIdlest(const std::string& job_id, absl::Time now, Deferred& deferred) {
  // Linear in the groups held, and only when the registry is full.
  const FormedGroup* idlest = nullptr;
  for (const auto& [id, group] : formed_) {
    if (!group.rounds.empty() || !group.exchanges.empty()) continue;
    if (idlest == nullptr || group.last_used < idlest->last_used) idlest = &group;
  }
  if (idlest == nullptr) return false;
  const std::string group_id = idlest->info.group_id;
  const absl::Duration idle = now - idlest->last_used;
  ++stats_.groups_evicted;
  BreakGroup(group_id,
             absl::AbortedError(absl::StrCat(
                 "the group was evicted after ", absl::FormatDuration(idle),
                 " without a call: daemon ", options_.daemon_name, " held max_groups (",
                 options_.max_groups, ") groups and job '", job_id, "' needed room")),
             0, "", deferred);
  return true;
}

void GroupRegistry::Shutdown(const std::string& why) {
  Deferred deferred;
  {
    absl::MutexLock lock(&mu_);
    if (!shutdown_) {
      shutdown_ = true;
      shutdown_why_ = why;
    }
    const absl::Status status = absl::UnavailableError(why);
    std::vector<std::string> jobs;
    for (const auto& [job, group] : pending_) jobs.push_back(job);
    for (const std::string& job : jobs) FailPending(job, status, 0, "", deferred);
    std::vector<std::string> groups;
    for (const auto& [id, group] : formed_) groups.push_back(id);
    for (const std::string& id : groups) BreakGroup(id, status, 0, "", deferred);
  }
  for (auto& fn : deferred) fn();
}

RegistryStats GroupRegistry::Stats() const {
  absl::MutexLock lock(&mu_);
  RegistryStats stats = stats_;
  stats.groups_live = formed_.size();
  for (const auto& [id, loc] : waiters_) {
    if (loc.is_join) {
      ++stats.pending_joins;
    } else {
      ++stats.pending_agreements;
    }
  }
  return stats;
}

}  // namespace syncopate::server
