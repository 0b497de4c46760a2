// Region -> byte ranges; see segments.h.
#include "runtime/ucx/segments.h"

#include "absl/strings/str_cat.h"

namespace syncopate::ucx {

uint64_t BufferBytes(const plan::BufferSpec& buffer) {
  return static_cast<uint64_t>(buffer.NumElements() * plan::DTypeSize(buffer.dtype));
}

uint64_t TotalBytes(const std::vector<ByteRange>& ranges) {
  uint64_t n = 0;
  for (const ByteRange& r : ranges) n += r.length;
  return n;
}

absl::StatusOr<std::vector<ByteRange>> RegionBytes(const plan::BufferSpec& buffer,
                                                   const plan::Region& region) {
  const plan::Shape& shape = buffer.shape;
  const int rank = static_cast<int>(shape.size());
  if (buffer.strides != plan::RowMajorStrides(shape)) {
    return absl::UnimplementedError(
        absl::StrCat("buffer '", buffer.name, "' is not row-major dense; UCX chunks need that"));
  }
  if (!region.InsideShape(shape)) {
    return absl::OutOfRangeError(absl::StrCat("region ", region.ToString(), " is outside buffer '",
                                              buffer.name, "'"));
  }
  const uint64_t esize = plan::DTypeSize(buffer.dtype);
  std::vector<ByteRange> out;
  auto emit = [&](uint64_t offset, uint64_t length) {
    if (length == 0) return;
    if (!out.empty() && out.back().offset + out.back().length == offset) {
      out.back().length += length;
    } else {
      out.push_back({offset, length});
    }
  };
  for (const plan::Box& box : region.boxes()) {
    if (box.Empty()) continue;
    if (rank == 0) {
      emit(0, esize);
      continue;
    }
    // Axes [inner, rank) are walked as one contiguous run: the last axis, plus every axis
    // before it whose inner axes are all whole.
    int inner = rank - 1;
    while (inner > 0 && box.lo[inner] == 0 && box.hi[inner] == shape[inner]) --inner;
    uint64_t run = static_cast<uint64_t>(box.hi[inner] - box.lo[inner]) *
                   static_cast<uint64_t>(buffer.strides[inner]) * esize;
    // Odometer over the outer axes [0, inner).
    std::vector<int64_t> idx(box.lo.begin(), box.lo.begin() + inner);
    while (true) {
      uint64_t offset = 0;
      for (int a = 0; a < inner; ++a) offset += idx[a] * buffer.strides[a];
      offset += box.lo[inner] * buffer.strides[inner];
      emit(offset * esize, run);
      int a = inner - 1;
      while (a >= 0 && ++idx[a] == box.hi[a]) {
        idx[a] = box.lo[a];
        --a;
      }
      if (a < 0) break;
    }
  }
  return out;
}

absl::StatusOr<std::vector<Segment>> PairRanges(const std::vector<ByteRange>& src,
                                                const std::vector<ByteRange>& dst) {
  if (TotalBytes(src) != TotalBytes(dst)) {
    return absl::InvalidArgumentError(absl::StrCat("source has ", TotalBytes(src),
                                                   " bytes, destination ", TotalBytes(dst)));
  }
  std::vector<Segment> out;
  size_t i = 0, j = 0;
  uint64_t si = 0, dj = 0;  // bytes consumed of src[i], dst[j]
  while (i < src.size() && j < dst.size()) {
    uint64_t n = std::min(src[i].length - si, dst[j].length - dj);
    if (n > 0) out.push_back({src[i].offset + si, dst[j].offset + dj, n});
    si += n;
    dj += n;
    if (si == src[i].length) ++i, si = 0;
    if (dj == dst[j].length) ++j, dj = 0;
  }
  return out;
}

std::vector<Segment> PackRanges(const std::vector<ByteRange>& ranges, uint64_t packed_offset,
                                bool packed_is_local) {
  std::vector<Segment> out;
  uint64_t at = packed_offset;
  for (const ByteRange& r : ranges) {
    if (packed_is_local) {
      out.push_back({at, r.offset, r.length});
    } else {
      out.push_back({r.offset, at, r.length});
    }
    at += r.length;
  }
  return out;
}

}  // namespace syncopate::ucx
