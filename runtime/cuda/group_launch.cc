// Issuing a launch of the protocol (group.h, control_block.h): the kernel's arguments, the
// copy-engine gates it watches, and the side streams' copies and flags.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "runtime/cuda/group.h"

namespace syncopate::cuda {
FusedLaunchArgs Group::MakeArgs(const KernelLaunch& launch, uint32_t epoch,
                                const LaunchSettings& timeouts, bool device_epoch) const {
  FusedLaunchArgs args;
  std::memset(&args, 0, sizeof(args));
  for (int i = 0; i < kMaxOperands; ++i) {
    args.operands[i] = timeouts.operands[i] != nullptr ? timeouts.operands[i] : launch.operands[i];
  }
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
  args.timeout_record =
      reinterpret_cast<WaitTimeoutRecord*>(HostWordDevice(offsetof(HostWords, record)));
  args.abort_flag =
      reinterpret_cast<syncopate_u32*>(HostWordDevice(offsetof(HostWords, abort_flag)));
  args.device_abort = reinterpret_cast<syncopate_u32*>(DeviceAbortWord());
  args.launch_waits = launch.launch_waits == nullptr
                          ? nullptr
                          : reinterpret_cast<const LaunchWaitOp*>(launch.launch_waits->get());
  args.num_launch_waits = launch.num_launch_waits;
  args.num_control_ctas = launch.num_control_ctas;
  args.gate_words = reinterpret_cast<syncopate_u32*>(GateWord(0));
  args.step_counters = reinterpret_cast<syncopate_u32*>(StepCountersWord());
  args.step_claims = reinterpret_cast<syncopate_u64*>(step_claims_.get());
  args.cta_trace = reinterpret_cast<syncopate_u64*>(timeouts.cta_trace);
  if (timeouts.dynamic_tiles) {
    args.tile_counter = reinterpret_cast<syncopate_u32*>(TileCounterWords());
    args.tile_progress = reinterpret_cast<syncopate_u32* const*>(tile_progress_table_.get());
  }
  if (device_epoch) {
    args.launch_epoch = reinterpret_cast<syncopate_u32*>(LaunchEpochWords());
    args.peer_entered = reinterpret_cast<syncopate_u32* const*>(peer_entered_table_.get());
    args.progress =
        reinterpret_cast<syncopate_u32*>(HostWordDevice(offsetof(HostWords, progress_entered)));
  }
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
                                    launch.guarded_peers, launch.incoming_signals, launch.pulled_by,
                                    words, kGateCapacity, launch.proxy_epoch_words));
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
  launch.num_gates = waits.num_gates;
  if (copy_engine) {
    launch.epoch_source_gates = EpochSourceGates(launch.copy_program, launch.step_gates);
  }
  auto watched = std::make_shared<std::vector<WatchedGate>>();
  const std::vector<CopyStep>& steps = launch.copy_program.steps;
  for (size_t i = 0; i < launch.step_gates.size() && i < steps.size(); ++i) {
    if (launch.step_gates[i] < 0) continue;
    watched->push_back({launch.step_gates[i], steps[i].transfer, steps[i].signal_rank});
  }
  launch.watched_gates = std::move(watched);
  // The side streams and events the launch's copies will use, made now rather than at its first
  // issue, which may be under the caller's CUDA-graph capture.
  if (copy_engine) {
    RETURN_IF_ERROR(
        side_streams_.Reserve(launch.copy_program.num_channels, launch.copy_program.steps.size()));
  }
  launch.waits_prepared = true;
  return absl::OkStatus();
}

absl::Status Group::Issue(const KernelLaunch& launch, CUstream stream, uint32_t epoch,
                          const LaunchSettings& timeouts, IssueMode mode) {
  const bool device_epoch = mode.device_epoch;
  const DriverApi& api = context_.api();
  const int me = rank();
  const CopyProgram& program = launch.copy_program;
  const bool copy_engine = launch.backend == Backend::kCopyEngine && !program.steps.empty();
  if (!launch.waits_prepared || (copy_engine && launch.step_gates.size() != program.steps.size())) {
    return absl::FailedPreconditionError(
        "launch has no launch waits: prepare it with Group::PrepareWaits");
  }
  StepEpoch step_epoch{.value = epoch};
  if (copy_engine && device_epoch) {
    RETURN_IF_ERROR(CheckDeviceCountable(launch));
    step_epoch.source_gates = &*launch.epoch_source_gates;
  }
  // 0. Reduction-only destinations start at the identity, before any peer may reduce into them.
  for (const IdentityFill& f : launch.identity_fills) {
    if (f.element_bytes == 2) {
      CU_RETURN_IF_ERROR(api.cuMemsetD2D16Async(f.dst, f.pitch_bytes,
                                                static_cast<unsigned short>(f.value),
                                                f.width_elements, f.rows, stream));
    } else {
      CU_RETURN_IF_ERROR(
          api.cuMemsetD2D32Async(f.dst, f.pitch_bytes, f.value, f.width_elements, f.rows, stream));
    }
  }
  // 1. Announce: this rank entered launch `epoch` (everything before it on `stream` is done).
  // A device-epoch kernel announces itself; a host-epoch launch also keeps the device's epoch
  // word in step, for the device-epoch launches that follow it.
  if (step_epoch.source_gates != nullptr) {
    // The side streams wait for a nonzero gate: zero this launch's first (the last launch's
    // side streams have joined `stream`, so none still reads them). Stream writes, the
    // operation made for host-mapped words, capturable. With the default flag: CUDA 12's stream
    // memory operations refuse CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER (CUDA_ERROR_INVALID_VALUE
    // on an H100, driver 580), and the barrier costs nothing the kernel after them would not.
    for (int g = 0; g < launch.num_gates; ++g) {
      CU_RETURN_IF_ERROR(
          api.cuStreamWriteValue32(stream, GateWord(g), 0, CU_STREAM_WRITE_VALUE_DEFAULT));
    }
  }
  if (copy_engine && !device_epoch && !mode.capturing) {
    RETURN_IF_ERROR(RefreshStaleGates(launch, stream, epoch));
  }
  if (!device_epoch) {
    for (int q = 0; q < world_size(); ++q) {
      if (!same_node(q)) continue;  // the inter-node proxy has its own epoch handshake
      CU_RETURN_IF_ERROR(api.cuStreamWriteValue32(stream, EnteredWord(q, me), epoch,
                                                  CU_STREAM_WRITE_VALUE_DEFAULT));
    }
    CU_RETURN_IF_ERROR(
        api.cuStreamWriteValue32(stream, HostWordDevice(offsetof(HostWords, progress_entered)),
                                 epoch, CU_STREAM_WRITE_VALUE_DEFAULT));
    CU_RETURN_IF_ERROR(
        api.cuStreamWriteValue32(stream, LaunchEpochWords(), epoch, CU_STREAM_WRITE_VALUE_DEFAULT));
  }
  FusedLaunchArgs args = MakeArgs(launch, epoch, timeouts, device_epoch);
  void* params[] = {&args};
  if (copy_engine) RETURN_IF_ERROR(side_streams_.Fork(stream, program.num_channels));
  // 2. The fused kernel, before any side-stream work that waits for what it writes.
  CU_RETURN_IF_ERROR(api.cuLaunchKernel(
      launch.function, launch.grid[0], launch.grid[1], launch.grid[2], launch.block[0],
      launch.block[1], launch.block[2], launch.shared_bytes, stream, params, nullptr));
  // 3. Copy engine: each step waits only for its gate word (host-mapped, released by the kernel
  // above or by the host).
  if (copy_engine) {
    const CopyStepWords words{
        .gate = [this](int g) { return GateWord(g); },
        .signal = [this](int owner, int index) { return SignalWord(owner, index); },
        .drained = [this](int owner, int about) { return DrainedWord(owner, about); },
        .fence_scratch = HostWordDevice(offsetof(HostWords, fence_scratch))};
    // cuMemcpyBatchAsync has no graph node: plain copies while capturing.
    RETURN_IF_ERROR(side_streams_.Issue(program, launch.step_gates, stream, step_epoch,
                                        timeouts.prefer_copy_engines && !mode.capturing, words,
                                        me));
  }
  // 4. The kernel waited for everything destined to this rank (its tail waits).
  if (!device_epoch) {
    CU_RETURN_IF_ERROR(
        api.cuStreamWriteValue32(stream, HostWordDevice(offsetof(HostWords, progress_finished)),
                                 epoch, CU_STREAM_WRITE_VALUE_DEFAULT));
  }
  return absl::OkStatus();
}

absl::Status Group::SkipEpochsForTesting(uint32_t count, CUstream stream) {
  if (epoch_ != synced_epoch_ || epoch_uncounted_ || broken_) {
    return absl::FailedPreconditionError(
        "SkipEpochsForTesting: a launch is not synced yet, or the device holds the count");
  }
  const uint32_t epoch = NextEpoch(epoch_ + count - 1);  // `count` on, skipping 0 as launches do
  const DriverApi& api = context_.api();
  RETURN_IF_ERROR(context_.MakeCurrent());
  CU_RETURN_IF_ERROR(
      api.cuStreamWriteValue32(stream, LaunchEpochWords(), epoch, CU_STREAM_WRITE_VALUE_DEFAULT));
  CU_RETURN_IF_ERROR(api.cuStreamSynchronize(stream));
  epoch_ = synced_epoch_ = epoch;
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> Group::TileProgressForTesting(int owner) const {
  if (owner < 0 || owner >= world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TileProgressForTesting: rank ", owner, " of ", world_size()));
  }
  const DriverApi& api = context_.api();
  RETURN_IF_ERROR(context_.MakeCurrent());
  CUdeviceptr word = 0;
  CU_RETURN_IF_ERROR(api.cuMemcpyDtoH(
      &word, tile_progress_table_.get() + sizeof(CUdeviceptr) * owner, sizeof(word)));
  if (word == 0) {
    return absl::NotFoundError(
        absl::StrCat("rank ", owner, " is on another node: no tile-progress word mapped"));
  }
  uint32_t value = 0;
  CU_RETURN_IF_ERROR(api.cuMemcpyDtoH(&value, word, sizeof(value)));
  return value;
}

absl::Status Group::RefreshStaleGates(const KernelLaunch& launch, CUstream stream, uint32_t epoch) {
  const DriverApi& api = context_.api();
  for (int g : StaleGates(gate_epochs_, launch.num_gates, epoch)) {
    CU_RETURN_IF_ERROR(
        api.cuStreamWriteValue32(stream, GateWord(g), epoch - 1, CU_STREAM_WRITE_VALUE_DEFAULT));
  }
  if (static_cast<int>(gate_epochs_.size()) < launch.num_gates)
    gate_epochs_.resize(launch.num_gates);
  for (int g = 0; g < launch.num_gates; ++g) gate_epochs_[g] = epoch;
  return absl::OkStatus();
}

absl::Status Group::Break(absl::Status why) {
  if (!broken_) broken_cause_ = why;
  broken_ = true;
  return why;
}

absl::Status Group::BrokenError() const {
  return absl::FailedPreconditionError(
      absl::StrCat("group '", options_.group_id,
                   "' is broken after an earlier failed launch (its ranks are out of step; ",
                   broken_cause_.message(), "); form a new group"));
}

absl::Status Group::CheckHostEpochCounted(const KernelLaunch& launch) const {
  if (!epoch_uncounted_ || launch.backend != Backend::kCopyEngine) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "group '", options_.group_id,
      "': a copy-engine launch captured by CaptureGraph() takes "
      "its epoch from the host, which lost count when a launch of this group went into a CUDA "
      "graph the caller replays; capture it in the caller's graph instead (Launch() on a "
      "capturing stream)"));
}

absl::Status Group::CheckDeviceCountable(const KernelLaunch& launch) const {
  if (!single_node_) {
    return absl::FailedPreconditionError(
        "a launch of a group spanning nodes takes its epoch from the host (the inter-node "
        "proxy's handshake carries it), so it cannot go into a CUDA graph the caller replays");
  }
  if (launch.backend == Backend::kCopyEngine && !launch.epoch_source_gates.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this copy-engine launch cannot take its epoch on the device, as a launch in a graph "
        "the caller replays must: ",
        launch.epoch_source_gates.status().message()));
  }
  return absl::OkStatus();
}

WatchedGates Group::GatesToWatch(const KernelLaunch& launch) {
  const bool copy_engine =
      launch.backend == Backend::kCopyEngine && !launch.copy_program.steps.empty();
  return copy_engine ? launch.watched_gates : nullptr;
}

absl::Status Group::Launch(const KernelLaunch& launch, CUstream stream,
                           const LaunchSettings& timeouts) {
  if (broken_) return BrokenError();
  if (launch.function == nullptr) return absl::InvalidArgumentError("launch has no kernel");
  const DriverApi& api = context_.api();
  RETURN_IF_ERROR(context_.MakeCurrent());
  ASSIGN_OR_RETURN(const bool capturing, StreamIsCapturing(api, stream));
  if (capturing) return IssueCaptured(launch, stream, timeouts);
  const bool device_epoch = DeviceEpoch(launch);
  if (device_epoch) RETURN_IF_ERROR(CheckDeviceCountable(launch));  // refused, not broken
  const uint32_t epoch = NextEpoch(epoch_);
  // Part of a failed launch may be queued: this rank is out of step.
  if (absl::Status issued = Issue(launch, stream, epoch, timeouts, {.device_epoch = device_epoch});
      !issued.ok()) {
    return Break(issued);
  }
  epoch_ = epoch;
  // Armed only now, for the launch Sync will watch: a launch captured meanwhile (ours or the
  // caller's) must not replace the gates of one still running.
  watch_.Arm(GatesToWatch(launch));
  if (absl::Status issued = watch_.Issued(stream, timeouts.wait); !issued.ok()) {
    return Break(issued);  // Sync would watch the previous launch's event
  }
  return absl::OkStatus();
}

// A launch recorded into the caller's graph: device epoch only (a host epoch would be the same
// value at every replay), on either backend. The host's count, Sync's bookkeeping and the
// launch-done event stay as they were: replays happen without us. From here on every launch of
// the group takes its epoch on the device (DeviceEpoch).
absl::Status Group::IssueCaptured(const KernelLaunch& launch, CUstream stream,
                                  const LaunchSettings& timeouts) {
  RETURN_IF_ERROR(CheckDeviceCountable(launch));
  if (absl::Status issued = Issue(launch, stream, NextEpoch(epoch_), timeouts,
                                  {.device_epoch = true, .capturing = true});
      !issued.ok()) {
    return Break(issued);
  }
  epoch_uncounted_ = true;
  watch_.ExtendWait(timeouts.wait);  // Sync watches the replays (group_watchdog.cc)
  return absl::OkStatus();
}

absl::Status Group::LaunchLocal(const KernelLaunch& launch, CUstream stream, bool dynamic_tiles) {
  const DriverApi& api = context_.api();
  RETURN_IF_ERROR(context_.MakeCurrent());
  // A launch that aborted may have left the tile counter mid-way (launch_abi.h).
  if (dynamic_tiles && broken_) return BrokenError();
  LaunchSettings settings;
  settings.dynamic_tiles = dynamic_tiles;
  FusedLaunchArgs args = MakeArgs(launch, 0, settings, /*device_epoch=*/false);
  void* params[] = {&args};
  CU_RETURN_IF_ERROR(api.cuLaunchKernel(
      launch.function, launch.grid[0], launch.grid[1], launch.grid[2], launch.block[0],
      launch.block[1], launch.block[2], launch.shared_bytes, stream, params, nullptr));
  return absl::OkStatus();
}

}  // namespace syncopate::cuda
