// Backoff for host-side polling loops (waiting on a signal word or a completion): spin briefly,
// then yield for up to 2 ms, then sleep in growing steps up to a cap, so a waiter reacts within microseconds
// while data flows and costs little CPU when a peer is slow (machines here share 2 cores).
//
// Thread-safety: a value owned by one waiting thread.
#pragma once

#include <immintrin.h>

#include <chrono>
#include <thread>

namespace syncopate::ucx {

class Backoff {
 public:
  void Pause() {
    ++iterations_;
    if (iterations_ < 64) {
      _mm_pause();
      return;
    }
    if (iterations_ == 64) yield_start_ = std::chrono::steady_clock::now();
    if (std::chrono::steady_clock::now() - yield_start_ < kYieldFor) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
    if (sleep_us_ < kMaxSleepUs) sleep_us_ *= 2;
  }
  void Reset() {
    iterations_ = 0;
    sleep_us_ = 1;
  }

 private:
  static constexpr int kMaxSleepUs = 200;
  static constexpr std::chrono::milliseconds kYieldFor{2};
  int iterations_ = 0;
  int sleep_us_ = 1;
  std::chrono::steady_clock::time_point yield_start_;
};

}  // namespace syncopate::ucx
