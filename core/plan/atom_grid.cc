// Atom grids of a plan's buffers (validate_internal.h).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/plan/validate_internal.h"

namespace syncopate::plan::validation {
namespace {

constexpr int64_t kElementFallbackLimit = int64_t{1} << 22;
constexpr int64_t kMaxAtomsPerBuffer = int64_t{1} << 24;

// True when the two regions have the same non-empty boxes' extents, box by box: element k then
// maps by a per-box translation, so atoms map one to one once cuts agree.
bool BoxWise(const Region& a, const Region& b) {
  std::vector<const Box*> x, y;
  for (const Box& box : a.boxes()) {
    if (!box.Empty()) x.push_back(&box);
  }
  for (const Box& box : b.boxes()) {
    if (!box.Empty()) y.push_back(&box);
  }
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i]->rank() != y[i]->rank() || x[i]->Extents() != y[i]->Extents()) return false;
  }
  return true;
}

// Copies the cuts strictly inside [from_lo, from_lo + len) of `from` to `to`, shifted.
bool Translate(const std::set<int64_t>& from, int64_t from_lo, int64_t len, std::set<int64_t>& to,
               int64_t to_lo) {
  std::vector<int64_t> add;
  for (auto it = from.upper_bound(from_lo); it != from.end() && *it < from_lo + len; ++it) {
    if (!to.count(*it - from_lo + to_lo)) add.push_back(*it - from_lo + to_lo);
  }
  to.insert(add.begin(), add.end());
  return !add.empty();
}

}  // namespace

std::vector<int64_t> AtomsInOrder(const Grid& grid, const Region& region) {
  std::vector<int64_t> out;
  for (const Box& box : region.boxes()) {
    if (box.Empty()) continue;
    const int r = box.rank();
    std::vector<int64_t> lo(r), hi(r);
    for (int a = 0; a < r; ++a) {
      const auto& cuts = grid.cuts[a];
      lo[a] = std::lower_bound(cuts.begin(), cuts.end(), box.lo[a]) - cuts.begin();
      hi[a] = std::lower_bound(cuts.begin(), cuts.end(), box.hi[a]) - cuts.begin();
    }
    std::vector<int64_t> idx = lo;
    while (true) {
      int64_t atom = 0;
      for (int a = 0; a < r; ++a) atom += idx[a] * grid.stride[a];
      out.push_back(atom);
      int a = r - 1;
      for (; a >= 0; --a) {
        if (++idx[a] < hi[a]) break;
        idx[a] = lo[a];
      }
      if (a < 0) break;
    }
  }
  return out;
}

Box AtomBox(const Grid& grid, int64_t atom) {
  Box box;
  for (size_t a = 0; a < grid.cuts.size(); ++a) {
    const int64_t count = static_cast<int64_t>(grid.cuts[a].size()) - 1;
    const int64_t i = (atom / grid.stride[a]) % count;
    box.lo.push_back(grid.cuts[a][i]);
    box.hi.push_back(grid.cuts[a][i + 1]);
  }
  return box;
}

GridBuilder::GridBuilder(const Plan& plan) : plan_(plan) {
  sets_.resize(plan.buffers.size());
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const Shape& shape = plan.buffers[b].shape;
    sets_[b].resize(shape.size());
    for (size_t a = 0; a < shape.size(); ++a) sets_[b][a] = {0, shape[a]};
  }
}

void GridBuilder::AddRegion(int buffer, const Region& region) {
  for (const Box& box : region.boxes()) {
    if (box.Empty()) continue;
    for (int a = 0; a < box.rank(); ++a) {
      sets_[buffer][a].insert(box.lo[a]);
      sets_[buffer][a].insert(box.hi[a]);
    }
  }
}

absl::Status GridBuilder::AddMapping(Mapping m) {
  AddRegion(m.src_buffer, *m.src);
  AddRegion(m.dst_buffer, *m.dst);
  if (BoxWise(*m.src, *m.dst)) {
    box_wise_.push_back(std::move(m));
    return absl::OkStatus();
  }
  if (m.src->NumElements() >= kElementFallbackLimit) {
    return absl::UnimplementedError(absl::StrCat(
        m.who, ": source ", plan_.buffers[m.src_buffer].name, m.src->ToString(),
        " and destination ", plan_.buffers[m.dst_buffer].name, m.dst->ToString(),
        " have different box decompositions and ", m.src->NumElements(),
        " elements; element-level validation supports fewer than ", kElementFallbackLimit));
  }
  // Element-level: every element of both regions becomes its own atom.
  AddElementCuts(m.src_buffer, *m.src);
  AddElementCuts(m.dst_buffer, *m.dst);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Grid>> GridBuilder::Build() {
  RETURN_IF_ERROR(Propagate());
  std::vector<Grid> grids(sets_.size());
  for (size_t b = 0; b < sets_.size(); ++b) {
    Grid& g = grids[b];
    const int r = static_cast<int>(sets_[b].size());
    g.stride.assign(r, 1);
    g.cuts.resize(r);
    for (int a = 0; a < r; ++a) g.cuts[a].assign(sets_[b][a].begin(), sets_[b][a].end());
    g.num_atoms = 1;
    for (int a = r - 1; a >= 0; --a) {
      g.stride[a] = g.num_atoms;
      g.num_atoms *= std::max<int64_t>(1, static_cast<int64_t>(g.cuts[a].size()) - 1);
      if (g.num_atoms > kMaxAtomsPerBuffer) return TooManyAtoms(b);
    }
  }
  return grids;
}

void GridBuilder::AddElementCuts(int buffer, const Region& region) {
  for (const Box& box : region.boxes()) {
    if (box.Empty()) continue;
    for (int a = 0; a < box.rank(); ++a) {
      for (int64_t x = box.lo[a]; x <= box.hi[a]; ++x) sets_[buffer][a].insert(x);
    }
  }
}

absl::Status GridBuilder::Propagate() {
  for (int pass = 0;; ++pass) {
    bool changed = false;
    for (const Mapping& m : box_wise_) {
      std::vector<const Box*> x, y;
      for (const Box& box : m.src->boxes()) {
        if (!box.Empty()) x.push_back(&box);
      }
      for (const Box& box : m.dst->boxes()) {
        if (!box.Empty()) y.push_back(&box);
      }
      for (size_t i = 0; i < x.size(); ++i) {
        for (int a = 0; a < x[i]->rank(); ++a) {
          const int64_t len = x[i]->hi[a] - x[i]->lo[a];
          auto& s = sets_[m.src_buffer][a];
          auto& d = sets_[m.dst_buffer][a];
          changed |= Translate(s, x[i]->lo[a], len, d, y[i]->lo[a]);
          changed |= Translate(d, y[i]->lo[a], len, s, x[i]->lo[a]);
        }
      }
    }
    if (!changed) return absl::OkStatus();
    for (size_t b = 0; b < sets_.size(); ++b) {
      int64_t atoms = 1;
      for (const auto& s : sets_[b])
        atoms *= std::max<int64_t>(1, static_cast<int64_t>(s.size()) - 1);
      if (atoms > kMaxAtomsPerBuffer) return TooManyAtoms(b);
    }
  }
}

absl::Status GridBuilder::TooManyAtoms(size_t buffer) const {
  return absl::UnimplementedError(
      absl::StrCat("plan too large to validate: the regions cut buffer \"",
                   plan_.buffers[buffer].name, "\" into more than ", kMaxAtomsPerBuffer, " atoms"));
}

}  // namespace syncopate::plan::validation
