// The host side of a launch's bounded waits (group.h): Sync polls until the launch ends or its
// deadline, then names what it waited for, which peers are absent, and unblocks the device.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "runtime/cuda/group.h"

namespace syncopate::cuda {

absl::Status Group::Sync(CUstream stream) {
  const DriverApi& api = context_.api();
  RETURN_IF_ERROR(context_.MakeCurrent());
  if (epoch_ == synced_epoch_) {
    // Nothing issued by the host since the last Sync, but the caller's graphs may have replayed
    // captured launches: their kernels' waits are bounded on the device and leave the record.
    CU_RETURN_IF_ERROR(api.cuStreamSynchronize(stream));
    if (absl::Status timed_out = RecordedTimeout(); !timed_out.ok()) {
      broken_ = true;
      return WithAbsentPeers(timed_out, host_words().record.expected);
    }
    return absl::OkStatus();
  }
  volatile HostWords* words = &host_words();
  // Progress = the host-mapped words S writes at each launch's start and end: read without any
  // stream, so this watch works whatever the GPU's queues are blocked on.
  uint64_t last_progress = ~0ull;
  absl::Time last_change = absl::Now();
  const absl::Duration stall = 4 * last_wait_timeout_ + absl::Seconds(2);
  int sleep_us = 20;
  while (true) {
    CUresult r = api.cuEventQuery(launch_done_.get());
    if (r == CUDA_SUCCESS) break;
    if (r != CUDA_ERROR_NOT_READY) {
      broken_ = true;
      return CuError(r, "cuEventQuery(launch done)", __FILE__, __LINE__);
    }
    gate_watch_.Observe(*words);
    const absl::Time now = absl::Now();
    const uint64_t p =
        (static_cast<uint64_t>(words->progress_entered) << 32) | words->progress_finished;
    if (p != last_progress) last_progress = p, last_change = now;
    if (now - last_change > stall) {
      // No WithAbsentPeers here: a kernel that never returns may hold the queue a read needs.
      absl::Status diagnosis = Diagnose(epoch_, now - last_change);
      diagnosis = absl::Status(diagnosis.code(),
                               absl::StrCat(diagnosis.message(), gate_watch_.Describe(epoch_)));
      absl::Status unblocked = Unblock(epoch_);
      broken_ = true;
      if (!unblocked.ok()) {
        return absl::InternalError(
            absl::StrCat(diagnosis.message(), "; and unblocking failed: ", unblocked.message()));
      }
      return diagnosis;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min(sleep_us * 2, 1000);
  }
  CU_RETURN_IF_ERROR(api.cuStreamSynchronize(stream));
  if (absl::Status timed_out = RecordedTimeout(); !timed_out.ok()) {
    broken_ = true;
    // The launch that timed out, not the last one issued (launches are pipelined: the host may
    // be several launches ahead, which the peers cannot have entered yet).
    uint32_t failed = host_words().record.expected;
    if (failed == 0) failed = epoch_;
    absl::Status named = WithAbsentPeers(timed_out, failed);
    return absl::Status(named.code(), absl::StrCat(named.message(), gate_watch_.Describe(failed)));
  }
  synced_epoch_ = epoch_;
  return absl::OkStatus();
}

absl::Status Group::RecordedTimeout() const {
  const volatile WaitTimeoutRecord& record = host_words().record;
  if (record.timed_out == 0) return absl::OkStatus();
  WaitTimeoutRecord copy;
  std::memcpy(&copy, const_cast<const WaitTimeoutRecord*>(&record), sizeof(copy));
  return absl::DeadlineExceededError(DescribeTimeout(copy));
}

absl::Status Group::WithAbsentPeers(const absl::Status& timed_out, uint32_t epoch) {
  // The wait that expired first is often not the cause: with one rank absent, the others abort
  // and then also starve each other, and which deadline fires first is a race (seen under MPS:
  // both survivors named each other). A peer that never announced this launch is the cause;
  // its entered word in this rank's control block says so, whatever the waits saw.
  const DriverApi& api = context_.api();
  std::array<uint32_t, kMaxRanks> entered{};
  const size_t bytes = sizeof(uint32_t) * static_cast<size_t>(world_size());
  if (context_.MakeCurrent().ok() &&
      api.cuMemcpyDtoHAsync(entered.data(), control_->local() + kEnteredOffset, bytes,
                            rescue_stream_.get()) == CUDA_SUCCESS &&
      rescue_stream_.Synchronize().ok()) {
    std::string absent;
    for (int q = 0; q < world_size(); ++q) {
      if (q == rank() || !same_node(q) || static_cast<int32_t>(entered[q] - epoch) >= 0) continue;
      absl::StrAppend(&absent, absent.empty() ? "" : "; ", "rank ", q, " had not entered launch ",
                      epoch, " (it last entered launch ", entered[q], ")");
    }
    if (!absent.empty()) {
      return absl::Status(timed_out.code(),
                          absl::StrCat("rank ", rank(), " gave up on launch ", epoch, ": ", absent,
                                       ". First wait to expire: ", timed_out.message()));
    }
  }
  return timed_out;
}

absl::Status Group::Diagnose(uint32_t epoch, absl::Duration waited) {
  RETURN_IF_ERROR(RecordedTimeout());
  const volatile HostWords* words = &host_words();
  return absl::DeadlineExceededError(absl::StrFormat(
      "rank %d: launch %u made no progress for %d ms (last launch started on its stream: %u, "
      "last finished: %u) and no device-side wait timed out: a kernel that never returns, or "
      "work outside the protocol blocking its stream",
      rank(), epoch, static_cast<int>(absl::ToInt64Milliseconds(waited)),
      static_cast<uint32_t>(words->progress_entered),
      static_cast<uint32_t>(words->progress_finished)));
}

absl::Status Group::Unblock(uint32_t epoch) {
  // Host writes only: kernels see the abort flag within kHostAbortPollSpins spin rounds, side
  // streams see their gates.
  volatile HostWords* words = &host_words();
  words->abort_flag = 1;
  for (int g = 0; g < kGateCapacity; ++g) {
    if (static_cast<int32_t>(words->gates[g] - epoch) < 0) words->gates[g] = epoch;
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    CUresult r = context_.api().cuEventQuery(launch_done_.get());
    if (r == CUDA_SUCCESS) return absl::OkStatus();
    if (r != CUDA_ERROR_NOT_READY) return CuError(r, "cuEventQuery", __FILE__, __LINE__);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return absl::InternalError("streams still blocked 10 s after unblocking");
}

// ---- Graphs ----

}  // namespace syncopate::cuda
