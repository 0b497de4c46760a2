// StagedChannel: chunks of device memory over a UCX build that cannot touch device memory
// (Debian's: host transports only). Each chunk goes device -> pinned host slot (sender), slot ->
// remote slot (UCX put + signal), remote slot -> device (receiver), then the chunk's arrival
// callback sets the destination flag. With `slots` >= 2 the stages pipeline: while chunk i is on
// the network, the sender copies chunk i+1 out and the receiver copies chunk i-1 in, so the time
// per chunk approaches the slowest stage rather than the sum.
//
// The copy steps are injected: the GPU runtime plugs in cuMemcpyAsync on a copy stream plus a
// wait (the call must return once the bytes are in place); tests plug in memcpy. Flow control:
// after its copy-in the receiver writes the slot's sequence number back to the sender's credit
// word, and the sender reuses a slot only once it is credited, so no chunk overwrites one the
// receiver has not consumed. Every wait has the transport-level deadline and fails naming the
// peer.
//
// One StagedChannel carries one direction between this rank and `peer`; both ends create it
// with the same name and options before UcxTransport::Connect (it registers regions).
//
// Thread-safety: Send is called by one thread, Receive by one thread (the two ends are
// different ranks); nothing else is shared.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/ucx/transport.h"

namespace syncopate::ucx {

// Copies `bytes` from `src` to `dst` and returns once they are there.
using CopyFn = std::function<absl::Status(void* dst, const void* src, size_t bytes)>;

struct StagingOptions {
  int slots = 4;                     // pinned host slots per direction (>= 2 to pipeline)
  size_t slot_bytes = size_t{4} << 20;  // largest chunk
  absl::Duration timeout = absl::Seconds(10);  // per wait
  CopyFn device_to_host;  // sender's copy-out
  CopyFn host_to_device;  // receiver's copy-in
};

struct StagedChunk {
  void* device = nullptr;  // source (sender) or destination (receiver)
  size_t bytes = 0;
};

// Per-chunk stage times measured by the last Send/Receive (for the overlap benchmark).
struct StageTimes {
  absl::Duration copy;  // total time in the copy callback
  absl::Duration wait;  // total time waiting for slots/credits (sender) or arrivals (receiver)
};

class StagedChannel {
 public:
  // `sender`: whether this rank sends on this channel (the other end receives).
  static absl::StatusOr<std::unique_ptr<StagedChannel>> Create(UcxTransport* transport,
                                                                std::string name, int peer,
                                                                bool sender,
                                                                StagingOptions options);

  // Sender: sends the chunks in order. Returns when every chunk's data and signal left (the last
  // is remotely complete).
  absl::Status Send(const std::vector<StagedChunk>& chunks);
  // Receiver: receives the same number of chunks in order; `on_arrival(i)` runs after chunk i's
  // copy-in (set the destination flag there).
  absl::Status Receive(const std::vector<StagedChunk>& chunks,
                       const std::function<void(int)>& on_arrival);

  const StageTimes& last_times() const { return times_; }
  // The transport region holding this end's slots (to page-lock it for device copies).
  int slots_region() const { return slots_region_; }

 private:
  StagedChannel(UcxTransport* transport, std::string name, int peer, bool sender,
                StagingOptions options)
      : transport_(transport),
        name_(std::move(name)),
        peer_(peer),
        sender_(sender),
        options_(std::move(options)) {}
  absl::Status WaitWord(int region, int index, uint64_t at_least, absl::string_view what);

  UcxTransport* const transport_;
  const std::string name_;
  const int peer_;
  const bool sender_;
  const StagingOptions options_;
  int slots_region_ = -1;    // slots * slot_bytes
  int signals_region_ = -1;  // receiver side: per-slot sequence of the chunk that landed
  int credits_region_ = -1;  // sender side: per-slot sequence the receiver consumed
  uint64_t next_seq_ = 1;    // sequence number of the next chunk (continues across calls)
  StageTimes times_;
};

}  // namespace syncopate::ucx
