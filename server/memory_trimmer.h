// Gives memory that glibc keeps after large requests back to the system.
//
// Why: a rejected or finished large request (a plan of a million transfers is tens of millions
// of small protobuf allocations, spread over gRPC threads' malloc arenas) is freed, but glibc
// keeps the freed pages in its arenas: the daemon stayed at 1.6 GB after two such requests. A
// timer compares resident memory with what malloc has in use (statm, mallinfo2) and calls
// malloc_trim when the difference grows, so idle RSS returns close to where it was. Checking on
// a timer, not in the handlers, covers every path a large message takes (parse failures,
// rejections, completions).
//
// Thread-safety: owns its timer thread; nothing else to call.
#pragma once

#include <cstdint>

#include "absl/time/time.h"
#include "server/timer_queue.h"

namespace syncopate::server {

class MemoryTrimmer {
 public:
  struct Options {
    absl::Duration interval = absl::Milliseconds(500);
    // Growth of resident memory malloc holds but does not use, since the last trim, that
    // triggers the next one.
    int64_t threshold_bytes = int64_t{32} << 20;
  };
  explicit MemoryTrimmer(Options options);
  MemoryTrimmer(const MemoryTrimmer&) = delete;
  MemoryTrimmer& operator=(const MemoryTrimmer&) = delete;

 private:
  void Check();

  const Options options_;
  // Resident-but-not-in-use bytes after the last trim; only the timer thread touches these.
  bool have_baseline_ = false;
  int64_t baseline_ = 0;
  TimerQueue timers_;  // last: stopped first, so no check runs into a half-destroyed trimmer
};

}  // namespace syncopate::server
