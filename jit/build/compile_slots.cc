#include "jit/build/compile_slots.h"

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace syncopate::jit {

CompileSlots::Held CompileSlots::Acquire(
    std::optional<std::chrono::steady_clock::time_point> deadline) {
  absl::MutexLock lock(&mu_);
  auto has_free = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return free_ > 0; };
  if (deadline.has_value()) {
    // absl waits on its own clock; the steady deadline becomes a distance from now.
    const absl::Time until =
        absl::Now() + absl::FromChrono(*deadline - std::chrono::steady_clock::now());
    if (!mu_.AwaitWithDeadline(absl::Condition(&has_free), until)) return Held();
  } else {
    mu_.Await(absl::Condition(&has_free));
  }
  --free_;
  return Held(this);
}

void CompileSlots::Release() {
  absl::MutexLock lock(&mu_);
  ++free_;
}

}  // namespace syncopate::jit
