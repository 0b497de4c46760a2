// See ucx_bootstrap.h.
#include "client/ucx_bootstrap.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "absl/strings/str_cat.h"

namespace syncopate {

ucx::NodeMap NodeMapOf(const Group& group) {
  // Members arrive in rank order; index by rank anyway, the map must not depend on it.
  ucx::NodeMap nodes(group.world_size, -1);
  std::map<std::string, int> ids;
  int next = 0;
  std::vector<const Member*> by_rank(group.world_size, nullptr);
  for (const Member& m : group.members) {
    if (m.rank >= 0 && m.rank < group.world_size) by_rank[m.rank] = &m;
  }
  for (int r = 0; r < group.world_size; ++r) {
    if (by_rank[r] == nullptr || by_rank[r]->node_name.empty()) {
      nodes[r] = next++;
      continue;
    }
    auto [it, inserted] = ids.emplace(by_rank[r]->node_name, next);
    if (inserted) ++next;
    nodes[r] = it->second;
  }
  return nodes;
}

absl::StatusOr<std::vector<std::string>> DaemonBootstrap::AllGather(absl::string_view mine,
                                                                    absl::Time deadline) {
  return Round("allgather", mine, deadline);
}

absl::Status DaemonBootstrap::Barrier(absl::Time deadline) {
  return Round("barrier", {}, deadline).status();
}

absl::StatusOr<std::vector<std::string>> DaemonBootstrap::Round(absl::string_view what,
                                                                absl::string_view mine,
                                                                absl::Time deadline) {
  // The key names the call's kind as well as its index, so a rank calling Barrier where the
  // others call AllGather is reported as out of step rather than returning empty blobs.
  const std::string key = absl::StrCat(prefix_, ".", calls_++, ".", what);
  // The daemon waits by a timeout, not an absolute time; at least 1 ms, so a deadline that has
  // just passed still yields DEADLINE_EXCEEDED from the daemon (naming the missing ranks).
  const int64_t ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - absl::Now()));
  Result<std::vector<std::string>> blobs =
      client_.Exchange(group_, key, std::string(mine), std::chrono::milliseconds(ms));
  if (!blobs.ok()) {
    const absl::Status status = ToAbsl(blobs.status());
    return absl::Status(status.code(),
                        absl::StrCat("bootstrap ", key, " of rank ", group_.rank, ": ",
                                     status.message()));
  }
  return std::move(blobs).value();
}

}  // namespace syncopate
