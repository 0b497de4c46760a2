// The launch protocol of a node-local group; see group.h and control_block.h.
#include "runtime/cuda/group.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"

namespace syncopate::cuda {
namespace {

// The epoch placeholder used while capturing a graph; every captured value equals it and each
// replay replaces it (group.h). Never reached by real launches in a test's lifetime.
constexpr uint32_t kCaptureEpoch = 0x40000000u;

// A 2D copy whose rows are back to back on both sides: one range.
bool IsContiguous(const Copy2D& c) {
  return c.rows == 1 || (c.src_pitch == c.row_bytes && c.dst_pitch == c.row_bytes);
}

}  // namespace

const char* BackendName(Backend backend) {
  switch (backend) {
    case Backend::kCopyEngine:
      return "copy_engine";
    case Backend::kSm:
      return "sm";
    case Backend::kDirect:
      return "direct";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<Group>> Group::Create(const GroupOptions& options) {
  if (options.world_size < 1 || options.world_size > kMaxRanks) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size ", options.world_size, " out of 1..", kMaxRanks));
  }
  ASSIGN_OR_RETURN(std::vector<int> nodes,
                   plan::ResolveNodeMap(options.world_size, options.nodes));
  if (options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", options.rank, " out of range for world size ", options.world_size));
  }
  auto group = std::unique_ptr<Group>(new Group(options));
  group->nodes_ = std::move(nodes);
  RETURN_IF_ERROR(group->Init());
  return group;
}

absl::Status Group::Init() {
  // The driver first: without a GPU there is no point in waiting for peers.
  ASSIGN_OR_RETURN(context_, Context::Retain(options_.device_ordinal));
  const DriverApi& api = context_.api();
  // This node's ranks rendezvous among themselves, under a per-node name when the group spans
  // nodes (processes playing different nodes may share a host).
  std::vector<int> members;
  for (int r = 0; r < world_size(); ++r) {
    if (same_node(r)) members.push_back(r);
  }
  const int index = static_cast<int>(std::find(members.begin(), members.end(), rank()) -
                                     members.begin());
  const bool multi_node = static_cast<int>(members.size()) != world_size();
  const std::string rendezvous_id =
      multi_node ? absl::StrCat(options_.group_id, ".node", nodes_[rank()]) : options_.group_id;
  absl::StatusOr<std::unique_ptr<NodeRendezvous>> connected = NodeRendezvous::Connect(
      {rendezvous_id, index, static_cast<int>(members.size()), options_.rendezvous_dir,
       options_.rendezvous_timeout});
  if (!connected.ok() && multi_node) {
    // The rendezvous numbers this node's ranks from 0: say which global rank each number is.
    std::vector<std::string> legend;
    for (size_t i = 0; i < members.size(); ++i) legend.push_back(absl::StrCat(i, " = rank ", members[i]));
    return absl::Status(connected.status().code(),
                        absl::StrCat(connected.status().message(), " (node ", nodes_[rank()],
                                     "'s rendezvous numbers its ranks: ",
                                     absl::StrJoin(legend, ", "), ")"));
  }
  if (!connected.ok()) return connected.status();
  rendezvous_ = *std::move(connected);
  heap_ = std::make_unique<SymmetricHeap>(context_, *rendezvous_, members, world_size());
  ASSIGN_OR_RETURN(control_, heap_->Allocate("syncopate.control", kControlBytes));
  ASSIGN_OR_RETURN(rescue_stream_, Stream::Create(api));
  ASSIGN_OR_RETURN(capture_stream_, Stream::Create(api));
  constexpr size_t kChunkWords = 2 * kChunkCapacity + kStepCounterCapacity + 1 + 2;
  ASSIGN_OR_RETURN(chunk_words_, DeviceBuffer::Allocate(api, sizeof(uint32_t) * kChunkWords));
  CU_RETURN_IF_ERROR(api.cuMemsetD32Async(control_->local(), 0, control_->size() / 4,
                                          rescue_stream_.get()));
  CU_RETURN_IF_ERROR(
      api.cuMemsetD32Async(chunk_words_.get(), 0, kChunkWords, rescue_stream_.get()));
  std::vector<CUdeviceptr> table(world_size(), 0);  // 0 for ranks on other nodes
  for (int r = 0; r < world_size(); ++r) {
    if (same_node(r)) table[r] = SignalWord(r, 0);
  }
  ASSIGN_OR_RETURN(peer_signal_table_,
                   DeviceBuffer::Allocate(api, sizeof(CUdeviceptr) * world_size()));
  CU_RETURN_IF_ERROR(api.cuMemcpyHtoD(peer_signal_table_.get(), table.data(),
                                      sizeof(CUdeviceptr) * world_size()));
  ASSIGN_OR_RETURN(host_words_, PinnedHostBuffer::Allocate(api, sizeof(HostWords)));
  ASSIGN_OR_RETURN(fork_event_, Event::Create(api));
  ASSIGN_OR_RETURN(launch_done_, Event::Create(api));
  RETURN_IF_ERROR(rescue_stream_.Synchronize());
  // No peer may write into this rank's control block before it is zeroed.
  return rendezvous_->Barrier();
}

Group::~Group() {
  // Peers hold their own references to this rank's physical memory, so a late peer write lands
  // in memory that is still allocated; only our own in-flight work must finish first.
  if (context_.get() != nullptr) {
    (void)context_.MakeCurrent();
    CU_LOG_IF_ERROR(context_.api().cuCtxSynchronize());
  }
}

absl::Status Group::EnsureSideStreams(int n) {
  const DriverApi& api = context_.api();
  while (static_cast<int>(side_streams_.size()) < n) {
    ASSIGN_OR_RETURN(Stream s, Stream::Create(api));
    side_streams_.push_back(std::move(s));
    ASSIGN_OR_RETURN(Event e, Event::Create(api));
    join_events_.push_back(std::move(e));
  }
  return absl::OkStatus();
}

FusedLaunchArgs Group::MakeArgs(const KernelLaunch& launch, uint32_t epoch,
                                const LaunchSettings& timeouts) const {
  FusedLaunchArgs args;
  std::memset(&args, 0, sizeof(args));
  for (int i = 0; i < kMaxOperands; ++i) args.operands[i] = launch.operands[i];
  for (int i = 0; i < kMaxScalars; ++i) args.scalars[i] = launch.scalars[i];
  args.rank = rank();
  args.world_size = world_size();
  args.epoch = epoch;
  args.num_comm_ctas = launch.num_comm_ctas;
  args.signals = reinterpret_cast<syncopate_u32*>(signals());
  args.peer_signals = reinterpret_cast<syncopate_u32* const*>(peer_signal_table_.get());
  args.peer_operands = reinterpret_cast<void* const*>(launch.peer_operands);
  args.chunk_counters = reinterpret_cast<syncopate_u32*>(chunk_words_.get());
  args.chunk_ready = reinterpret_cast<syncopate_u32*>(ChunkReadyWord(0));
  args.wait_timeout_ns = static_cast<syncopate_u64>(absl::ToInt64Nanoseconds(timeouts.wait));
  args.timeout_record = reinterpret_cast<WaitTimeoutRecord*>(host_words_.device());
  args.abort_flag =
      reinterpret_cast<syncopate_u32*>(HostWordDevice(offsetof(HostWords, abort_flag)));
  args.device_abort = reinterpret_cast<syncopate_u32*>(DeviceAbortWord());
  args.launch_waits = launch.launch_waits == nullptr
                          ? nullptr
                          : reinterpret_cast<const LaunchWaitOp*>(launch.launch_waits->get());
  args.num_launch_waits = launch.num_launch_waits;
  args.num_control_ctas = launch.num_control_ctas;
  args.gate_words = reinterpret_cast<syncopate_u32*>(HostWordDevice(offsetof(HostWords, gates)));
  args.step_counters = reinterpret_cast<syncopate_u32*>(StepCountersWord());
  args.cta_trace = reinterpret_cast<syncopate_u64*>(timeouts.cta_trace);
  args.tile_counter =
      timeouts.dynamic_tiles ? reinterpret_cast<syncopate_u32*>(TileCounterWords()) : nullptr;
  return args;
}

absl::Status Group::PrepareWaits(KernelLaunch& launch) {
  const bool copy_engine = launch.backend == Backend::kCopyEngine;
  ProtocolWords words;
  words.signal = [this](int owner, int index) { return SignalWord(owner, index); };
  words.entered = [this](int about) { return EnteredWord(rank(), about); };
  words.drained = [this](int about) { return DrainedWord(rank(), about); };
  words.chunk_ready = [this](int index) { return ChunkReadyWord(index); };
  for (int q : launch.guarded_peers) {
    if (q != rank() && !same_node(q)) {
      return absl::InternalError(absl::StrCat("launch guards rank ", q, " on another node"));
    }
  }
  ASSIGN_OR_RETURN(LaunchWaits waits,
                   BuildLaunchWaits(rank(), copy_engine ? &launch.copy_program : nullptr,
                                    launch.guarded_peers, launch.incoming_signals,
                                    launch.pulled_by, words, kGateCapacity,
                                    launch.proxy_epoch_words));
  launch.launch_waits = nullptr;
  if (!waits.ops.empty()) {
    const DriverApi& api = context_.api();
    RETURN_IF_ERROR(context_.MakeCurrent());
    const size_t bytes = sizeof(LaunchWaitOp) * waits.ops.size();
    ASSIGN_OR_RETURN(DeviceBuffer ops, DeviceBuffer::Allocate(api, bytes));
    CU_RETURN_IF_ERROR(api.cuMemcpyHtoD(ops.get(), waits.ops.data(), bytes));
    launch.launch_waits = std::make_shared<const DeviceBuffer>(std::move(ops));
  }
  launch.num_launch_waits = static_cast<unsigned>(waits.ops.size());
  launch.num_control_ctas = waits.control_cta ? 1u : 0u;
  launch.step_gates = std::move(waits.step_gate);
  auto watched = std::make_shared<std::vector<WatchedGate>>();
  const std::vector<CopyStep>& steps = launch.copy_program.steps;
  for (size_t i = 0; i < launch.step_gates.size() && i < steps.size(); ++i) {
    if (launch.step_gates[i] < 0) continue;
    watched->push_back({launch.step_gates[i], steps[i].transfer, steps[i].signal_rank});
  }
  launch.watched_gates = std::move(watched);
  launch.waits_prepared = true;
  return absl::OkStatus();
}

absl::Status Group::Issue(const KernelLaunch& launch, CUstream stream, uint32_t epoch,
                          const LaunchSettings& timeouts) {
  const DriverApi& api = context_.api();
  const int me = rank();
  const CopyProgram& program = launch.copy_program;
  const bool copy_engine = launch.backend == Backend::kCopyEngine && !program.steps.empty();
  if (!launch.waits_prepared || (copy_engine && launch.step_gates.size() != program.steps.size())) {
    return absl::FailedPreconditionError(
        "launch has no launch waits: prepare it with Group::PrepareWaits");
  }
  // 0. Reduction-only destinations start at the identity, before any peer may reduce into them.
  for (const IdentityFill& f : launch.identity_fills) {
    if (f.element_bytes == 2) {
      CU_RETURN_IF_ERROR(api.cuMemsetD2D16Async(f.dst, f.pitch_bytes,
                                                static_cast<unsigned short>(f.value),
                                                f.width_elements, f.rows, stream));
    } else {
      CU_RETURN_IF_ERROR(api.cuMemsetD2D32Async(f.dst, f.pitch_bytes, f.value, f.width_elements,
                                                f.rows, stream));
    }
  }
  // 1. Announce: this rank entered launch `epoch` (everything before it on `stream` is done).
  for (int q = 0; q < world_size(); ++q) {
    if (!same_node(q)) continue;  // the inter-node proxy has its own epoch handshake
    CU_RETURN_IF_ERROR(api.cuStreamWriteValue32(stream, EnteredWord(q, me), epoch,
                                                CU_STREAM_WRITE_VALUE_DEFAULT));
  }
  CU_RETURN_IF_ERROR(api.cuStreamWriteValue32(
      stream, HostWordDevice(offsetof(HostWords, progress_entered)), epoch,
      CU_STREAM_WRITE_VALUE_DEFAULT));
  FusedLaunchArgs args = MakeArgs(launch, epoch, timeouts);
  void* params[] = {&args};
  gate_watch_.Arm(copy_engine ? launch.watched_gates : nullptr);
  if (copy_engine) {
    RETURN_IF_ERROR(EnsureSideStreams(program.num_channels));
    CU_RETURN_IF_ERROR(api.cuEventRecord(fork_event_.get(), stream));
  }
  // 2. The fused kernel, before any side-stream work that waits for what it writes.
  CU_RETURN_IF_ERROR(api.cuLaunchKernel(launch.function, launch.grid[0], launch.grid[1],
                                        launch.grid[2], launch.block[0], launch.block[1],
                                        launch.block[2], launch.shared_bytes, stream, params,
                                        nullptr));
  // 3. Copy engine: each step waits only for its gate word (host-mapped, released by the kernel
  // above or by the host).
  if (copy_engine) {
    for (int c = 0; c < program.num_channels; ++c) {
      CU_RETURN_IF_ERROR(api.cuStreamWaitEvent(side_streams_[c].get(), fork_event_.get(), 0));
    }
    std::set<int> referenced;
    for (const CopyStep& s : program.steps) referenced.insert(s.after_steps.begin(), s.after_steps.end());
    while (step_events_.size() < program.steps.size()) {
      ASSIGN_OR_RETURN(Event e, Event::Create(api));
      step_events_.push_back(std::move(e));
    }
    for (size_t i = 0; i < program.steps.size(); ++i) {
      const CopyStep& step = program.steps[i];
      CUstream s = side_streams_[step.channel].get();
      for (int after : step.after_steps) {
        CU_RETURN_IF_ERROR(api.cuStreamWaitEvent(s, step_events_[after].get(), 0));
      }
      if (launch.step_gates[i] >= 0) {
        const CUdeviceptr gate = HostWordDevice(offsetof(HostWords, gates) +
                                                sizeof(uint32_t) * launch.step_gates[i]);
        CU_RETURN_IF_ERROR(api.cuStreamWaitValue32(s, gate, epoch, CU_STREAM_WAIT_VALUE_GEQ));
      }
      RETURN_IF_ERROR(
          IssueContiguousCopies(step, s, timeouts.prefer_copy_engines && epoch != kCaptureEpoch));
      for (const Copy2D& c : step.copies) {
        if (IsContiguous(c)) continue;
        CUDA_MEMCPY2D m;
        std::memset(&m, 0, sizeof(m));
        m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        m.srcDevice = c.src;
        m.srcPitch = c.src_pitch;
        m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        m.dstDevice = c.dst;
        m.dstPitch = c.dst_pitch;
        m.WidthInBytes = c.row_bytes;
        m.Height = c.rows;
        CU_RETURN_IF_ERROR(api.cuMemcpy2DAsync(&m, s));
      }
      // The default write carries a fence: the copies above are visible before the signal.
      if (step.signal >= 0) {
        CU_RETURN_IF_ERROR(api.cuStreamWriteValue32(s, SignalWord(step.signal_rank, step.signal),
                                                    epoch, CU_STREAM_WRITE_VALUE_DEFAULT));
      }
      if (step.drained_rank >= 0) {
        CU_RETURN_IF_ERROR(api.cuStreamWriteValue32(s, DrainedWord(step.drained_rank, me), epoch,
                                                    CU_STREAM_WRITE_VALUE_DEFAULT));
      }
      if (referenced.count(static_cast<int>(i))) {
        CU_RETURN_IF_ERROR(api.cuEventRecord(step_events_[i].get(), s));
      }
    }
    for (int c = 0; c < program.num_channels; ++c) {
      CU_RETURN_IF_ERROR(api.cuEventRecord(join_events_[c].get(), side_streams_[c].get()));
      CU_RETURN_IF_ERROR(api.cuStreamWaitEvent(stream, join_events_[c].get(), 0));
    }
  }
  // 4. The kernel waited for everything destined to this rank (its tail waits).
  CU_RETURN_IF_ERROR(api.cuStreamWriteValue32(
      stream, HostWordDevice(offsetof(HostWords, progress_finished)), epoch,
      CU_STREAM_WRITE_VALUE_DEFAULT));
  return absl::OkStatus();
}

absl::Status Group::IssueContiguousCopies(const CopyStep& step, CUstream s, bool batch) {
  const DriverApi& api = context_.api();
  std::vector<CUdeviceptr> dsts, srcs;
  std::vector<size_t> sizes;
  for (const Copy2D& c : step.copies) {
    if (!IsContiguous(c)) continue;
    dsts.push_back(c.dst);
    srcs.push_back(c.src);
    sizes.push_back(c.row_bytes * c.rows);  // one copy per contiguous range
  }
  if (dsts.empty()) return absl::OkStatus();
  if (batch && api.cuMemcpyBatchAsync != nullptr) {
    // The sources are written earlier on the launch stream (the gate orders them): stream order.
    CUmemcpyAttributes attrs{};
    attrs.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    attrs.flags = CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE;
    size_t first = 0;
    CU_RETURN_IF_ERROR(api.cuMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), dsts.size(),
                                              &attrs, &first, 1, s));
    return absl::OkStatus();
  }
  for (size_t i = 0; i < dsts.size(); ++i) {
    CU_RETURN_IF_ERROR(api.cuMemcpyAsync(dsts[i], srcs[i], sizes[i], s));
  }
  return absl::OkStatus();
}

absl::Status Group::Launch(const KernelLaunch& launch, CUstream stream,
                           const LaunchSettings& timeouts) {
  if (broken_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "group '", options_.group_id, "' is broken after an earlier failed launch (its ranks are "
        "out of step); form a new group"));
  }
  if (launch.function == nullptr) return absl::InvalidArgumentError("launch has no kernel");
  const DriverApi& api = context_.api();
  RETURN_IF_ERROR(context_.MakeCurrent());
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  CU_RETURN_IF_ERROR(api.cuStreamIsCapturing(stream, &capture));
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    return absl::FailedPreconditionError(
        "Launch() on a stream under CUDA-graph capture: a replayed capture would reuse this "
        "launch's epoch; use Group::CaptureGraph / LaunchGraph::Replay");
  }
  const uint32_t epoch = epoch_ + 1;
  absl::Status issued = Issue(launch, stream, epoch, timeouts);
  if (!issued.ok()) {
    broken_ = true;  // part of the launch may be queued: this rank is out of step
    return issued;
  }
  epoch_ = epoch;
  last_wait_timeout_ = timeouts.wait;
  CU_RETURN_IF_ERROR(api.cuEventRecord(launch_done_.get(), stream));
  return absl::OkStatus();
}

absl::Status Group::LaunchLocal(const KernelLaunch& launch, CUstream stream) {
  const DriverApi& api = context_.api();
  RETURN_IF_ERROR(context_.MakeCurrent());
  FusedLaunchArgs args = MakeArgs(launch, 0, LaunchSettings{});
  void* params[] = {&args};
  CU_RETURN_IF_ERROR(api.cuLaunchKernel(launch.function, launch.grid[0], launch.grid[1],
                                        launch.grid[2], launch.block[0], launch.block[1],
                                        launch.block[2], launch.shared_bytes, stream, params,
                                        nullptr));
  return absl::OkStatus();
}

absl::Status Group::Sync(CUstream stream) {
  const DriverApi& api = context_.api();
  RETURN_IF_ERROR(context_.MakeCurrent());
  if (epoch_ == synced_epoch_) {
    CU_RETURN_IF_ERROR(api.cuStreamSynchronize(stream));
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
        return absl::InternalError(absl::StrCat(diagnosis.message(), "; and unblocking failed: ",
                                                unblocked.message()));
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

absl::StatusOr<std::unique_ptr<LaunchGraph>> Group::CaptureGraph(const KernelLaunch& launch,
                                                                 const LaunchSettings& timeouts) {
  if (broken_) return absl::FailedPreconditionError("group is broken");
  const DriverApi& api = context_.api();
  RETURN_IF_ERROR(context_.MakeCurrent());
  auto g = std::unique_ptr<LaunchGraph>(new LaunchGraph);
  g->group_ = this;
  g->launch_ = launch;
  g->timeouts_ = timeouts;
  CUstream cs = capture_stream_.get();
  CU_RETURN_IF_ERROR(api.cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_RELAXED));
  captured_launch_ = true;
  absl::Status issued = Issue(launch, cs, kCaptureEpoch, timeouts);
  captured_launch_ = false;
  CUgraph graph = nullptr;
  CUresult ended = api.cuStreamEndCapture(cs, &graph);
  g->graph_ = graph;  // owned by g from here (destroyed with it)
  RETURN_IF_ERROR(issued);
  CU_RETURN_IF_ERROR(ended);
  size_t n = 0;
  CU_RETURN_IF_ERROR(api.cuGraphGetNodes(graph, nullptr, &n));
  std::vector<CUgraphNode> nodes(n);
  CU_RETURN_IF_ERROR(api.cuGraphGetNodes(graph, nodes.data(), &n));
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type;
    CU_RETURN_IF_ERROR(api.cuGraphNodeGetType(node, &type));
    if (type == CU_GRAPH_NODE_TYPE_KERNEL) {
      if (g->kernel_node_ != nullptr) {
        return absl::InternalError("captured launch has more than one kernel node");
      }
      g->kernel_node_ = node;
      CU_RETURN_IF_ERROR(api.cuGraphKernelNodeGetParams(node, &g->kernel_params_));
    } else if (type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP) {
      LaunchGraph::MemOpNode m;
      m.node = node;
      CU_RETURN_IF_ERROR(api.cuGraphBatchMemOpNodeGetParams(node, &m.params));
      m.ops.assign(m.params.paramArray, m.params.paramArray + m.params.count);
      g->memop_nodes_.push_back(std::move(m));
    }
  }
  if (g->kernel_node_ == nullptr) return absl::InternalError("captured launch has no kernel node");
  CU_RETURN_IF_ERROR(api.cuGraphInstantiateWithFlags(&g->exec_, graph, 0));
  return g;
}

LaunchGraph::~LaunchGraph() {
  if (group_ == nullptr) return;
  const DriverApi& api = group_->api();
  if (exec_) CU_LOG_IF_ERROR(api.cuGraphExecDestroy(exec_));
  if (graph_) CU_LOG_IF_ERROR(api.cuGraphDestroy(graph_));
}

absl::Status LaunchGraph::Replay(CUstream stream) {
  Group& g = *group_;
  if (g.broken_) return absl::FailedPreconditionError("group is broken");
  const DriverApi& api = g.api();
  RETURN_IF_ERROR(g.context_.MakeCurrent());
  const uint32_t epoch = g.epoch_ + 1;
  FusedLaunchArgs args = g.MakeArgs(launch_, epoch, timeouts_);
  void* params[] = {&args};
  CUDA_KERNEL_NODE_PARAMS kp = kernel_params_;
  kp.kernelParams = params;
  kp.extra = nullptr;
  CU_RETURN_IF_ERROR(api.cuGraphExecKernelNodeSetParams(exec_, kernel_node_, &kp));
  for (MemOpNode& m : memop_nodes_) {
    std::vector<CUstreamBatchMemOpParams> ops = m.ops;
    for (CUstreamBatchMemOpParams& op : ops) {
      // Every captured value is the capture epoch (waits GEQ it, writes of it).
      if (op.operation == CU_STREAM_MEM_OP_WAIT_VALUE_32) op.waitValue.value = epoch;
      if (op.operation == CU_STREAM_MEM_OP_WRITE_VALUE_32) op.writeValue.value = epoch;
    }
    CUDA_BATCH_MEM_OP_NODE_PARAMS p = m.params;
    p.paramArray = ops.data();
    CU_RETURN_IF_ERROR(api.cuGraphExecBatchMemOpNodeSetParams(exec_, m.node, &p));
  }
  CU_RETURN_IF_ERROR(api.cuGraphLaunch(exec_, stream));
  g.epoch_ = epoch;
  g.last_wait_timeout_ = timeouts_.wait;
  CU_RETURN_IF_ERROR(api.cuEventRecord(g.launch_done_.get(), stream));
  return absl::OkStatus();
}

}  // namespace syncopate::cuda
