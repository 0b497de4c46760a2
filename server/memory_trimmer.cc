// See memory_trimmer.h.
#include "server/memory_trimmer.h"

#include <malloc.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "spdlog/spdlog.h"

namespace syncopate::server {

MemoryTrimmer::MemoryTrimmer(Options options) : options_(options) {
  timers_.ScheduleAfter(options_.interval, [this] { Check(); });
}

namespace {

// Resident bytes of this process that malloc does not account as in use: freed memory the arenas
// keep resident, plus a roughly constant rest (code, stacks, mapped files).
int64_t ResidentNotInUse() {
  std::ifstream in("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  in >> pages >> resident;
  const struct mallinfo2 info = mallinfo2();
  return resident * sysconf(_SC_PAGESIZE) - static_cast<int64_t>(info.uordblks + info.hblkhd);
}

}  // namespace

void MemoryTrimmer::Check() {
  // The trigger is growth since the last trim, not the level: what a trim cannot release (free
  // chunks smaller than a page, the constant rest) would otherwise trim a quiet heap over and over.
  const int64_t excess = ResidentNotInUse();
  if (!have_baseline_) {
    baseline_ = excess;
    have_baseline_ = true;
  }
  baseline_ = std::min(baseline_, excess);
  if (excess > baseline_ + options_.threshold_bytes) {
    malloc_trim(0);
    const int64_t after = ResidentNotInUse();
    spdlog::debug("event=malloc_trim resident_not_in_use_before={} after={}", excess, after);
    baseline_ = after;
  }
  timers_.ScheduleAfter(options_.interval, [this] { Check(); });
}

}  // namespace syncopate::server
