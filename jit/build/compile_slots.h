// A bound on the NVRTC compiles running at once in one process (the daemon's compile_threads):
// each compile takes a slot for as long as NVRTC runs, waiting at most until its deadline. Why:
// a compile holds a core and hundreds of MB; a burst of distinct kernels must queue, not thrash.
// Thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace syncopate::jit {

class CompileSlots {
 public:
  explicit CompileSlots(int slots) : free_(slots) {}
  CompileSlots(const CompileSlots&) = delete;
  CompileSlots& operator=(const CompileSlots&) = delete;

  // One slot, released when the Held goes out of scope; empty (false) when `deadline` passed
  // first. No deadline: waits as long as it takes.
  class Held {
   public:
    Held() = default;
    Held(Held&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)) {}
    Held& operator=(Held&& other) noexcept {
      if (this != &other) {
        if (owner_ != nullptr) owner_->Release();
        owner_ = std::exchange(other.owner_, nullptr);
      }
      return *this;
    }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    ~Held() {
      if (owner_ != nullptr) owner_->Release();
    }
    explicit operator bool() const { return owner_ != nullptr; }

   private:
    friend class CompileSlots;
    explicit Held(CompileSlots* owner) : owner_(owner) {}
    CompileSlots* owner_ = nullptr;
  };
  Held Acquire(std::optional<std::chrono::steady_clock::time_point> deadline);

 private:
  void Release();

  absl::Mutex mu_;
  int free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace syncopate::jit
