// The host side of a launch's bounded waits (group.h): Sync lets the launch watch poll until the
// last launch ends or stalls (launch_watch.h), then names the peers that never entered the
// failed launch.
#include <array>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "runtime/cuda/group.h"

namespace syncopate::cuda {

absl::Status Group::Sync(CUstream stream) {
  const DriverApi& api = context_.api();
  RETURN_IF_ERROR(context_.MakeCurrent());
  // Nothing issued by the host since the last Sync, but the caller's graphs may have replayed
  // captured launches on `stream`: watched the same way, from an event recorded now. Their
  // kernels write the progress words too, with the device's epoch, which names them.
  // Once the device counts, the host's count names no launch: the last one to start does.
  const uint32_t watched_epoch = epoch_uncounted_ ? watch_.words().progress_entered : epoch_;
  if (epoch_ == synced_epoch_ && epoch_uncounted_ && !broken_) {
    RETURN_IF_ERROR(watch_.Issued(stream, watch_.last_wait()));
  }
  if (epoch_ != synced_epoch_ || epoch_uncounted_) {
    if (absl::Status watched = watch_.Watch(rank(), watched_epoch); !watched.ok()) {
      return Break(watched);
    }
  }
  CU_RETURN_IF_ERROR(api.cuStreamSynchronize(stream));
  if (absl::Status timed_out = RecordedTimeout(); !timed_out.ok()) {
    // The launch that timed out, not the last one issued (launches are pipelined: the host may
    // be several launches ahead, which the peers cannot have entered yet).
    uint32_t failed = watch_.words().record.expected;
    if (failed == 0) failed = watched_epoch;
    absl::Status named = WithAbsentPeers(timed_out, failed);
    return Break(
        absl::Status(named.code(), absl::StrCat(named.message(), watch_.DescribeGates(failed))));
  }
  // A launch that broke the group without a device-side timeout (a stall the watch unblocked,
  // a launch issued in part) is not made good by a quiet stream.
  if (broken_) return BrokenError();
  synced_epoch_ = epoch_;
  return absl::OkStatus();
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
      if (q == rank() || !same_node(q) || EpochReached(entered[q], epoch)) continue;
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

}  // namespace syncopate::cuda
