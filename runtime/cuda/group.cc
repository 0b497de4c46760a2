// The launch protocol of a node-local group; see group.h and control_block.h.
#include "runtime/cuda/group.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/base/status_macros.h"

namespace syncopate::cuda {
namespace {

// The epoch placeholder used while capturing a graph; every captured value equals it and each
// replay replaces it (group.h). Never reached by real launches in a test's lifetime.
constexpr uint32_t kCaptureEpoch = 0x40000000u;

std::string FormatRecord(const WaitTimeoutRecord& r) {
  std::string who = r.tile >= 0 ? absl::StrCat("tile ", r.tile)
                                : std::string("a communication CTA");
  return absl::StrFormat(
      "rank %d waited %d ms for chunk %d (signal %d) from rank %d: expected epoch %u, saw %u "
      "(%s timed out first; the launch was aborted)",
      r.rank, static_cast<int>(r.waited_ns / 1000000), r.chunk, r.signal, r.peer, r.expected,
      r.seen, who);
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

absl::StatusOr<Backend> ParseBackend(std::string_view name) {
  if (name == "copy_engine" || name == "ce") return Backend::kCopyEngine;
  if (name == "sm") return Backend::kSm;
  if (name == "direct") return Backend::kDirect;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown backend '", std::string(name), "' (copy_engine, sm, direct)"));
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
  ASSIGN_OR_RETURN(chunk_words_,
                   DeviceBuffer::Allocate(api, 2 * sizeof(uint32_t) * kChunkCapacity));
  CU_RETURN_IF_ERROR(api.cuMemsetD32Async(control_->local(), 0, control_->size() / 4,
                                          rescue_stream_.get()));
  CU_RETURN_IF_ERROR(
      api.cuMemsetD32Async(chunk_words_.get(), 0, 2 * kChunkCapacity, rescue_stream_.get()));
  std::vector<CUdeviceptr> table(world_size(), 0);  // 0 for ranks on other nodes
  for (int r = 0; r < world_size(); ++r) {
    if (same_node(r)) table[r] = SignalWord(r, 0);
  }
  ASSIGN_OR_RETURN(peer_signal_table_,
                   DeviceBuffer::Allocate(api, sizeof(CUdeviceptr) * world_size()));
  CU_RETURN_IF_ERROR(api.cuMemcpyHtoD(peer_signal_table_.get(), table.data(),
                                      sizeof(CUdeviceptr) * world_size()));
  ASSIGN_OR_RETURN(host_words_, PinnedHostBuffer::Allocate(api, sizeof(HostWords)));
  ASSIGN_OR_RETURN(readback_, PinnedHostBuffer::Allocate(
                                  api, sizeof(uint32_t) * (2 * kMaxRanks + kSignalCapacity +
                                                           kChunkCapacity + 2)));
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
                                const LaunchTimeouts& timeouts) const {
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
  args.abort_flag = reinterpret_cast<syncopate_u32*>(host_words_.device() +
                                                     offsetof(HostWords, abort_flag));
  return args;
}

absl::Status Group::Issue(const KernelLaunch& launch, CUstream stream, uint32_t epoch,
                          const LaunchTimeouts& timeouts) {
  const DriverApi& api = context_.api();
  const int me = rank();
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
  // Our own slots (entered[me], drained[me]) record progress for Sync()'s stall detection.
  for (int q = 0; q < world_size(); ++q) {
    if (!same_node(q)) continue;  // the inter-node proxy has its own epoch handshake
    CU_RETURN_IF_ERROR(api.cuStreamWriteValue32(stream, EnteredWord(q, me), epoch,
                                                CU_STREAM_WRITE_VALUE_DEFAULT));
  }
  last_waits_.clear();
  last_num_signals_ = launch.num_signals;
  last_num_chunks_ = launch.num_outgoing_chunks;
  if (launch.backend != Backend::kCopyEngine) {
    // 2. The kernel writes into / reads from these peers: wait until they entered this launch.
    for (int q : launch.guarded_peers) {
      if (q == me) continue;
      if (!same_node(q)) {
        return absl::InternalError(absl::StrCat("launch guards rank ", q, " on another node"));
      }
      CU_RETURN_IF_ERROR(api.cuStreamWaitValue32(stream, EnteredWord(me, q), epoch,
                                                 CU_STREAM_WAIT_VALUE_GEQ));
      last_waits_.push_back({WaitKind::kEntered, me, q});
    }
  }
  FusedLaunchArgs args = MakeArgs(launch, epoch, timeouts);
  void* params[] = {&args};
  const CopyProgram& program = launch.copy_program;
  const bool copy_engine = launch.backend == Backend::kCopyEngine && !program.steps.empty();
  if (copy_engine) {
    RETURN_IF_ERROR(EnsureSideStreams(program.num_channels));
    CU_RETURN_IF_ERROR(api.cuEventRecord(fork_event_.get(), stream));
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
      for (const WordWait& w : step.waits) {
        CUdeviceptr word = 0;
        switch (w.kind) {
          case WaitKind::kSignal:
            word = SignalWord(me, w.index);
            break;
          case WaitKind::kPeerSignal:
            word = SignalWord(w.rank, w.index);
            break;
          case WaitKind::kChunkReady:
            word = ChunkReadyWord(w.index);
            break;
          case WaitKind::kEntered:
            word = EnteredWord(me, w.index);
            break;
        }
        CU_RETURN_IF_ERROR(api.cuStreamWaitValue32(s, word, epoch, CU_STREAM_WAIT_VALUE_GEQ));
        last_waits_.push_back(w);
      }
      for (const Copy2D& c : step.copies) {
        if (c.rows == 1) {
          CU_RETURN_IF_ERROR(api.cuMemcpyAsync(c.dst, c.src, c.row_bytes, s));
          continue;
        }
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
  }
  // 3. The fused kernel.
  CU_RETURN_IF_ERROR(api.cuLaunchKernel(launch.function, launch.grid[0], launch.grid[1],
                                        launch.grid[2], launch.block[0], launch.block[1],
                                        launch.block[2], launch.shared_bytes, stream, params,
                                        nullptr));
  if (copy_engine) {
    for (int c = 0; c < program.num_channels; ++c) {
      CU_RETURN_IF_ERROR(api.cuEventRecord(join_events_[c].get(), side_streams_[c].get()));
      CU_RETURN_IF_ERROR(api.cuStreamWaitEvent(stream, join_events_[c].get(), 0));
    }
  }
  // 4. Everything destined to this rank has arrived (the kernel may not have waited for it).
  for (int sig : launch.incoming_signals) {
    CU_RETURN_IF_ERROR(
        api.cuStreamWaitValue32(stream, SignalWord(me, sig), epoch, CU_STREAM_WAIT_VALUE_GEQ));
    last_waits_.push_back({WaitKind::kSignal, me, sig});
  }
  // Sources others pull from stay untouched until they are drained.
  for (int q : launch.pulled_by) {
    if (q == me) continue;
    CU_RETURN_IF_ERROR(
        api.cuStreamWaitValue32(stream, DrainedWord(me, q), epoch, CU_STREAM_WAIT_VALUE_GEQ));
    last_waits_.push_back({WaitKind::kEntered, me, -1 - q});  // -1-q marks "drained[q]"
  }
  CU_RETURN_IF_ERROR(api.cuStreamWriteValue32(stream, DrainedWord(me, me), epoch,
                                              CU_STREAM_WRITE_VALUE_DEFAULT));
  return absl::OkStatus();
}

absl::Status Group::Launch(const KernelLaunch& launch, CUstream stream,
                           const LaunchTimeouts& timeouts) {
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
  FusedLaunchArgs args = MakeArgs(launch, 0, LaunchTimeouts{});
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
  volatile WaitTimeoutRecord* record =
      &static_cast<HostWords*>(host_words_.host())->record;
  const absl::Time start = absl::Now();
  absl::Time timed_out_seen = absl::InfiniteFuture();
  // Progress = this rank's own entered / finished words (entered[me], drained[me]). Launches in
  // a long queue keep changing them; a launch blocked on a peer does not.
  auto* progress = static_cast<volatile uint32_t*>(readback_.host()) + 2 * kMaxRanks +
                   kSignalCapacity + kChunkCapacity;
  uint64_t last_progress = ~0ull;
  absl::Time last_change = start;
  absl::Time last_read = absl::InfinitePast();
  const absl::Duration grace = std::max(absl::Milliseconds(200), last_wait_timeout_ / 2);
  const absl::Duration stall = std::max(absl::Milliseconds(500), 2 * last_wait_timeout_);
  int sleep_us = 20;
  while (true) {
    CUresult r = api.cuEventQuery(launch_done_.get());
    if (r == CUDA_SUCCESS) break;
    if (r != CUDA_ERROR_NOT_READY) {
      broken_ = true;
      return CuError(r, "cuEventQuery(launch done)", __FILE__, __LINE__);
    }
    const absl::Time now = absl::Now();
    if (record->timed_out != 0 && timed_out_seen == absl::InfiniteFuture()) timed_out_seen = now;
    if (now - last_read > absl::Milliseconds(10)) {
      last_read = now;
      CU_RETURN_IF_ERROR(api.cuMemcpyDtoHAsync(const_cast<uint32_t*>(progress),
                                               EnteredWord(rank(), rank()), 4,
                                               rescue_stream_.get()));
      CU_RETURN_IF_ERROR(api.cuMemcpyDtoHAsync(const_cast<uint32_t*>(progress + 1),
                                               DrainedWord(rank(), rank()), 4,
                                               rescue_stream_.get()));
      CU_RETURN_IF_ERROR(api.cuStreamSynchronize(rescue_stream_.get()));
      const uint64_t p = (static_cast<uint64_t>(progress[0]) << 32) | progress[1];
      if (p != last_progress) last_progress = p, last_change = now;
    }
    if (now - timed_out_seen > grace || now - last_change > stall) {
      absl::Status diagnosis = Diagnose(epoch_, now - last_change);
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
  if (record->timed_out != 0) {
    broken_ = true;
    WaitTimeoutRecord copy;
    std::memcpy(&copy, const_cast<WaitTimeoutRecord*>(record), sizeof(copy));
    return absl::DeadlineExceededError(FormatRecord(copy));
  }
  synced_epoch_ = epoch_;
  return absl::OkStatus();
}

absl::Status Group::Diagnose(uint32_t epoch, absl::Duration waited) {
  const DriverApi& api = context_.api();
  volatile WaitTimeoutRecord* record = &static_cast<HostWords*>(host_words_.host())->record;
  if (record->timed_out != 0) {
    WaitTimeoutRecord copy;
    std::memcpy(&copy, const_cast<WaitTimeoutRecord*>(record), sizeof(copy));
    return absl::DeadlineExceededError(FormatRecord(copy));
  }
  // Stream waits have no deadline of their own: read the words they wait on.
  auto* words = static_cast<uint32_t*>(readback_.host());
  CU_RETURN_IF_ERROR(api.cuMemcpyDtoHAsync(words, control_->local() + kEnteredOffset,
                                           sizeof(uint32_t) * 2 * kMaxRanks,
                                           rescue_stream_.get()));
  uint32_t* signal_words = words + 2 * kMaxRanks;
  uint32_t* ready_words = signal_words + kSignalCapacity;
  if (last_num_signals_ > 0) {
    CU_RETURN_IF_ERROR(api.cuMemcpyDtoHAsync(signal_words, signals(),
                                             sizeof(uint32_t) * last_num_signals_,
                                             rescue_stream_.get()));
  }
  CU_RETURN_IF_ERROR(api.cuMemcpyDtoHAsync(ready_words, ChunkReadyWord(0),
                                           sizeof(uint32_t) * kChunkCapacity,
                                           rescue_stream_.get()));
  CU_RETURN_IF_ERROR(api.cuStreamSynchronize(rescue_stream_.get()));
  const int ms = static_cast<int>(absl::ToInt64Milliseconds(waited));
  for (const WordWait& w : last_waits_) {
    uint32_t seen = 0;
    std::string what;
    switch (w.kind) {
      case WaitKind::kEntered:
        if (w.index >= 0) {
          seen = words[w.index];
          what = absl::StrCat("rank ", w.index, " to enter launch ", epoch,
                              " (it must start that launch before rank ", rank(),
                              " may write into its buffers)");
        } else {
          seen = words[kMaxRanks + (-1 - w.index)];
          what = absl::StrCat("rank ", -1 - w.index, " to finish pulling from rank ", rank());
        }
        break;
      case WaitKind::kSignal:
        seen = w.index < last_num_signals_ ? signal_words[w.index] : 0;
        what = absl::StrCat("signal ", w.index, " (a chunk forwarded to rank ", rank(), ")");
        break;
      case WaitKind::kPeerSignal:
        continue;  // not read back; reported only when nothing local explains the hang
      case WaitKind::kChunkReady:
        seen = ready_words[w.index];
        what = absl::StrCat("its own kernel to publish outgoing chunk ", w.index);
        break;
    }
    if (static_cast<int32_t>(seen - epoch) < 0) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "rank %d waited %d ms for %s: expected epoch %u, saw %u", rank(), ms, what, epoch,
          seen));
    }
  }
  return absl::DeadlineExceededError(absl::StrFormat(
      "rank %d: launch %u did not finish within %d ms and no wait explains it (kernel hung?)",
      rank(), epoch, ms));
}

absl::Status Group::Unblock(uint32_t epoch) {
  const DriverApi& api = context_.api();
  // Kernel waits give up at once; stream waits see the values they wait for.
  static_cast<volatile HostWords*>(host_words_.host())->abort_flag = 1;
  CUstream s = rescue_stream_.get();
  CU_RETURN_IF_ERROR(
      api.cuMemsetD32Async(control_->local() + kEnteredOffset, epoch, 2 * kMaxRanks, s));
  if (last_num_signals_ > 0) {
    CU_RETURN_IF_ERROR(api.cuMemsetD32Async(signals(), epoch, last_num_signals_, s));
  }
  CU_RETURN_IF_ERROR(api.cuMemsetD32Async(ChunkReadyWord(0), epoch, kChunkCapacity, s));
  CU_RETURN_IF_ERROR(api.cuStreamSynchronize(s));
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    CUresult r = api.cuEventQuery(launch_done_.get());
    if (r == CUDA_SUCCESS) return absl::OkStatus();
    if (r != CUDA_ERROR_NOT_READY) return CuError(r, "cuEventQuery", __FILE__, __LINE__);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return absl::InternalError("streams still blocked 10 s after unblocking");
}

// ---- Graphs ----

absl::StatusOr<std::unique_ptr<LaunchGraph>> Group::CaptureGraph(const KernelLaunch& launch,
                                                                 const LaunchTimeouts& timeouts) {
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
  g->waits_ = last_waits_;
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
  g.last_waits_ = waits_;
  g.last_num_signals_ = launch_.num_signals;
  CU_RETURN_IF_ERROR(api.cuEventRecord(g.launch_done_.get(), stream));
  return absl::OkStatus();
}

}  // namespace syncopate::cuda
