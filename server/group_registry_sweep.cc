// GroupRegistry, idle groups (see group_registry.h): there is no "leave" call, so a formed group
// with no call waiting in it is broken after group_idle_ttl without a call (on the registry's own
// timer, not only on new traffic), and, when a new job needs room at max_groups, the group idle
// longest is evicted.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/group_registry.h"

namespace syncopate::server {

absl::Duration GroupRegistry::SweepIntervalFor(const Options& options) {
  if (options.sweep_interval > absl::ZeroDuration()) return options.sweep_interval;
  return std::clamp(options.group_idle_ttl / 4, absl::Milliseconds(10), absl::Seconds(60));
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
                                               absl::FormatDuration(options_.group_idle_ttl), ")")),
               0, "", deferred);
  }
}

void GroupRegistry::SweepTick() {
  Deferred deferred;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return;
    SweepIdle(absl::Now(), deferred);
    timers_.ScheduleAfter(sweep_interval_, [this] { SweepTick(); });
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

}  // namespace syncopate::server
