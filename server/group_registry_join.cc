// GroupRegistry, group formation (see group_registry.h): Join admits a rank into its job's pending
// group (superseding the job's formed group, making room at max_groups), and Form turns a pending
// group whose ranks have all arrived into a formed one.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/group_registry.h"
#include "spdlog/spdlog.h"

namespace syncopate::server {

GroupRegistry::WaiterId GroupRegistry::Join(const std::string& job_id, int world_size,
                                            MemberInfo member, absl::Time deadline, JoinDone done) {
  Deferred deferred;
  absl::Status reject;
  WaiterId id = 0;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    SweepIdle(now, deferred);
    absl::StatusOr<PendingGroup*> group =
        OpenPendingGroup(job_id, world_size, member, now, deferred);
    if (!group.ok()) {
      reject = group.status();
    } else {
      absl::StatusOr<WaiterId> added =
          AddJoiner(**group, world_size, member, deadline, done, deferred);
      if (added.ok()) {
        id = *added;
      } else {
        reject = added.status();
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

absl::StatusOr<GroupRegistry::PendingGroup*> GroupRegistry::OpenPendingGroup(
    const std::string& job_id, int world_size, const MemberInfo& member, absl::Time now,
    Deferred& deferred) {
  if (shutdown_) return absl::UnavailableError(shutdown_why_);
  if (auto formed = formed_by_job_.find(job_id); formed != formed_by_job_.end()) {
    const std::string old_group = formed->second;
    BreakGroup(old_group,
               absl::AbortedError(absl::StrCat("group ", old_group, " of job '", job_id,
                                               "' was superseded: ", Describe(member),
                                               " joined a new group with the same job id")),
               0, "", deferred);
  }
  if (auto it = pending_.find(job_id); it != pending_.end()) return &it->second;
  if (static_cast<int>(pending_.size() + formed_.size()) >= options_.max_groups &&
      !EvictIdlest(job_id, now, deferred)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("daemon ", options_.daemon_name, " already holds ", options_.max_groups,
                     " groups (max_groups), each forming or with a call in flight; job '", job_id,
                     "' cannot start another"));
  }
  PendingGroup group;
  group.group_id = absl::StrCat(job_id, "#", incarnation_, "-", next_group_++);
  group.job_id = job_id;
  group.world_size = world_size;
  group.founder = Describe(member);
  return &pending_.emplace(job_id, std::move(group)).first->second;
}

absl::StatusOr<GroupRegistry::WaiterId> GroupRegistry::AddJoiner(
    PendingGroup& group, int world_size, const MemberInfo& member, absl::Time deadline,
    JoinDone& done, Deferred& deferred) {
  const std::string& job_id = group.job_id;
  if (group.world_size != world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "world_size: ", world_size, " from ", Describe(member), " does not match the world size ",
        group.world_size, " of job '", job_id, "' set by ", group.founder));
  }
  if (auto dup = group.joined.find(member.rank); dup != group.joined.end()) {
    return absl::InvalidArgumentError(absl::StrCat("rank: ", member.rank, " already joined job '",
                                                   job_id, "' as ", Describe(dup->second.member),
                                                   "; ", Describe(member),
                                                   " is a duplicate (each rank joins once)"));
  }
  const WaiterId id = next_waiter_++;
  JoinWaiter waiter;
  waiter.id = id;
  waiter.member = member;
  waiter.done = std::move(done);
  waiter.timer = timers_.Schedule(deadline, [this, id] { Expire(id); });
  waiters_[id] = Location{true, job_id, member.rank, 0};
  const int rank = member.rank;
  group.joined.emplace(rank, std::move(waiter));
  spdlog::debug("event=join job={} rank={} joined={}/{}", job_id, rank, group.joined.size(),
                group.world_size);
  if (static_cast<int>(group.joined.size()) == group.world_size) {
    Form(group, deferred);
    // Copied: erasing the entry destroys `group`, which `job_id` refers into.
    pending_.erase(std::string(job_id));
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
    deferred.push_back(
        [done = std::move(waiter.done), info = formed.info]() mutable { done(std::move(info)); });
  }
  spdlog::info("event=group_formed job={} group={} world_size={}", pending.job_id, pending.group_id,
               pending.world_size);
  ++stats_.groups_formed;
  formed_by_job_[pending.job_id] = pending.group_id;
  const std::string group_id = pending.group_id;
  formed_.emplace(group_id, std::move(formed));
}

}  // namespace syncopate::server
