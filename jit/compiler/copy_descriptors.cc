// Copy descriptors: regions -> byte runs -> paired runs -> 2D segments.
// Pure functions; thread-compatible.
#include "jit/compiler/copy_descriptors.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace syncopate::jit {
namespace {

struct Run {
  int64_t offset;  // bytes
  int64_t length;  // bytes
};

// The byte runs of `region` in element order, adjacent runs merged. O(number of rows).
std::vector<Run> RegionRuns(const plan::Region& region, const std::vector<int64_t>& strides,
                            int64_t esize) {
  std::vector<Run> runs;
  auto emit = [&](int64_t offset, int64_t length) {
    if (length <= 0) return;
    if (!runs.empty() && runs.back().offset + runs.back().length == offset) {
      runs.back().length += length;
    } else {
      runs.push_back(Run{offset, length});
    }
  };
  for (const plan::Box& box : region.boxes()) {
    if (box.Empty()) continue;
    const int rank = box.rank();
    if (rank == 0) {
      emit(0, esize);
      continue;
    }
    const int inner = rank - 1;
    const int64_t inner_extent = box.hi[inner] - box.lo[inner];
    std::vector<int64_t> idx(box.lo.begin(), box.lo.end());
    for (;;) {
      int64_t base = 0;
      for (int d = 0; d < rank; ++d) base += idx[d] * strides[d];
      if (strides[inner] == 1) {
        emit(base * esize, inner_extent * esize);
      } else {
        for (int64_t i = 0; i < inner_extent; ++i) emit((base + i * strides[inner]) * esize, esize);
      }
      // Odometer over the outer axes.
      int d = inner - 1;
      for (; d >= 0; --d) {
        if (++idx[d] < box.hi[d]) break;
        idx[d] = box.lo[d];
      }
      if (d < 0) break;
    }
  }
  return runs;
}

}  // namespace

std::string CopySegment::ToString() const {
  return absl::StrCat("{src ", src_offset_bytes, " dst ", dst_offset_bytes, " ", rows, "x",
                      row_bytes, "B pitch ", src_pitch_bytes, "/", dst_pitch_bytes, "}");
}

absl::StatusOr<std::vector<CopySegment>> BuildCopyDescriptors(const plan::BufferSpec& src,
                                                              const plan::Region& src_region,
                                                              const plan::BufferSpec& dst,
                                                              const plan::Region& dst_region) {
  const int64_t esize = plan::DTypeSize(src.dtype);
  if (esize != plan::DTypeSize(dst.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "copy from buffer \"", src.name, "\" (", plan::DTypeName(src.dtype), ") to \"", dst.name,
        "\" (", plan::DTypeName(dst.dtype), "): element sizes differ"));
  }
  if (src_region.NumElements() != dst_region.NumElements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "copy from \"", src.name, "\" ", src_region.ToString(), " (", src_region.NumElements(),
        " elements) to \"", dst.name, "\" ", dst_region.ToString(), " (",
        dst_region.NumElements(), " elements): element counts differ"));
  }
  if (!src_region.InsideShape(src.shape)) {
    return absl::InvalidArgumentError(absl::StrCat("copy source region ", src_region.ToString(),
                                                   " lies outside buffer \"", src.name, "\""));
  }
  if (!dst_region.InsideShape(dst.shape)) {
    return absl::InvalidArgumentError(absl::StrCat("copy destination region ",
                                                   dst_region.ToString(), " lies outside buffer \"",
                                                   dst.name, "\""));
  }
  const std::vector<Run> s = RegionRuns(src_region, src.strides, esize);
  const std::vector<Run> d = RegionRuns(dst_region, dst.strides, esize);

  std::vector<CopySegment> out;
  auto add_piece = [&](int64_t so, int64_t dof, int64_t len) {
    if (!out.empty()) {
      CopySegment& last = out.back();
      if (last.row_bytes == len) {
        const int64_t sp = so - (last.src_offset_bytes + (last.rows - 1) * last.src_pitch_bytes);
        const int64_t dp = dof - (last.dst_offset_bytes + (last.rows - 1) * last.dst_pitch_bytes);
        if (last.rows == 1 && sp >= len && dp >= len) {
          last.src_pitch_bytes = sp;
          last.dst_pitch_bytes = dp;
          ++last.rows;
          return;
        }
        if (last.rows > 1 && sp == last.src_pitch_bytes && dp == last.dst_pitch_bytes) {
          ++last.rows;
          return;
        }
      }
    }
    out.push_back(CopySegment{so, dof, len, 1, len, len});
  };
  size_t i = 0, j = 0;
  int64_t si = 0, dj = 0;  // bytes consumed of s[i], d[j]
  while (i < s.size() && j < d.size()) {
    const int64_t len = std::min(s[i].length - si, d[j].length - dj);
    add_piece(s[i].offset + si, d[j].offset + dj, len);
    si += len;
    dj += len;
    if (si == s[i].length) ++i, si = 0;
    if (dj == d[j].length) ++j, dj = 0;
  }
  return out;
}

absl::StatusOr<std::vector<CopySegment>> BuildCopyDescriptors(const plan::Plan& plan,
                                                              const plan::Transfer& t) {
  const plan::BufferSpec* src = plan.FindBuffer(t.src_buffer);
  const plan::BufferSpec* dst = plan.FindBuffer(t.dst_buffer);
  if (src == nullptr || dst == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("transfer ", t.id, ": unknown buffer \"",
                     src == nullptr ? t.src_buffer : t.dst_buffer, "\""));
  }
  auto segs = BuildCopyDescriptors(*src, t.src_region, *dst, t.dst_region);
  if (!segs.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("transfer ", t.id, " (rank ", t.rank, "): ", segs.status().message()));
  }
  return segs;
}

int64_t TotalBytes(const std::vector<CopySegment>& segments) {
  int64_t total = 0;
  for (const CopySegment& s : segments) total += s.bytes();
  return total;
}

}  // namespace syncopate::jit
