// See plain_reductions.h.
#include "jit/compiler/plain_reductions.h"

#include <map>
#include <string>
#include <utility>

#include "jit/compiler/byte_extents.h"

namespace syncopate::jit {
namespace {

// Ancestors (transitive deps) of a transfer, computed on first use.
class DepClosure {
 public:
  explicit DepClosure(const std::vector<const plan::Transfer*>& by_id) : by_id_(by_id) {}

  // Whether `earlier` completes before `later` starts through a chain of deps.
  bool Precedes(int earlier, int later) { return Ancestors(later)[earlier]; }

 private:
  const std::vector<bool>& Ancestors(int id) {
    auto it = ancestors_.find(id);
    if (it != ancestors_.end()) return it->second;
    std::vector<bool> seen(by_id_.size(), false);
    std::vector<int> stack(by_id_[id]->deps.begin(), by_id_[id]->deps.end());
    while (!stack.empty()) {
      const int d = stack.back();
      stack.pop_back();
      if (d < 0 || d >= static_cast<int>(seen.size()) || seen[d]) continue;
      seen[d] = true;
      stack.insert(stack.end(), by_id_[d]->deps.begin(), by_id_[d]->deps.end());
    }
    return ancestors_.emplace(id, std::move(seen)).first->second;
  }

  const std::vector<const plan::Transfer*>& by_id_;
  std::map<int, std::vector<bool>> ancestors_;
};

}  // namespace

std::vector<bool> PlainReductions(const std::vector<const plan::Transfer*>& by_id,
                                  const LoweredSchedule& lw) {
  const int n = static_cast<int>(by_id.size());
  std::vector<ByteExtent> dst;
  dst.reserve(n);
  // Writers grouped by destination (rank, buffer): only those can overlap.
  std::map<std::pair<int, std::string>, std::vector<int>> writers;
  for (int id = 0; id < n; ++id) {
    dst.push_back(SideExtent(lw, id, /*source=*/false));
    writers[{dst[id].rank, *dst[id].buffer}].push_back(id);
  }
  DepClosure closure(by_id);
  std::vector<bool> plain(n, false);
  for (int id = 0; id < n; ++id) {
    if (by_id[id]->reduce == plan::ReduceOp::kNone || lw.transfers[id].inter_node) continue;
    bool alone = true;
    for (int other : writers[{dst[id].rank, *dst[id].buffer}]) {
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
