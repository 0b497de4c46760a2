// See group_registry.h. This file: construction, Shutdown, Stats, and the round plumbing Agree and
// Exchange share (finding a formed group, entering a round). The other parts of the class are in
// group_registry_{join,agree,exchange,failure,sweep}.cc.
#include "server/group_registry.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"

namespace syncopate::server {
namespace {

std::string RandomHex() {
  std::random_device device;
  return absl::StrFormat("%08x", device());
}

}  // namespace

GroupRegistry::GroupRegistry(Options options)
    : options_(std::move(options)),
      sweep_interval_(SweepIntervalFor(options_)),
      incarnation_(RandomHex()) {
  // Sweeping on a timer, not only on Join: a node with no new jobs still lets idle groups go.
  timers_.ScheduleAfter(sweep_interval_, [this] { SweepTick(); });
}

GroupRegistry::~GroupRegistry() { Shutdown("the group registry is being destroyed"); }

void GroupRegistry::LogRejected(std::string_view event, const std::string& group_id, int rank,
                                const absl::Status& why) {
  spdlog::info("event={} group={} rank={} code={} msg=\"{}\"", event, group_id, rank,
               absl::StatusCodeToString(why.code()), std::string(why.message()));
}

std::string GroupRegistry::Describe(const MemberInfo& member) {
  std::string text = absl::StrCat("rank ", member.rank);
  if (!member.node_name.empty()) absl::StrAppend(&text, " (node ", member.node_name);
  if (!member.daemon.empty()) {
    absl::StrAppend(&text, member.node_name.empty() ? " (" : ", ", "via daemon ", member.daemon);
  }
  if (!member.node_name.empty() || !member.daemon.empty()) text += ")";
  return text;
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
