// Copy descriptors: a transfer's (source region -> destination region) element mapping as a short
// list of 2D byte copies, the form both the copy engine (cuMemcpy2DAsync per segment) and the
// fused kernel's CTA copy loops (syncopate::CopySegment, impl/types.cuh) execute.
// Host-only C++, no CUDA. Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/plan.h"
#include "core/plan/region.h"

namespace syncopate::jit {

// `rows` rows of `row_bytes` bytes; row r is read at src_offset_bytes + r * src_pitch_bytes and
// written at dst_offset_bytes + r * dst_pitch_bytes (offsets from the buffers' base addresses).
// Pitches are >= row_bytes (equal to it when rows == 1), so rows never overlap.
struct CopySegment {
  int64_t src_offset_bytes = 0;
  int64_t dst_offset_bytes = 0;
  int64_t row_bytes = 0;
  int64_t rows = 0;
  int64_t src_pitch_bytes = 0;
  int64_t dst_pitch_bytes = 0;

  int64_t bytes() const { return row_bytes * rows; }
  std::string ToString() const;
  friend bool operator==(const CopySegment&, const CopySegment&) = default;
};

// Segments moving element k of `src_region` (region element order, buffer `src`'s strides) to
// element k of `dst_region` (buffer `dst`), in element order. Runs contiguous on both sides are
// merged, and equal-length runs at constant pitches on both sides fold into one 2D segment.
// Errors: element counts or element sizes differ, a region outside its buffer's shape.
absl::StatusOr<std::vector<CopySegment>> BuildCopyDescriptors(const plan::BufferSpec& src,
                                                              const plan::Region& src_region,
                                                              const plan::BufferSpec& dst,
                                                              const plan::Region& dst_region);

// The segments of plan transfer `t` (looks its buffers up in `plan`).
absl::StatusOr<std::vector<CopySegment>> BuildCopyDescriptors(const plan::Plan& plan,
                                                              const plan::Transfer& t);

int64_t TotalBytes(const std::vector<CopySegment>& segments);

}  // namespace syncopate::jit
