// The bytes one side of a lowered transfer touches, for the compiler's hazard analyses
// (channel_order.h, plain_reductions.h): a buffer on a rank and the span of the transfer's copy
// segments. Conservative: a segment's extent is its whole span, gaps between rows included.
#ifndef SYNCOPATE_JIT_COMPILER_BYTE_EXTENTS_H_
#define SYNCOPATE_JIT_COMPILER_BYTE_EXTENTS_H_

#include <cstdint>
#include <string>

#include "jit/compiler/lowering.h"

namespace syncopate::jit {

struct ByteExtent {
  int rank = 0;
  const std::string* buffer = nullptr;  // points into the LoweredSchedule
  int64_t begin = 0;
  int64_t end = 0;  // exclusive; begin == end: touches nothing
};

// The source (`source` true) or destination side of transfer `transfer` of `lw`.
ByteExtent SideExtent(const LoweredSchedule& lw, int transfer, bool source);

// Same rank, same buffer, and the spans intersect.
bool Overlap(const ByteExtent& a, const ByteExtent& b);

}  // namespace syncopate::jit

#endif  // SYNCOPATE_JIT_COMPILER_BYTE_EXTENTS_H_
