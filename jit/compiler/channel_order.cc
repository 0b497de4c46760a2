// See channel_order.h.
#include "jit/compiler/channel_order.h"

#include "jit/compiler/byte_extents.h"

namespace syncopate::jit {
namespace {

// What the hazard test needs of one step.
struct StepBytes {
  ByteExtent src, dst;
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
