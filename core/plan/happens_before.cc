// Happens-before over a plan's transfers (validate_internal.h).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/plan/validate_internal.h"

namespace syncopate::plan::validation {
namespace {

constexpr int64_t kMaxClockEntries = int64_t{1} << 27;

}  // namespace

std::string Describe(const Transfer& t) {
  return absl::StrCat("rank ", t.rank, " transfer ", t.id, " (channel ", t.channel, ", chunk ",
                      t.chunk, ")");
}

absl::Status Order::Build(const Plan& plan, const std::vector<const Transfer*>& by_id) {
  const int n = static_cast<int>(by_id.size());
  preds_.assign(n, {});
  chan_.assign(n, 0);
  pos_.assign(n, 0);
  int num_channels = 0;
  for (const RankPlan& rp : plan.ranks) {
    for (const auto& ch : rp.channels) {
      for (size_t i = 0; i < ch.size(); ++i) {
        chan_[ch[i].id] = num_channels;
        pos_[ch[i].id] = static_cast<int>(i);
        if (i > 0) preds_[ch[i].id].push_back(ch[i - 1].id);
      }
      ++num_channels;
    }
  }
  for (const Transfer* t : by_id) {
    for (int dep : t->deps) preds_[t->id].push_back(dep);
  }
  RETURN_IF_ERROR(TopologicalSort(by_id));
  return BuildClocks(num_channels);
}

bool Order::Before(int a, int b) const {
  if (a == b) return false;
  const auto& clock = clock_[b];
  auto it = std::lower_bound(clock.begin(), clock.end(), std::make_pair(chan_[a], -1));
  return it != clock.end() && it->first == chan_[a] && it->second >= pos_[a];
}

absl::Status Order::TopologicalSort(const std::vector<const Transfer*>& by_id) {
  const int n = static_cast<int>(preds_.size());
  std::vector<std::vector<int>> succs(n);
  std::vector<int> indegree(n, 0);
  for (int t = 0; t < n; ++t) {
    for (int p : preds_[t]) {
      succs[p].push_back(t);
      ++indegree[t];
    }
  }
  topo_.clear();
  for (int t = 0; t < n; ++t) {
    if (indegree[t] == 0) topo_.push_back(t);
  }
  for (size_t i = 0; i < topo_.size(); ++i) {
    for (int s : succs[topo_[i]]) {
      if (--indegree[s] == 0) topo_.push_back(s);
    }
  }
  if (static_cast<int>(topo_.size()) == n) return absl::OkStatus();
  return CycleError(by_id, indegree);
}

absl::Status Order::CycleError(const std::vector<const Transfer*>& by_id,
                               const std::vector<int>& indegree) const {
  int v = 0;
  while (indegree[v] == 0) ++v;
  std::vector<int> path;
  std::vector<int> seen_at(preds_.size(), -1);
  while (seen_at[v] < 0) {
    seen_at[v] = static_cast<int>(path.size());
    path.push_back(v);
    for (int p : preds_[v]) {
      if (indegree[p] > 0) {
        v = p;
        break;
      }
    }
  }
  std::string text = "dependency cycle: ";
  for (size_t i = seen_at[v]; i < path.size(); ++i) {
    const Transfer& t = *by_id[path[i]];
    const int next = i + 1 < path.size() ? path[i + 1] : v;
    const bool is_dep = std::find(t.deps.begin(), t.deps.end(), next) != t.deps.end();
    absl::StrAppend(&text, Describe(t), is_dep ? " waits for " : " runs after (channel order) ");
  }
  absl::StrAppend(&text, Describe(*by_id[v]));
  return absl::InvalidArgumentError(text);
}

absl::Status Order::BuildClocks(int num_channels) {
  const int n = static_cast<int>(preds_.size());
  clock_.assign(n, {});
  std::vector<int> best(num_channels, -1);
  std::vector<int> touched;
  int64_t entries = 0;
  for (int t : topo_) {
    for (int p : preds_[t]) {
      for (const auto& [ch, pos] : clock_[p]) {
        if (best[ch] < 0) touched.push_back(ch);
        best[ch] = std::max(best[ch], pos);
      }
    }
    if (best[chan_[t]] < 0) touched.push_back(chan_[t]);
    best[chan_[t]] = std::max(best[chan_[t]], pos_[t]);
    std::sort(touched.begin(), touched.end());
    auto& clock = clock_[t];
    clock.reserve(touched.size());
    for (int ch : touched) {
      clock.emplace_back(ch, best[ch]);
      best[ch] = -1;
    }
    touched.clear();
    entries += static_cast<int64_t>(clock.size());
    if (entries > kMaxClockEntries) {
      return absl::UnimplementedError(absl::StrCat(
          "plan too large to validate: ordering information exceeds ", kMaxClockEntries,
          " entries (", n, " transfers over ", num_channels, " channels)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace syncopate::plan::validation
