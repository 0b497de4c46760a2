// See byte_extents.h.
#include "jit/compiler/byte_extents.h"

#include <algorithm>

namespace syncopate::jit {

ByteExtent SideExtent(const LoweredSchedule& lw, int transfer, bool source) {
  const LoweredTransfer& t = lw.transfers[transfer];
  ByteExtent e{source ? t.src_rank : t.dst_rank, source ? &t.src_buffer : &t.dst_buffer, 0, 0};
  bool any = false;
  for (const CopySegment& s : lw.segments[transfer]) {
    if (s.bytes() == 0) continue;
    const int64_t offset = source ? s.src_offset_bytes : s.dst_offset_bytes;
    const int64_t pitch = source ? s.src_pitch_bytes : s.dst_pitch_bytes;
    const int64_t end = offset + (s.rows - 1) * pitch + s.row_bytes;
    e.begin = any ? std::min(e.begin, offset) : offset;
    e.end = any ? std::max(e.end, end) : end;
    any = true;
  }
  return e;
}

bool Overlap(const ByteExtent& a, const ByteExtent& b) {
  return a.rank == b.rank && *a.buffer == *b.buffer && a.begin < b.end && b.begin < a.end;
}

}  // namespace syncopate::jit
