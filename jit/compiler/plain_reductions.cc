// See plain_reductions.h.
#include "jit/compiler/plain_reductions.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "jit/compiler/byte_extents.h"

namespace syncopate::jit {
namespace {

// Reachability over deps, one search per question: no per-transfer ancestor sets, whose
// memory grows with transfers squared (a direct plan at world 64 asks about every reduction).
class DepClosure {
 public:
  explicit DepClosure(const std::vector<const plan::Transfer*>& by_id)
      : by_id_(by_id), seen_(by_id.size(), 0) {}

  // Whether `earlier` completes before `later` starts through a chain of deps.
  bool Precedes(int earlier, int later) {
    ++search_;
    stack_.assign(by_id_[later]->deps.begin(), by_id_[later]->deps.end());
    while (!stack_.empty()) {
      const int d = stack_.back();
      stack_.pop_back();
      if (d < 0 || d >= static_cast<int>(seen_.size()) || seen_[d] == search_) continue;
      if (d == earlier) return true;
      seen_[d] = search_;
      stack_.insert(stack_.end(), by_id_[d]->deps.begin(), by_id_[d]->deps.end());
    }
    return false;
  }

 private:
  const std::vector<const plan::Transfer*>& by_id_;
  std::vector<uint64_t> seen_;  // == search_: visited in the current search
  uint64_t search_ = 0;
  std::vector<int> stack_;
};

}  // namespace

std::vector<bool> PlainReductions(const std::vector<const plan::Transfer*>& by_id,
                                  const LoweredSchedule& lw) {
  const int n = static_cast<int>(by_id.size());
  std::vector<ByteExtent> dst;
  dst.reserve(n);
  // Writers grouped by destination (rank, buffer): only those can overlap. Each transfer keeps
  // its group (map nodes are stable), so the loop below looks nothing up.
  std::map<std::pair<int, std::string>, std::vector<int>> writers;
  std::vector<const std::vector<int>*> group(n);
  for (int id = 0; id < n; ++id) {
    dst.push_back(SideExtent(lw, id, /*source=*/false));
    std::vector<int>& g = writers[{dst[id].rank, *dst[id].buffer}];
    g.push_back(id);
    group[id] = &g;
  }
  DepClosure closure(by_id);
  std::vector<bool> plain(n, false);
  for (int id = 0; id < n; ++id) {
    if (by_id[id]->reduce == plan::ReduceOp::kNone || lw.transfers[id].inter_node) continue;
    bool alone = true;
    for (int other : *group[id]) {
      if (other == id || !Overlap(dst[id], dst[other])) continue;
      if (!closure.Precedes(other, id) && !closure.Precedes(id, other)) {
        alone = false;
        break;
      }
    }
    plain[id] = alone;
  }
  return plain;
}

}  // namespace syncopate::jit
