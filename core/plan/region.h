// Regions: unions of axis-aligned boxes in a buffer's element space.
//
// A Region is a value type (copyable, no shared state). Its boxes are kept in the order they were
// given: that order defines the region's *element order* (boxes one after another, row-major inside
// each box), which is how a transfer maps source elements onto destination elements.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace syncopate::plan {

using Shape = std::vector<int64_t>;

// Half-open box: lo[i] <= x[i] < hi[i] on every axis i.
struct Box {
  std::vector<int64_t> lo;
  std::vector<int64_t> hi;

  int rank() const { return static_cast<int>(lo.size()); }
  int64_t NumElements() const;  // 0 when any extent is <= 0
  bool Empty() const { return NumElements() == 0; }
  std::vector<int64_t> Extents() const;
  friend bool operator==(const Box&, const Box&) = default;
  friend auto operator<=>(const Box&, const Box&) = default;
};

class Region {
 public:
  Region() = default;
  explicit Region(std::vector<Box> boxes);

  // The whole buffer, or the slab [begin, end) along `axis` with every other axis whole.
  static Region Whole(const Shape& shape);
  static Region Slab(const Shape& shape, int axis, int64_t begin, int64_t end);

  const std::vector<Box>& boxes() const { return boxes_; }
  int rank() const { return boxes_.empty() ? 0 : boxes_.front().rank(); }
  bool empty() const { return NumElements() == 0; }
  int64_t NumElements() const;

  bool Intersects(const Region& other) const;
  Region Intersect(const Region& other) const;  // boxes in this region's order
  // True when every element of `other` is in this region.
  bool Contains(const Region& other) const;
  // True when boxes have the shape's rank and lie inside [0, shape).
  bool InsideShape(const Shape& shape) const;
  // True when no two boxes of this region overlap.
  bool BoxesDisjoint() const;

  // Splits into `n` pieces along `axis`: each box is cut into n contiguous parts of near-equal
  // extent (the first `extent % n` parts one larger); piece i gathers part i of every box.
  // Pieces may be empty when a box's extent is smaller than n.
  std::vector<Region> SplitAxis(int axis, int n) const;
  // Splits into `n` pieces of near-equal element count, following the element order. Pieces are
  // made of boxes (rows are cut where needed), so they stay valid regions.
  std::vector<Region> SplitElements(int n) const;

  // Row-major linear offsets (in elements) of this region's elements, in element order, for a
  // buffer with the given strides (elements). For simulators and tests: O(NumElements).
  std::vector<int64_t> Offsets(const std::vector<int64_t>& strides) const;

  // "[0:4,0:8)" or "[0:4,0:8)+[4:8,0:2)"; ParseRegion reads the same form.
  std::string ToString() const;

  friend bool operator==(const Region&, const Region&) = default;

 private:
  std::vector<Box> boxes_;
};

absl::StatusOr<Region> ParseRegion(std::string_view text);

// Row-major strides (in elements) of a dense buffer of `shape`.
std::vector<int64_t> RowMajorStrides(const Shape& shape);

}  // namespace syncopate::plan
