// Group: the GPU side of one node-local group of ranks (one process per rank). Owns the CUDA
// context, the rendezvous, the symmetric heap and this rank's control block (control_block.h),
// and runs the launch protocol: epochs, the entry guard, the fused kernel, the order of it all.
// Two parts have their own classes: the copy-engine side streams (side_streams.h) and the host
// side of the bounded waits, its host-mapped words and Sync()'s watch (launch_watch.h); Sync()
// adds the peers that never entered a failed launch.
//
// Launch protocol of launch e on stream S (every rank issues the same sequence of launches).
// The rule that makes it correct under any mapping of streams onto hardware queues: a stream of
// this process waits only for a word that this process's own kernel (submitted earlier) or its
// host writes, never for another process. The streams of a process share a few hardware queues
// (2 per client with two MPS clients, measured), so a stream wait blocks unrelated streams
// behind it; a wait on a peer could then close a cycle through the peer's queues. Every
// dependency on a peer is a bounded device-side wait of the kernel (launch_waits.h).
//  0. S sets the regions only reductions write (not initial data, no plain copy) to the op's
//     identity: the plan model reduces every contribution, the owner's own included, into them.
//  1. S writes entered[me] = e into every peer's control block (stream memory op, no wait), and
//     the host-mapped progress word entered = e. Device epoch (below): the kernel's CTA 0 does.
//  2. The fused kernel runs on S with args.epoch = e. SM / direct: the comm CTAs wait for the
//     entry guards (entered[q] >= e for the peers they write into or read from) before their
//     first step, as does a tile before its direct move. Copy engine: the control CTA waits for
//     each step's words (peer entered, forwarded chunk, produced chunk) and releases the step's
//     host-mapped gate word = e.
//  3. Copy engine only, submitted after the kernel: side streams (one per plan channel) fork
//     from S with an event recorded before the kernel; each step waits for its gate word (a
//     host-mapped word only this process writes), copies into the peer's mapped buffer (the
//     step's contiguous ranges as one cuMemcpyBatchAsync, strided ones with cuMemcpy2DAsync),
//     writes the peer's signal word = e (and drained[] for a pull); S joins them with events.
//  4. Before the kernel ends (control CTA, or comm CTA 0): every signal of a transfer destined to
//     this rank arrived, and every rank that pulls from this rank drained it. Then S writes the
//     progress word finished = e.
// Every device-side wait has a deadline (args.wait_timeout_ns). The first to expire records the
// waiting rank, the peer, the word and the values in host-mapped memory and aborts the launch;
// an aborting control CTA releases every gate, so the side streams drain. Sync() then returns
// DeadlineExceeded naming the peer. As a safety net for what no device wait sees (a kernel that
// never returns), Sync() also watches the progress words from the host: when they stop changing
// for 4x the wait deadline + 2 s it raises the host abort flag and releases every gate itself
// (host writes, no stream involved), so the GPU is never left hung. The group is then broken
// (its ranks are out of step): later launches fail with FailedPrecondition; the context stays
// usable and a new group can form.
//
// Where e lives (launch_abi.h, "Where e comes from"). Device epoch, for SM and direct launches
// of a group on one node: the kernel takes e = its launch-epoch word + 1 and announces it
// itself (step 1 moves into the kernel; step 4's progress word is written by the CTA that ran
// the tail waits), so S carries only the identity fills and the kernel. Such a launch may be
// captured in the caller's CUDA graph (Launch() on a capturing stream) and replayed any number
// of times: every replay is a new epoch, on every rank, as long as every rank replays the same
// sequence. Host epoch, for copy-engine launches and groups spanning nodes: e is a by-value
// kernel argument and a value in each stream memory op (the gates and signals of the side
// streams), so a graph must not replay it unchanged: CaptureGraph() captures one launch and
// LaunchGraph::Replay() takes the next epoch and rewrites the captured kernel node's arguments
// and every memory-op node's value (cuGraphExec*SetParams) before cuGraphLaunch. The host keeps
// the device word in step before a host-epoch launch. A copy-engine launch of a one-node group
// can take the device epoch too, with no value in its stream: S zeroes the launch's gate words
// before the kernel, the kernel writes e into them as before, each step waits for its gate to be
// nonzero, and its signal and drained words get e by a 4-byte copy from a gate word the step
// ran after (copy_program.h's EpochSourceGates), behind a fenced write. It does so when captured
// in a caller's graph (Launch() on a capturing stream), and for every launch after that: once a
// launch went into a caller's graph the host no longer knows the count, so from then on every
// launch takes the device epoch, and CaptureGraph() of a copy-engine launch is refused.
//
// Thread-safety: a Group is used by one thread at a time (launches of a group are ordered).
#pragma once

#include <cuda.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/cuda/callback_rendezvous.h"
#include "runtime/cuda/control_block.h"
#include "runtime/cuda/copy_program.h"
#include "runtime/cuda/gate_watch.h"
#include "runtime/cuda/handles.h"
#include "runtime/cuda/launch_waits.h"
#include "runtime/cuda/launch_watch.h"
#include "runtime/cuda/rendezvous.h"
#include "runtime/cuda/side_streams.h"
#include "runtime/cuda/symmetric_memory.h"
#include "syncopate/launch_abi.h"

namespace syncopate::cuda {

enum class Backend : uint8_t {
  kCopyEngine,  // side streams: cuMemcpy2DAsync + stream memory ops (no reductions)
  kSm,          // communication CTAs inside the fused kernel
  kDirect,      // the producer epilogue stores / atomically reduces into the peer
};
const char* BackendName(Backend backend);

struct GroupOptions {
  std::string group_id;
  int rank = 0;        // global (the plan's rank)
  int world_size = 1;  // global
  // rank -> node id, for a group spanning nodes (empty: every rank on this node). Only the ranks
  // of this rank's node rendezvous and map each other's memory; chunks to and from other nodes
  // go through the inter-node proxy (inter_node_kernel.h), which sets their signal words here.
  std::vector<int> nodes;
  int device_ordinal = 0;
  std::string rendezvous_dir;  // empty: abstract Unix socket names
  absl::Duration rendezvous_timeout = absl::Seconds(30);
  // The caller's allgather instead of the Unix-socket rendezvous (callback_rendezvous.h), for
  // processes that cannot meet on sockets; one node's groups only.
  BootstrapAllGather bootstrap;
};

// A 2D region of this rank's memory set to a reduction's identity at the start of every launch
// (before the entry announcement, so no peer reduces into it earlier).
struct IdentityFill {
  CUdeviceptr dst = 0;
  uint64_t pitch_bytes = 0;
  uint64_t width_elements = 0;
  uint64_t rows = 0;
  int element_bytes = 2;  // 2 or 4
  uint32_t value = 0;     // the identity's bits
};

// Everything one launch of a fused kernel needs, prepared once per (kernel, binding, backend).
struct KernelLaunch {
  CUfunction function = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {128, 1, 1};
  unsigned shared_bytes = 0;
  unsigned num_comm_ctas = 0;
  std::array<void*, kMaxOperands> operands{};  // this rank's
  std::array<int64_t, kMaxScalars> scalars{};
  CUdeviceptr peer_operands = 0;  // device table [kMaxOperands * world], or 0
  Backend backend = Backend::kCopyEngine;
  CopyProgram copy_program;       // copy-engine backend only
  std::vector<int> guarded_peers; // SM / direct: peers whose entry the kernel waits for
  std::vector<int> pulled_by;     // ranks that pull from this rank
  // Signals of every transfer whose destination is this rank: a launch ends only when all of
  // them arrived, so the collective's postcondition holds after Sync() (a producer kernel such
  // as GEMM+ReduceScatter never waits for what peers reduce into it).
  std::vector<IncomingSignal> incoming_signals;
  // Host-mapped words (device addresses) the kernel's tail waits to reach the epoch: the
  // inter-node proxy's "outgoing chunks copied out" word (InterNodeKernel). Not a stream wait,
  // which would queue the proxy's own copies behind it on a shared hardware queue.
  std::vector<uint64_t> proxy_epoch_words;
  // Set by Group::PrepareWaits from the fields above (launch_waits.h).
  std::shared_ptr<const DeviceBuffer> launch_waits;  // LaunchWaitOp[num_launch_waits]
  unsigned num_launch_waits = 0;
  unsigned num_control_ctas = 0;  // 1: CTA num_comm_ctas runs gates and tails
  std::vector<int> step_gates;    // per copy step: gate word index, or -1
  int num_gates = 0;              // gate words [0, num_gates) are this launch's
  // Per copy step, the gate word its signal and drained writes copy the epoch from when the
  // device counts the launch (copy_program.h's EpochSourceGates); its error when it cannot.
  absl::StatusOr<std::vector<int>> epoch_source_gates;
  WatchedGates watched_gates;     // the gated steps, for Sync()'s diagnosis (gate_watch.h)
  bool waits_prepared = false;
  // Plan buffers that only reductions write on this rank (e.g. ReduceScatter's "output", where
  // even the own contribution is a SUM into it) start every launch at the op's identity.
  std::vector<IdentityFill> identity_fills;
};

// Per-launch settings that do not change the kernel or its grid.
struct LaunchSettings {
  absl::Duration wait = absl::Milliseconds(2000);  // every device-side wait, and the host's watch
  // Diagnostics: device memory for the per-CTA records of impl/trace.cuh (4 x u64 per CTA of
  // the grid), or 0.
  CUdeviceptr cta_trace = 0;
  // Tiles dealt dynamically to kernels that claim them (FusedSchedule::claim: the group's tile
  // counter goes into the launch); off: claim deals statically, as first()/stride() do.
  bool dynamic_tiles = false;
  // Copy engine: issue a step's contiguous copies as one cuMemcpyBatchAsync that asks the driver
  // for the copy engines (CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE) where the driver has it.
  // Off: cuMemcpyAsync, which the driver may run as a kernel on the SMs (it does between two
  // processes' mappings of one GPU), competing with the fused kernel for them.
  bool prefer_copy_engines = true;
  // Non-null entries replace the launch's operand of that slot for this launch only (slots no
  // peer maps: OverlapRuntime::LocalOperandSlot checks).
  std::array<void*, kMaxOperands> operands{};
};

class LaunchGraph;

class Group {
 public:
  // Joins the group (rendezvous), retains the device's primary context, allocates and zeroes the
  // control block. Collective.
  static absl::StatusOr<std::unique_ptr<Group>> Create(const GroupOptions& options);
  ~Group();

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  // rank -> node (never empty: all zeros for a single-node group).
  const std::vector<int>& nodes() const { return nodes_; }
  bool same_node(int r) const { return nodes_[r] == nodes_[rank()]; }
  // This node's ranks on this rank's GPU (itself included; by device UUID): more than one where
  // ranks share a GPU (time-sliced or MPS clients), whose CTAs then compete for its SMs. Ranks
  // of other groups, or of other nodes played on the same GPU, are not counted.
  int ranks_on_device() const { return ranks_on_device_; }
  const Context& context() const { return context_; }
  const DriverApi& api() const { return context_.api(); }
  SymmetricHeap& heap() { return *heap_; }
  Rendezvous& rendezvous() { return *rendezvous_; }
  bool broken() const { return broken_; }
  // Launches issued by the host (a caller's graph replays are not counted).
  uint32_t epoch() const { return epoch_; }
  // The epoch after `e`. 0 is never one: words start at 0, and a device-counted copy-engine
  // launch's zeroed gates mean "not released" (the kernel's EnterLaunch skips it too).
  static uint32_t NextEpoch(uint32_t e) { return e + 1 == 0 ? 1 : e + 1; }
  // Whether `launch` takes its epoch on the device: SM and direct launches of a one-node group
  // always; copy-engine ones once a launch went into a caller's graph (the host lost count).
  bool DeviceEpoch(const KernelLaunch& launch) const {
    return single_node_ && (launch.backend != Backend::kCopyEngine || epoch_uncounted_);
  }

  // Device tables for FusedLaunchArgs: every rank's signal array.
  CUdeviceptr signals() const { return control_->local() + kSignalsOffset; }
  // Signal word `index` of rank `owner` (this node's ranks only), and this rank's chunk_ready
  // word of outgoing chunk `index`: what the inter-node proxy waits on and writes.
  CUdeviceptr signal_word(int owner, int index) const { return SignalWord(owner, index); }
  CUdeviceptr chunk_ready_word(int index) const { return ChunkReadyWord(index); }
  // Whether Sync() gave up on a launch and unblocked its streams: the words it wrote to do so
  // hold the epoch without their data, so nobody may act on them from then on. Any thread.
  bool abort_raised() const { return watch_.abort_raised(); }
  CUdeviceptr peer_signal_table() const { return peer_signal_table_.get(); }

  // Builds and uploads `launch`'s launch waits (its copy program, peers and incoming signals
  // set): sets launch_waits .. waits_prepared. Before the grid is sized (num_control_ctas).
  absl::Status PrepareWaits(KernelLaunch& launch);

  // Issues launch epoch()+1 on `stream` (see the protocol above). Asynchronous. On a stream
  // being captured into a graph: device-epoch launches only (FailedPrecondition otherwise).
  absl::Status Launch(const KernelLaunch& launch, CUstream stream, const LaunchSettings& timeouts);
  // Runs the kernel alone, no protocol: the identity-schedule (local) kernel of a baseline.
  // `dynamic_tiles`: as LaunchSettings::dynamic_tiles.
  absl::Status LaunchLocal(const KernelLaunch& launch, CUstream stream, bool dynamic_tiles);
  // Waits for every launch issued so far on `stream`; DeadlineExceeded naming the peer that did
  // not deliver (see the protocol above). Other errors: the failing CUDA call.
  absl::Status Sync(CUstream stream);

  // DeadlineExceeded from the kernel's timeout record (host-mapped: no stream involved); OK when
  // no device wait timed out. Sticky: the record is written once per group. Any thread.
  absl::Status RecordedTimeout() const { return watch_.RecordedTimeout(); }

  // Tests only: as if `count` launches had been issued and synced since the last one, on every
  // rank alike (each calls it between the same two launches): the host's count and the device's
  // epoch word jump, the protocol words the skipped launches would have written stay behind. So
  // a test reaches in one step the ages that days of launches reach (words 2^31 epochs behind).
  // FailedPrecondition when a launch is not synced yet or a caller's graph holds the count.
  absl::Status SkipEpochsForTesting(uint32_t count, CUstream stream);

  // Tests only: rank `owner`'s tile-progress word (launch_abi.h "Tile progress"), read through
  // the table this rank's kernels get, so a wrong entry shows. NotFound for a rank on another
  // node (its entry is null). Synchronous; meaningful once the launches that drew tiles ended.
  absl::StatusOr<uint32_t> TileProgressForTesting(int owner) const;

  // Captures one launch into a graph; see the file comment.
  absl::StatusOr<std::unique_ptr<LaunchGraph>> CaptureGraph(const KernelLaunch& launch,
                                                            const LaunchSettings& timeouts);

 private:
  // The epoch placeholder used while capturing a graph; every captured value equals it and each
  // replay replaces it (see the file comment). Never reached by real launches in a test's
  // lifetime.
  static constexpr uint32_t kCaptureEpoch = 0x40000000u;

  friend class LaunchGraph;
  explicit Group(GroupOptions options) : options_(std::move(options)) {}
  absl::Status Init();
  // How Issue puts a launch on its stream.
  struct IssueMode {
    bool device_epoch = false;  // the kernel takes its epoch; the stream carries no epoch value
    bool capturing = false;     // `stream` is being captured (ours or the caller's graph)
  };
  // Issues launch `epoch` (everything but bookkeeping).
  absl::Status Issue(const KernelLaunch& launch, CUstream stream, uint32_t epoch,
                     const LaunchSettings& timeouts, IssueMode mode);
  absl::Status IssueCaptured(const KernelLaunch& launch, CUstream stream,
                             const LaunchSettings& timeouts);
  // Host epoch, copy engine: rewrites on `stream` the launch's gates that launch `epoch` could
  // misread as released (StaleGates), and notes that it releases its gates at `epoch`.
  absl::Status RefreshStaleGates(const KernelLaunch& launch, CUstream stream, uint32_t epoch);
  // Marks the group broken (its ranks may be out of step), keeping the first cause; returns `why`.
  absl::Status Break(absl::Status why);
  // FailedPrecondition for any launch or Sync after the group broke, naming the first cause.
  absl::Status BrokenError() const;
  // FailedPrecondition for a launch of CaptureGraph (copy engine: host epoch) once a captured
  // launch left the count to the device.
  absl::Status CheckHostEpochCounted(const KernelLaunch& launch) const;
  // FailedPrecondition when `launch` cannot take its epoch on the device: a group spanning
  // nodes, or a copy-engine program with a step no gate word gives the epoch to.
  absl::Status CheckDeviceCountable(const KernelLaunch& launch) const;
  // The copy-engine gates Sync's watch samples while `launch` runs (null: none).
  static WatchedGates GatesToWatch(const KernelLaunch& launch);
  FusedLaunchArgs MakeArgs(const KernelLaunch& launch, uint32_t epoch,
                           const LaunchSettings& timeouts, bool device_epoch) const;
  // `timed_out` with the same-node peers that never entered launch `epoch` named first (read
  // from this rank's control block). Only once the launch's streams have ended: the read
  // goes through a stream.
  absl::Status WithAbsentPeers(const absl::Status& timed_out, uint32_t epoch);
  CUdeviceptr HostWordDevice(size_t offset) const { return watch_.WordDevice(offset); }
  // Copy-engine gate word `g` (host-mapped), as the device and the side streams address it.
  CUdeviceptr GateWord(int g) const {
    return HostWordDevice(offsetof(HostWords, gates) + sizeof(uint32_t) * g);
  }
  CUdeviceptr EnteredWord(int owner, int about) const {
    return control_->peer(owner) + kEnteredOffset + sizeof(uint32_t) * about;
  }
  CUdeviceptr DrainedWord(int owner, int about) const {
    return control_->peer(owner) + kDrainedOffset + sizeof(uint32_t) * about;
  }
  CUdeviceptr TileProgressWord(int owner) const {
    return control_->peer(owner) + kTileProgressOffset;
  }
  CUdeviceptr SignalWord(int owner, int index) const {
    return control_->peer(owner) + kSignalsOffset + sizeof(uint32_t) * index;
  }
  CUdeviceptr ChunkReadyWord(int index) const {
    return chunk_words_.get() + sizeof(uint32_t) * (kChunkCapacity + index);
  }
  CUdeviceptr StepCountersWord() const {
    return chunk_words_.get() + sizeof(uint32_t) * 2 * kChunkCapacity;
  }
  CUdeviceptr DeviceAbortWord() const {
    return StepCountersWord() + sizeof(uint32_t) * kStepCounterCapacity;
  }
  CUdeviceptr TileCounterWords() const { return DeviceAbortWord() + sizeof(uint32_t); }
  CUdeviceptr LaunchEpochWords() const { return TileCounterWords() + 2 * sizeof(uint32_t); }

  GroupOptions options_;
  std::vector<int> nodes_;
  Context context_;
  std::unique_ptr<Rendezvous> rendezvous_;
  std::unique_ptr<SymmetricHeap> heap_;
  SymmetricBuffer* control_ = nullptr;
  DeviceBuffer chunk_words_;        // chunk_counters[kChunkCapacity], chunk_ready[kChunkCapacity],
                                    // step_counters[kStepCounterCapacity], device abort word,
                                    // tile_counter[2], launch_epoch[2]
  DeviceBuffer step_claims_;        // u64 [kStepCounterCapacity], epoch-tagged (impl/pieces.cuh)
  DeviceBuffer peer_signal_table_;  // u32* [world]
  DeviceBuffer peer_entered_table_;  // u32* [world]: rank q's entered word about this rank
  DeviceBuffer tile_progress_table_;  // u32* [world]: rank q's tile-progress word
  LaunchWatch watch_;                // host-mapped words, launch-done event, Sync's watch
  Stream rescue_stream_;            // Init's memsets
  SideStreams side_streams_;        // the copy-engine backend's (side_streams.h)
  uint32_t epoch_ = 0;              // epoch of the last launch issued
  uint32_t synced_epoch_ = 0;
  bool single_node_ = true;
  int ranks_on_device_ = 1;
  // A launch went into a graph the caller replays: the host no longer knows the device's epoch
  // count, so every later launch takes the device epoch (DeviceEpoch), and CaptureGraph() of a
  // copy-engine launch is refused.
  bool epoch_uncounted_ = false;
  bool broken_ = false;
  absl::Status broken_cause_;  // why broken_ was set (the first failure)
  std::vector<uint32_t> gate_epochs_;  // per gate word: the host epoch it was last released at
  Stream capture_stream_;
};

// A captured launch; see Group's file comment. Replays advance the group's epoch.
class LaunchGraph {
 public:
  absl::Status Replay(CUstream stream);

 private:
  friend class Group;
  LaunchGraph() = default;
  Group* group_ = nullptr;
  KernelLaunch launch_;
  LaunchSettings timeouts_;
  bool device_epoch_ = false;  // as captured (Group::Issue)
  Graph graph_;
  CUgraphNode kernel_node_ = nullptr;
  CUDA_KERNEL_NODE_PARAMS kernel_params_{};
  struct MemOpNode {
    CUgraphNode node;
    std::vector<CUstreamBatchMemOpParams> ops;  // as captured (values relative to kCaptureEpoch)
    CUDA_BATCH_MEM_OP_NODE_PARAMS params;
  };
  std::vector<MemOpNode> memop_nodes_;
};

}  // namespace syncopate::cuda
