// See channel_order.h.
#include "jit/compiler/channel_order.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace syncopate::jit {
namespace {

// Bytes one side of a transfer touches: a buffer on a rank, and the span of its segments.
struct Extent {
  int rank = 0;
  const std::string* buffer = nullptr;
  int64_t begin = 0;
  int64_t end = 0;  // exclusive; begin == end: touches nothing
};

Extent SideExtent(const LoweredSchedule& lw, int transfer, bool source) {
  const LoweredTransfer& t = lw.transfers[transfer];
  Extent e{source ? t.src_rank : t.dst_rank, source ? &t.src_buffer : &t.dst_buffer, 0, 0};
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

bool Overlap(const Extent& a, const Extent& b) {
  return a.rank == b.rank && *a.buffer == *b.buffer && a.begin < b.end && b.begin < a.end;
}

// What the hazard test needs of one step.
struct StepBytes {
  Extent src, dst;
  plan::ReduceOp reduce = plan::ReduceOp::kNone;
};

// True when `later` must wait for `earlier` (same channel, earlier first) for data.
bool Hazard(const StepBytes& earlier, const StepBytes& later) {
  const bool commute = earlier.reduce != plan::ReduceOp::kNone && earlier.reduce == later.reduce;
  return Overlap(earlier.dst, later.src) || Overlap(earlier.src, later.dst) ||
         (!commute && Overlap(earlier.dst, later.dst));
}

}  // namespace

std::vector<bool> StepsAfterPrevious(const LoweredSchedule& lw,
                                     const std::vector<ProgramStep>& channel) {
  std::vector<StepBytes> bytes;
  bytes.reserve(channel.size());
  for (const ProgramStep& step : channel) {
    bytes.push_back({SideExtent(lw, step.transfer, /*source=*/true),
                     SideExtent(lw, step.transfer, /*source=*/false),
                     lw.transfers[step.transfer].reduce});
  }
  std::vector<bool> after(channel.size(), false);
  for (size_t i = 1; i < channel.size(); ++i) {
    for (size_t e = 0; e < i && !after[i]; ++e) after[i] = Hazard(bytes[e], bytes[i]);
  }
  return after;
}

}  // namespace syncopate::jit
