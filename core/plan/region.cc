// Region arithmetic: box intersection/difference, splitting, printing and parsing.
// Pure functions on value types; thread-compatible (no shared state).
#include "core/plan/region.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace syncopate::plan {
namespace {

// The intersection of two boxes of equal rank; may be empty (some hi <= lo).
Box IntersectBoxes(const Box& a, const Box& b) {
  Box out;
  out.lo.resize(a.lo.size());
  out.hi.resize(a.lo.size());
  for (size_t i = 0; i < a.lo.size(); ++i) {
    out.lo[i] = std::max(a.lo[i], b.lo[i]);
    out.hi[i] = std::min(a.hi[i], b.hi[i]);
  }
  return out;
}

bool BoxesOverlap(const Box& a, const Box& b) {
  if (a.rank() != b.rank()) return false;
  return !IntersectBoxes(a, b).Empty() && !a.Empty() && !b.Empty();
}

// a \ b as disjoint boxes: peel slabs below and above b's range axis by axis, narrowing the
// remainder to b's range on that axis before moving to the next.
void SubtractBox(const Box& a, const Box& b, std::vector<Box>& out) {
  if (a.Empty()) return;
  if (!BoxesOverlap(a, b)) {
    out.push_back(a);
    return;
  }
  Box rest = a;
  for (int axis = 0; axis < a.rank(); ++axis) {
    if (rest.lo[axis] < b.lo[axis]) {
      Box below = rest;
      below.hi[axis] = b.lo[axis];
      out.push_back(below);
      rest.lo[axis] = b.lo[axis];
    }
    if (rest.hi[axis] > b.hi[axis]) {
      Box above = rest;
      above.lo[axis] = b.hi[axis];
      out.push_back(above);
      rest.hi[axis] = b.hi[axis];
    }
  }
  // `rest` is now a∩b and is dropped.
}

// Subtracts every box of `minus` from every box of `from`.
std::vector<Box> SubtractAll(std::vector<Box> from, const std::vector<Box>& minus) {
  for (const Box& m : minus) {
    std::vector<Box> next;
    for (const Box& f : from) SubtractBox(f, m, next);
    from = std::move(next);
    if (from.empty()) break;
  }
  return from;
}

// Appends boxes covering the row-major element range [a, b) of `box`, restricted to axes >= axis
// (axes before `axis` are already narrowed to a single index).
void EmitRange(Box box, int axis, int64_t a, int64_t b, std::vector<Box>& out) {
  if (a >= b) return;
  if (axis == box.rank()) {  // rank-0 box: exactly one element
    out.push_back(box);
    return;
  }
  int64_t inner = 1;
  for (int i = axis + 1; i < box.rank(); ++i) inner *= box.hi[i] - box.lo[i];
  const int64_t base = box.lo[axis];
  int64_t first_row = a / inner;
  const int64_t last_row = (b - 1) / inner;  // inclusive
  if (a % inner != 0) {                      // leading partial row
    const int64_t row_end = std::min(b, (first_row + 1) * inner);
    Box row = box;
    row.lo[axis] = base + first_row;
    row.hi[axis] = base + first_row + 1;
    EmitRange(row, axis + 1, a - first_row * inner, row_end - first_row * inner, out);
    if (row_end == b) return;
    ++first_row;
  }
  // Full rows [first_row, full_end).
  const int64_t full_end = (b % inner == 0) ? last_row + 1 : last_row;
  if (full_end > first_row) {
    Box rows = box;
    rows.lo[axis] = base + first_row;
    rows.hi[axis] = base + full_end;
    out.push_back(rows);
  }
  if (b % inner != 0 && last_row >= first_row) {  // trailing partial row
    Box row = box;
    row.lo[axis] = base + last_row;
    row.hi[axis] = base + last_row + 1;
    EmitRange(row, axis + 1, 0, b - last_row * inner, out);
  }
}

std::string BoxToString(const Box& box) {
  std::string out = "[";
  for (int i = 0; i < box.rank(); ++i) {
    if (i > 0) out += ",";
    absl::StrAppend(&out, box.lo[i], ":", box.hi[i]);
  }
  out += ")";
  return out;
}

// A tiny cursor-based parser for the ToString form.
class RegionParser {
 public:
  explicit RegionParser(std::string_view text) : text_(text) {}

  absl::StatusOr<Region> Parse() {
    SkipSpace();
    if (Consume("[]")) {
      SkipSpace();
      if (pos_ != text_.size()) return Error("trailing characters after \"[]\"");
      return Region();
    }
    std::vector<Box> boxes;
    while (true) {
      absl::StatusOr<Box> box = ParseBox();
      if (!box.ok()) return box.status();
      if (!boxes.empty() && box->rank() != boxes.front().rank()) {
        return Error(absl::StrCat("box of rank ", box->rank(), " in a region of rank ",
                                  boxes.front().rank()));
      }
      boxes.push_back(*std::move(box));
      SkipSpace();
      if (pos_ == text_.size()) break;
      if (!Consume("+")) return Error("expected '+' between boxes");
      SkipSpace();
    }
    return Region(std::move(boxes));
  }

 private:
  absl::StatusOr<Box> ParseBox() {
    if (!Consume("[")) return Error("expected '['");
    Box box;
    SkipSpace();
    if (Consume(")")) return box;  // rank-0 box
    while (true) {
      SkipSpace();
      absl::StatusOr<int64_t> lo = ParseInt();
      if (!lo.ok()) return lo.status();
      SkipSpace();
      if (!Consume(":")) return Error("expected ':' between bounds");
      SkipSpace();
      absl::StatusOr<int64_t> hi = ParseInt();
      if (!hi.ok()) return hi.status();
      if (*hi < *lo) return Error(absl::StrCat("upper bound ", *hi, " below lower bound ", *lo));
      box.lo.push_back(*lo);
      box.hi.push_back(*hi);
      SkipSpace();
      if (Consume(")")) return box;
      if (!Consume(",")) return Error("expected ',' or ')'");
    }
  }

  absl::StatusOr<int64_t> ParseInt() {
    int64_t value = 0;
    const char* begin = text_.data() + pos_;
    const char* end = text_.data() + text_.size();
    auto [ptr, ec] = std::from_chars(begin, end, value);
    if (ec != std::errc() || ptr == begin) return Error("expected an integer");
    pos_ += ptr - begin;
    return value;
  }

  bool Consume(std::string_view token) {
    if (text_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("bad region \"", std::string(text_),
                                                   "\" at offset ", pos_, ": ", std::string(what)));
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

int64_t Box::NumElements() const {
  int64_t n = 1;
  for (size_t i = 0; i < lo.size(); ++i) {
    if (hi[i] <= lo[i]) return 0;
    n *= hi[i] - lo[i];
  }
  return n;
}

std::vector<int64_t> Box::Extents() const {
  std::vector<int64_t> e(lo.size());
  for (size_t i = 0; i < lo.size(); ++i) e[i] = std::max<int64_t>(0, hi[i] - lo[i]);
  return e;
}

Region::Region(std::vector<Box> boxes) : boxes_(std::move(boxes)) {}

Region Region::Whole(const Shape& shape) {
  Box box;
  box.lo.assign(shape.size(), 0);
  box.hi = shape;
  return Region({box});
}

Region Region::Slab(const Shape& shape, int axis, int64_t begin, int64_t end) {
  Box box;
  box.lo.assign(shape.size(), 0);
  box.hi = shape;
  box.lo[axis] = begin;
  box.hi[axis] = end;
  return Region({box});
}

int64_t Region::NumElements() const {
  int64_t n = 0;
  for (const Box& b : boxes_) n += b.NumElements();
  return n;
}

bool Region::Intersects(const Region& other) const {
  for (const Box& a : boxes_) {
    for (const Box& b : other.boxes_) {
      if (BoxesOverlap(a, b)) return true;
    }
  }
  return false;
}

Region Region::Intersect(const Region& other) const {
  std::vector<Box> out;
  for (const Box& a : boxes_) {
    // Pieces of `a` covered by `other`, made disjoint so overlapping boxes of `other` do not
    // duplicate elements.
    std::vector<Box> pieces;
    for (const Box& b : other.boxes_) {
      if (!BoxesOverlap(a, b)) continue;
      std::vector<Box> fresh = SubtractAll({IntersectBoxes(a, b)}, pieces);
      pieces.insert(pieces.end(), fresh.begin(), fresh.end());
    }
    out.insert(out.end(), pieces.begin(), pieces.end());
  }
  return Region(std::move(out));
}

bool Region::Contains(const Region& other) const {
  for (const Box& b : other.boxes_) {
    if (b.Empty()) continue;
    if (!SubtractAll({b}, boxes_).empty()) return false;
  }
  return true;
}

bool Region::InsideShape(const Shape& shape) const {
  for (const Box& b : boxes_) {
    if (b.rank() != static_cast<int>(shape.size()) || b.hi.size() != b.lo.size()) return false;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (b.lo[i] < 0 || b.hi[i] > shape[i] || b.hi[i] < b.lo[i]) return false;
    }
  }
  return true;
}

bool Region::BoxesDisjoint() const {
  for (size_t i = 0; i < boxes_.size(); ++i) {
    for (size_t j = i + 1; j < boxes_.size(); ++j) {
      if (BoxesOverlap(boxes_[i], boxes_[j])) return false;
    }
  }
  return true;
}

std::vector<Region> Region::SplitAxis(int axis, int n) const {
  std::vector<std::vector<Box>> pieces(std::max(n, 0));
  for (const Box& box : boxes_) {
    const int64_t extent = std::max<int64_t>(0, box.hi[axis] - box.lo[axis]);
    int64_t at = box.lo[axis];
    for (int i = 0; i < n; ++i) {
      const int64_t len = extent / n + (i < extent % n ? 1 : 0);
      if (len > 0 && !box.Empty()) {
        Box part = box;
        part.lo[axis] = at;
        part.hi[axis] = at + len;
        pieces[i].push_back(part);
      }
      at += len;
    }
  }
  std::vector<Region> out;
  out.reserve(pieces.size());
  for (auto& p : pieces) out.emplace_back(std::move(p));
  return out;
}

std::vector<Region> Region::SplitElements(int n) const {
  std::vector<std::vector<Box>> pieces(std::max(n, 0));
  if (n <= 0) return {};
  const int64_t total = NumElements();
  int piece = 0;
  int64_t piece_left = total / n + (0 < total % n ? 1 : 0);
  for (const Box& box : boxes_) {
    const int64_t size = box.NumElements();
    int64_t at = 0;
    while (at < size) {
      while (piece_left == 0 && piece + 1 < n) {
        ++piece;
        piece_left = total / n + (piece < total % n ? 1 : 0);
      }
      const int64_t take = std::min(size - at, piece_left);
      EmitRange(box, 0, at, at + take, pieces[piece]);
      at += take;
      piece_left -= take;
    }
  }
  std::vector<Region> out;
  out.reserve(pieces.size());
  for (auto& p : pieces) out.emplace_back(std::move(p));
  return out;
}

std::vector<int64_t> Region::Offsets(const std::vector<int64_t>& strides) const {
  std::vector<int64_t> out;
  out.reserve(NumElements());
  for (const Box& box : boxes_) {
    if (box.Empty()) continue;
    const int r = box.rank();
    std::vector<int64_t> idx = box.lo;
    while (true) {
      int64_t off = 0;
      for (int i = 0; i < r; ++i) off += idx[i] * strides[i];
      out.push_back(off);
      int axis = r - 1;
      while (axis >= 0) {
        if (++idx[axis] < box.hi[axis]) break;
        idx[axis] = box.lo[axis];
        --axis;
      }
      if (axis < 0) break;
    }
  }
  return out;
}

std::string Region::ToString() const {
  if (boxes_.empty()) return "[]";
  std::vector<std::string> parts;
  parts.reserve(boxes_.size());
  for (const Box& b : boxes_) parts.push_back(BoxToString(b));
  return absl::StrJoin(parts, "+");
}

absl::StatusOr<Region> ParseRegion(std::string_view text) { return RegionParser(text).Parse(); }

std::vector<int64_t> RowMajorStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * shape[i + 1];
  }
  return strides;
}

}  // namespace syncopate::plan
