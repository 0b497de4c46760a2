// PlanExecutor: runs one rank's UCX part of a chunk plan. Given a plan, this rank, a node map
// and a connected UcxTransport, it executes the rank's inter-node transfers (peer on another
// node) over UCX — and, for host tests, the intra-node ones and local copies too — honouring
// dependencies and setting signals with the launch's epoch, like every other backend.
//
// Signals: every rank exposes one 8-byte word per plan signal id ("signals" region); a transfer
// sets word `signal` on its destination rank to the epoch once its data is there. A dependency
// is waited on where it is observable: the local signal word when the dependency lands on this
// rank, its completion when this rank ran it, else by reading the destination's word over UCX.
//
// Reductions (SUM/MAX) over UCX: the sender puts the chunk into a staging slot reserved for that
// transfer on the receiver, then sets the slot's own signal word; the receiver reduces the slot
// into the destination and then sets the transfer's signal. Chosen over active messages because
// it is the same put+signal path as plain chunks (one code path, RMA-only transports work), the
// receiver reduces with its own compute (on GPUs: the fused kernel or a reduce kernel reading
// the slot), and concurrent reductions into one element serialize at the one receiver. Slots
// are laid out deterministically from the plan, so every rank knows every slot's offset.
//
// Deadlines: every wait (a dependency, an operation, an incoming chunk) has one:
// ExecutorOptions::transfer_timeout from when the wait begins (incoming chunks: since the last
// incoming progress). When it passes, Execute fails naming the peer that should have delivered
// (rank and address); any peer the transport marked failed aborts Execute at once, naming it.
//
// Fresh reduction outputs: elements of this rank that only carried reductions write (not
// initial, not written by any plain transfer) are filled with the op's identity at the start of
// every Execute, which is how plan.h's "a reduction into an element with no valid data
// initializes it" is implemented here.
//
// Epochs: Execute(e) needs e greater than every earlier epoch; signal words compare >= e.
// Buffers and staging slots are reused across epochs, so a rank may start epoch e+1 only after
// every rank finished reading epoch e's data (the caller's barrier or the next collective's
// dependencies provide this, as for the GPU backends).
//
// Device buffers (ExecutorOptions::staging): where the plan's buffers live on a GPU and UCX
// moves host memory only (Debian's build), the executor's buffers are host staging copies of
// them: StageIn copies the rank's initial data device -> host (one copy per region) before the
// epoch starts, and during Execute every chunk that lands or is reduced into here is copied
// host -> device as soon as it is complete, so those copies overlap the following chunks'
// network time. Copies to the
// device are serialized with the local reductions, so a chunk reduced into right after it
// landed reaches the device in its final state.
//
// Device mode (ExecutorOptions::device), for fused GPU launches: the plan's buffers live on a
// GPU, and the fused kernel and CUDA IPC backends already move every intra-node chunk and set
// its signal word on the device, so the executor carries only what they cannot reach: inter-node
// chunks. Unlike staging it cannot copy whole buffers around the launch (the kernel produces and
// consumes chunks while the launch runs), so it asks the device per chunk, through DeviceSide
// (device_side.h): FetchSource before a send (the device knows when the kernel produced the
// source and when intra-node chunks it forwards arrived; those dependencies' host signal words
// are never set, so they are handed to the device instead of being waited on here), Deliver
// after a chunk landed in host memory (copy, then the device signal), Drain before the host
// copies are reused. Only plain pushes: a pull would read a peer's host copy that only that
// peer's FetchSource fills, and reductions would need the reduce on the device — neither exists
// yet, and Create says so rather than produce wrong data.
//
// Epoch handshake (device mode): a receiver's Deliver copies may read its host buffers until its
// Drain at the end of its Execute, and nothing else orders a fast sender's next epoch after that
// (the GPU side has no host barrier between launches). So every rank publishes the epoch it has
// started in an "epoch_ready" word, after draining the previous one, and a sender reads the
// receiver's word (once per peer and epoch) before its first put there. Without device mode the
// caller's barrier does this job (see Epochs).
//
// Thread-safety: Execute is called by one thread at a time; it runs one thread per channel.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/plan/plan.h"
#include "runtime/ucx/device_side.h"
#include "runtime/ucx/segments.h"
#include "runtime/ucx/transport.h"

namespace syncopate::ucx {

// rank -> node id.
using NodeMap = std::vector<int>;
// Ranks [n*rpn, (n+1)*rpn) on node n (the two-level templates' convention).
NodeMap NodesFromRanksPerNode(int world_size, int ranks_per_node);

// Copies between the executor's host buffers and where the rank's plan buffers really live (a
// GPU). Called from the executor's threads, one call at a time.
class BufferStaging {
 public:
  virtual ~BufferStaging() = default;
  // The real buffer `buffer` -> the executor's host buffer, these byte ranges.
  virtual absl::Status ToHost(const std::string& buffer, const std::vector<ByteRange>& ranges) = 0;
  // The executor's host buffer -> the real buffer `buffer`, these byte ranges.
  virtual absl::Status ToDevice(const std::string& buffer,
                                const std::vector<ByteRange>& ranges) = 0;
};

struct ExecutorOptions {
  // Run intra-node transfers and local copies over UCX / memcpy as well (host tests; on GPUs
  // CUDA IPC backends own them and set their signals).
  bool run_intra_node = false;
  absl::Duration transfer_timeout = absl::Seconds(10);
  // Not owned; must outlive the executor. Null: the host buffers are the plan's buffers.
  // Requires run_intra_node (Create refuses otherwise): staged memory stays consistent only if
  // every chunk that touches it goes through the executor. The real buffers hold an epoch's
  // data when Execute returns (a chunk's signal may be seen before its copy to them is done).
  BufferStaging* staging = nullptr;
  // Not owned; must outlive the executor. Non-null: device mode (see the file comment): the
  // executor carries only inter-node chunks, which must all be plain pushes (Create answers
  // Unimplemented otherwise), and moves their bytes between the device and its host buffers
  // through this. Excludes run_intra_node and staging (InvalidArgument). Every rank of the
  // group must use device mode or none (it registers one more memory region).
  DeviceSide* device = nullptr;
};

class PlanExecutor {
 public:
  // Registers this rank's buffers (allocated through the transport unless `external` maps a
  // buffer name to caller memory), signal words and staging slots with `transport`. Call before
  // transport->Connect; every rank of the group must create its executor from the same plan.
  static absl::StatusOr<std::unique_ptr<PlanExecutor>> Create(
      const plan::Plan& plan, int rank, NodeMap nodes, UcxTransport* transport,
      ExecutorOptions options, const std::map<std::string, void*>& external = {});

  // Host address of buffer `name` on this rank (nullptr if unknown).
  void* buffer(absl::string_view name) const;
  // Number of transfers this rank runs per epoch, and incoming chunks it waits for.
  int num_local_transfers() const { return static_cast<int>(mine_.size()); }
  int num_incoming() const { return static_cast<int>(incoming_.size()); }

  // With ExecutorOptions::staging: copies this rank's initial data from the real buffers into
  // the host buffers. Call before whatever starts the epoch on every rank (a barrier): peers
  // may read (pull) this rank's initial data as soon as their Execute begins. No-op without
  // (and in device mode, where FetchSource fetches each source chunk when it is sent).
  absl::Status StageIn();

  // Runs epoch `epoch`: returns when every transfer this rank runs completed (data remotely
  // complete) and every chunk another rank sends it over UCX arrived (reductions applied; in
  // device mode: delivered to the device and drained).
  absl::Status Execute(uint64_t epoch);

 private:
  struct Info {
    bool carried = false;   // run over UCX/memcpy by some rank's executor
    int slot = -1;          // staging slot on the receiver (push+reduce) or local (pull+reduce)
    uint64_t slot_offset = 0;
    std::vector<ByteRange> src_ranges, dst_ranges;  // for transfers this rank touches
  };

  PlanExecutor(const plan::Plan& plan, int rank, NodeMap nodes, UcxTransport* transport,
               ExecutorOptions options);
  // Create's passes, in order (plan_executor_setup.cc). Staging slots per rank: every rank
  // computes the same layout, so senders know the receivers' slot offsets.
  struct StageLayout {
    std::vector<uint64_t> bytes;
    std::vector<int> slots;
  };
  // Which executor carries transfer `id`, its byte ranges where this rank touches it, its staging
  // slot, and whether it is this rank's to run or to receive.
  absl::Status ClassifyTransfer(int id, StageLayout& stage);
  // Channels keep their plan order (ids are walked in id order).
  void RestoreChannelOrder();
  // Device mode: every dependency of a transfer sent here must be observable from this node.
  absl::Status CheckDeviceModeDependencies() const;
  // Fresh reduction outputs on this rank start at the operation's identity (not in device mode).
  void PlanIdentityFills();
  // Staging: the initial regions copied in per Execute.
  absl::Status CollectInitialRanges();
  // The transport regions, in the same order on every rank.
  absl::Status AllocateRegions(const std::map<std::string, void*>& external,
                               const StageLayout& stage);
  absl::Status RunChannel(const std::vector<int>& ids, uint64_t epoch);
  absl::Status RunTransfer(const plan::Transfer& t, uint64_t epoch, absl::Time deadline);
  absl::Status WaitDependency(const plan::Transfer& t, int dep, uint64_t epoch,
                              absl::Time deadline);
  absl::Status ReceiveIncoming(uint64_t epoch);
  absl::Status ReduceLocal(const plan::Transfer& t, char* packed);
  // Staging to the real buffer after a chunk landed or was reduced into (no-op without staging).
  absl::Status Landed(const plan::Transfer& t);
  // Device mode: waits until `peer` has started `epoch` (its epoch_ready word), once per peer
  // and epoch.
  absl::Status WaitPeerReady(const plan::Transfer& t, int peer, uint64_t epoch);
  absl::Status CheckAbort(const plan::Transfer* t) const;
  std::string Describe(const plan::Transfer& t) const;
  uint64_t LoadSignal(int region, int index) const;
  void StoreSignal(int signal, uint64_t epoch);

  const plan::Plan plan_;
  const int rank_;
  const NodeMap nodes_;
  UcxTransport* const transport_;
  const ExecutorOptions options_;
  std::vector<const plan::Transfer*> by_id_;
  std::vector<Info> info_;
  std::map<std::string, int> buffer_region_;  // buffer name -> transport region id
  std::map<std::string, const plan::BufferSpec*> specs_;
  int signals_region_ = -1;
  int stage_region_ = -1;
  int stage_signals_region_ = -1;
  int epoch_ready_region_ = -1;  // device mode: the epoch this rank has started (8 bytes)
  int num_signals_ = 0;
  std::vector<std::vector<int>> mine_by_channel_;  // transfer ids this rank runs, per channel
  std::vector<int> mine_;
  std::vector<int> incoming_;  // carried transfers run by other ranks that land here
  struct IdentityFill {
    std::string buffer;
    plan::ReduceOp op;
    std::vector<ByteRange> ranges;
  };
  std::vector<IdentityFill> identity_fills_;  // done at the start of every Execute
  std::map<std::string, std::vector<ByteRange>> initial_ranges_;  // staged in per Execute
  std::unique_ptr<std::atomic<uint64_t>[]> done_epoch_;  // by transfer id, for this rank's
  // Device mode: per peer, the highest epoch it was seen to have started (handshake cache).
  std::unique_ptr<std::atomic<uint64_t>[]> peer_ready_;
  // Device mode: every Deliver so far is drained (false after a Drain that did not succeed;
  // the next Execute drains again before it announces its epoch).
  bool drained_ = true;
  uint64_t last_epoch_ = 0;
  std::atomic<bool> abort_{false};
  // Serializes local reductions (they may touch the same elements) and copies to the real
  // buffers (so a copy never reads a region half reduced).
  absl::Mutex reduce_mu_;
};

}  // namespace syncopate::ucx
