// Chunk regions as byte segments: a plan Region (boxes in a buffer's element space, in element
// order) becomes the list of contiguous byte ranges RMA moves, and a source/destination pair
// becomes the segments one put (or get) covers, element k of the source landing on element k of
// the destination.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/plan.h"
#include "runtime/ucx/transport.h"

namespace syncopate::ucx {

struct ByteRange {
  uint64_t offset = 0;  // bytes from the buffer's start
  uint64_t length = 0;
  friend bool operator==(const ByteRange&, const ByteRange&) = default;
};

// The region's bytes in element order, adjacent ranges merged. The buffer must be row-major
// dense (the layout MakeBuffer gives); boxes must lie inside its shape.
absl::StatusOr<std::vector<ByteRange>> RegionBytes(const plan::BufferSpec& buffer,
                                                   const plan::Region& region);

// Bytes a buffer occupies (its dense extent).
uint64_t BufferBytes(const plan::BufferSpec& buffer);

// Pairs source and destination ranges of equal total length into segments
// (local_offset = source, remote_offset = destination).
absl::StatusOr<std::vector<Segment>> PairRanges(const std::vector<ByteRange>& src,
                                                const std::vector<ByteRange>& dst);

// Segments that pack `ranges` into a contiguous area starting at `packed_offset` (or, with
// `packed_is_local`, unpack it): used for staging slots.
std::vector<Segment> PackRanges(const std::vector<ByteRange>& ranges, uint64_t packed_offset,
                                bool packed_is_local);

uint64_t TotalBytes(const std::vector<ByteRange>& ranges);

}  // namespace syncopate::ucx
