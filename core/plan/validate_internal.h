// The validator's parts (validate.cc uses them): happens-before over a plan's transfers
// (happens_before.cc) and the atom grids the plan's regions cut its buffers into (atom_grid.cc).
// Internal to core/plan (namespace plan::validation). Thread-compatible.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/plan/plan.h"
#include "core/plan/region.h"

namespace syncopate::plan::validation {

// "rank R transfer T (channel C, chunk K)": how errors name a transfer.
std::string Describe(const Transfer& t);

// Happens-before: dependencies plus channel program order. Sparse vector clocks over channels
// (each channel is a chain), so "a before b" is one binary search and memory follows the plan's
// actual depth rather than N^2.
class Order {
 public:
  // InvalidArgument naming a dependency cycle (through deps or channel order); Unimplemented when
  // the clocks would exceed their bound.
  absl::Status Build(const Plan& plan, const std::vector<const Transfer*>& by_id);

  // True when `a` completes before `b` starts in every execution.
  bool Before(int a, int b) const;
  bool Ordered(int a, int b) const { return Before(a, b) || Before(b, a); }

  const std::vector<int>& topological() const { return topo_; }

 private:
  absl::Status TopologicalSort(const std::vector<const Transfer*>& by_id);
  // Walks backwards through unsorted transfers (each has an unsorted predecessor) until one
  // repeats: that loop is a cycle.
  absl::Status CycleError(const std::vector<const Transfer*>& by_id,
                          const std::vector<int>& indegree) const;
  absl::Status BuildClocks(int num_channels);

  std::vector<std::vector<int>> preds_;  // by transfer id: deps and the channel predecessor
  std::vector<int> chan_;                // global channel index
  std::vector<int> pos_;                 // position within the channel
  std::vector<int> topo_;
  std::vector<std::vector<std::pair<int, int>>> clock_;  // sorted (channel, last position before)
};

// Atom grids: per buffer, the cells cut by every region boundary on each axis. Every region the
// plan mentions is a union of whole atoms, and every mapping (transfer source -> destination,
// expectation -> contribution) maps atoms one to one, because cuts are propagated across
// mappings until they agree.
struct Grid {
  std::vector<std::vector<int64_t>> cuts;  // per axis, sorted, includes 0 and the extent
  std::vector<int64_t> stride;             // row-major over interval counts
  int64_t num_atoms = 1;
};

// Atoms of `region`, in the region's element order (boxes in order, row-major inside a box).
std::vector<int64_t> AtomsInOrder(const Grid& grid, const Region& region);
Box AtomBox(const Grid& grid, int64_t atom);

// Region `src` of buffer `src_buffer` maps element by element onto `dst` of `dst_buffer`.
struct Mapping {
  int src_buffer;
  const Region* src;
  int dst_buffer;
  const Region* dst;
  std::string who;  // for error messages
};

class GridBuilder {
 public:
  explicit GridBuilder(const Plan& plan);

  void AddRegion(int buffer, const Region& region);
  // Unimplemented when the two regions' boxes differ and they are too large to map element by
  // element.
  absl::Status AddMapping(Mapping m);
  // The grid of every buffer; Unimplemented when one would have too many atoms.
  absl::StatusOr<std::vector<Grid>> Build();

 private:
  void AddElementCuts(int buffer, const Region& region);
  absl::Status Propagate();
  absl::Status TooManyAtoms(size_t buffer) const;

  const Plan& plan_;
  std::vector<std::vector<std::set<int64_t>>> sets_;  // [buffer][axis]
  std::vector<Mapping> box_wise_;
};

}  // namespace syncopate::plan::validation
