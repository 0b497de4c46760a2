// See launch_watch.h.
#include "runtime/cuda/launch_watch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "runtime/cuda/launch_waits.h"

namespace syncopate::cuda {

absl::StatusOr<LaunchWatch> LaunchWatch::Create(const DriverApi& api) {
  LaunchWatch w(api);
  ASSIGN_OR_RETURN(w.words_, PinnedHostBuffer::Allocate(api, sizeof(HostWords)));
  ASSIGN_OR_RETURN(w.launch_done_, Event::Create(api));
  return w;
}

absl::Status LaunchWatch::RecordedTimeout() const { return ReadTimeoutRecord(words().record); }

absl::Status LaunchWatch::Issued(CUstream stream, absl::Duration wait) {
  last_wait_ = wait;
  CU_RETURN_IF_ERROR(api_->cuEventRecord(launch_done_.get(), stream));
  return absl::OkStatus();
}

absl::Status LaunchWatch::Watch(int rank, uint32_t epoch) {
  volatile HostWords* words = &this->words();
  // Progress = the host-mapped words written at each launch's start and end.
  uint64_t last_progress = ~0ull;
  absl::Time last_change = absl::Now();
  const absl::Duration stall = 4 * last_wait_ + absl::Seconds(2);
  int sleep_us = 20;
  while (true) {
    CUresult r = api_->cuEventQuery(launch_done_.get());
    if (r == CUDA_SUCCESS) return absl::OkStatus();
    if (r != CUDA_ERROR_NOT_READY)
      return CuError(r, "cuEventQuery(launch done)", __FILE__, __LINE__);
    gates_.Observe(*words);
    const absl::Time now = absl::Now();
    const uint64_t p =
        (static_cast<uint64_t>(words->progress_entered) << 32) | words->progress_finished;
    if (p != last_progress) last_progress = p, last_change = now;
    if (now - last_change > stall) {
      // No absent-peer names here: a kernel that never returns may hold the queue a read needs.
      absl::Status diagnosis = Diagnose(rank, epoch, now - last_change);
      diagnosis =
          absl::Status(diagnosis.code(), absl::StrCat(diagnosis.message(), DescribeGates(epoch)));
      absl::Status unblocked = Unblock(epoch);
      if (!unblocked.ok()) {
        return absl::InternalError(
            absl::StrCat(diagnosis.message(), "; and unblocking failed: ", unblocked.message()));
      }
      return diagnosis;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min(sleep_us * 2, 1000);
  }
}

absl::Status LaunchWatch::Diagnose(int rank, uint32_t epoch, absl::Duration waited) const {
  RETURN_IF_ERROR(RecordedTimeout());
  const volatile HostWords* words = &this->words();
  return absl::DeadlineExceededError(absl::StrFormat(
      "rank %d: launch %u made no progress for %d ms (last launch started on its stream: %u, "
      "last finished: %u) and no device-side wait timed out: a kernel that never returns, or "
      "work outside the protocol blocking its stream",
      rank, epoch, static_cast<int>(absl::ToInt64Milliseconds(waited)),
      static_cast<uint32_t>(words->progress_entered),
      static_cast<uint32_t>(words->progress_finished)));
}

absl::Status LaunchWatch::Unblock(uint32_t epoch) {
  volatile HostWords* words = &this->words();
  words->abort_flag = 1;
  // Gates behind the epoch, and zeroed ones (a device-counted launch's side streams wait for
  // any nonzero value), are released.
  const uint32_t release = epoch == 0 ? 1u : epoch;
  for (int g = 0; g < kGateCapacity; ++g) {
    if (words->gates[g] == 0 || !EpochReached(words->gates[g], epoch)) {
      words->gates[g] = release;
    }
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    CUresult r = api_->cuEventQuery(launch_done_.get());
    if (r == CUDA_SUCCESS) return absl::OkStatus();
    if (r != CUDA_ERROR_NOT_READY) return CuError(r, "cuEventQuery", __FILE__, __LINE__);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return absl::InternalError("streams still blocked 10 s after unblocking");
}

}  // namespace syncopate::cuda
