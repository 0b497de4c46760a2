// The public GPU runtime API; see overlap_runtime.h.
#include "runtime/cuda/overlap_runtime.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/base/status_macros.h"
#include "jit/build/kernel_build.h"
#include "jit/compiler/copy_descriptors.h"
#include "runtime/cuda/kernel_loader.h"

namespace syncopate::cuda {
namespace {

// Bits of a reduction's identity in `dtype` (SUM: 0; MAX: -inf).
absl::StatusOr<uint32_t> IdentityBits(plan::ReduceOp op, plan::DType dtype) {
  if (op == plan::ReduceOp::kSum) return 0u;
  switch (dtype) {
    case plan::DType::kBF16:
      return 0xFF80u;
    case plan::DType::kF16:
      return 0xFC00u;
    case plan::DType::kF32:
      return 0xFF800000u;
    default:
      return absl::UnimplementedError(absl::StrCat("MAX reduction into ", plan::DTypeName(dtype)));
  }
}

// Regions of this rank that only reductions write: not initial data, no plain transfer into them.
absl::StatusOr<std::vector<IdentityFill>> IdentityFills(
    const plan::Plan& plan, int me, const std::map<std::string, std::vector<CUdeviceptr>>& addr) {
  std::vector<IdentityFill> fills;
  const std::vector<const plan::Transfer*> all = plan.TransfersById();
  for (const plan::Transfer* t : all) {
    if (t == nullptr || t->dst_rank() != me || t->reduce == plan::ReduceOp::kNone) continue;
    auto init = plan.ranks[me].initial.find(t->dst_buffer);
    if (init != plan.ranks[me].initial.end() && init->second.Intersects(t->dst_region)) continue;
    bool plain = false;
    for (const plan::Transfer* o : all) {
      plain = plain || (o != nullptr && o->dst_rank() == me && o->reduce == plan::ReduceOp::kNone &&
                        o->dst_buffer == t->dst_buffer && o->dst_region.Intersects(t->dst_region));
    }
    if (plain) continue;
    const plan::BufferSpec* b = plan.FindBuffer(t->dst_buffer);
    auto a = addr.find(t->dst_buffer);
    if (b == nullptr || a == addr.end() || a->second[me] == 0) {
      return absl::InvalidArgumentError(absl::StrCat("plan buffer '", t->dst_buffer,
                                                     "' (reduced into) is not bound"));
    }
    const int64_t es = plan::DTypeSize(b->dtype);
    if (es != 2 && es != 4) {
      return absl::UnimplementedError(absl::StrCat("reductions into ", plan::DTypeName(b->dtype)));
    }
    ASSIGN_OR_RETURN(uint32_t bits, IdentityBits(t->reduce, b->dtype));
    ASSIGN_OR_RETURN(std::vector<jit::CopySegment> segs,
                     jit::BuildCopyDescriptors(*b, t->dst_region, *b, t->dst_region));
    for (const jit::CopySegment& g : segs) {
      const CUdeviceptr dst = a->second[me] + static_cast<CUdeviceptr>(g.dst_offset_bytes);
      // Several contributions reduce into one region: fill it once.
      if (std::any_of(fills.begin(), fills.end(), [&](const IdentityFill& f) {
            return f.dst == dst && f.rows == static_cast<uint64_t>(g.rows) &&
                   f.width_elements == static_cast<uint64_t>(g.row_bytes / es);
          })) {
        continue;
      }
      fills.push_back({a->second[me] + static_cast<CUdeviceptr>(g.dst_offset_bytes),
                       static_cast<uint64_t>(std::max(g.dst_pitch_bytes, g.row_bytes)),
                       static_cast<uint64_t>(g.row_bytes / es), static_cast<uint64_t>(g.rows),
                       static_cast<int>(es), bits});
    }
  }
  return fills;
}


}  // namespace

absl::StatusOr<std::unique_ptr<OverlapRuntime>> OverlapRuntime::Join(
    const GroupOptions& options, cache::KernelCache* cache) {
  auto rt = std::unique_ptr<OverlapRuntime>(new OverlapRuntime);
  ASSIGN_OR_RETURN(rt->group_, Group::Create(options));
  rt->cache_ = cache;
  return rt;
}

absl::StatusOr<SymmetricBuffer*> OverlapRuntime::AllocateSymmetric(const std::string& name,
                                                                   size_t bytes) {
  return group_->heap().Allocate(name, bytes);
}

absl::StatusOr<std::unique_ptr<FusedKernel>> OverlapRuntime::Compile(
    const plan::Plan& plan, const jit::KernelSpec& spec, std::string_view kernel_source,
    jit::KernelFetcher fetch) {
  if (plan.world_size != world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("plan '", plan.name, "' is for world size ",
                                                   plan.world_size, ", the group has ",
                                                   world_size()));
  }
  auto k = std::make_unique<FusedKernel>();
  k->plan_ = plan;
  k->spec_ = spec;
  k->fetch_ = std::move(fetch);
  const jit::BuildOptions build = BuildOptionsFor(group_->context(), cache_, k->fetch_);
  ASSIGN_OR_RETURN(k->fused_, jit::PrepareFusedKernel(plan, spec, kernel_source, build, Codegen()));
  ASSIGN_OR_RETURN(k->local_, jit::PrepareLocalKernel(spec, kernel_source, build));
  const jit::LaunchMetadata& md = k->metadata();
  if (md.num_signals > kSignalCapacity || md.num_outgoing_chunks > kChunkCapacity) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "plan '", plan.name, "' needs ", md.num_signals, " signals and ", md.num_outgoing_chunks,
        " outgoing chunks per rank; the runtime has room for ", kSignalCapacity, " and ",
        kChunkCapacity));
  }
  ASSIGN_OR_RETURN(LoadedKernel fused, CompileAndLoad(group_->context(), k->fused_, build));
  k->fused_module_ = std::move(fused.module);
  k->fused_fn_ = fused.function;
  k->fused_ctas_per_sm_ = fused.ctas_per_sm;
  k->compile_ms_ = fused.compile_ms;
  k->fetched_ = fused.fetched;
  k->fetch_error_ = fused.fetch_error;
  return k;
}

jit::CodegenOptions OverlapRuntime::Codegen() const {
  jit::CodegenOptions codegen;
  codegen.nodes = group_->nodes();
  return codegen;
}

void OverlapRuntime::Prebuild(const std::vector<BuildRequest>& requests, int max_threads) {
  // The same build options and node map as Compile and LoadLocal, so the same cache keys.
  const jit::BuildOptions build = BuildOptionsFor(group_->context(), cache_);
  std::vector<jit::PreparedKernel> prepared;
  for (const BuildRequest& r : requests) {
    if (absl::StatusOr<jit::PreparedKernel> fused =
            jit::PrepareFusedKernel(*r.plan, *r.spec, r.kernel_source, build, Codegen());
        fused.ok()) {
      prepared.push_back(*std::move(fused));
    }
    if (!r.local) continue;
    if (absl::StatusOr<jit::PreparedKernel> local =
            jit::PrepareLocalKernel(*r.spec, r.kernel_source, build);
        local.ok()) {
      prepared.push_back(*std::move(local));
    }
  }
  std::vector<const jit::PreparedKernel*> kernels;
  kernels.reserve(prepared.size());
  for (const jit::PreparedKernel& k : prepared) kernels.push_back(&k);
  jit::BuildInParallel(kernels, build, max_threads);
}

absl::StatusOr<std::unique_ptr<BoundKernel>> OverlapRuntime::Bind(
    const FusedKernel& kernel, const std::map<std::string, CUdeviceptr>& operands) {
  const jit::LaunchMetadata& md = kernel.metadata();
  const int world = world_size();
  auto b = std::make_unique<BoundKernel>();
  b->kernel_ = &kernel;
  std::vector<CUdeviceptr> table(static_cast<size_t>(kMaxOperands) * world, 0);
  std::set<std::string> used;
  for (const jit::OperandSlot& slot : md.operands) {
    if (slot.slot < 0 || slot.slot >= kMaxOperands) {
      return absl::InvalidArgumentError(absl::StrCat("operand slot ", slot.slot, " out of range"));
    }
    auto it = operands.find(slot.name);
    if (it == operands.end() && !slot.buffer.empty()) it = operands.find(slot.buffer);
    if (it == operands.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "operand '", slot.name, "' (slot ", slot.slot,
          slot.buffer.empty() ? "" : absl::StrCat(", plan buffer \"", slot.buffer, "\""),
          ") is not bound"));
    }
    used.insert(it->first);
    const CUdeviceptr ptr = it->second;
    b->operands_[slot.slot] = reinterpret_cast<void*>(ptr);
    // A rank-private plan buffer is addressed by this rank's own copies only.
    const bool shared =
        !slot.rank_private && (slot.role != jit::OperandRole::kLocal || !slot.kernel_param);
    // Find the symmetric buffer holding ptr, for the peers' addresses.
    const SymmetricBuffer* sym = nullptr;
    for (const std::string& name : {slot.buffer, slot.name, it->first}) {
      const SymmetricBuffer* s = group_->heap().Find(name);
      if (s != nullptr && ptr >= s->local() && ptr < s->local() + s->size()) sym = s;
    }
    if (shared && sym == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "operand '", slot.name, "' (", jit::OperandRoleName(slot.role), ", plan buffer \"",
          slot.buffer, "\") is read or written by peers: bind it to a symmetric buffer "
          "(AllocateSymmetric) of the same name"));
    }
    if (sym != nullptr) {
      const CUdeviceptr offset = ptr - sym->local();
      if (offset + static_cast<CUdeviceptr>(slot.bytes) > sym->size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "operand '", slot.name, "' needs ", slot.bytes, " bytes but symmetric buffer '",
            sym->name(), "' has ", sym->size() - offset, " from the bound pointer"));
      }
      std::vector<CUdeviceptr> per_rank(world);
      for (int r = 0; r < world; ++r) {
        per_rank[r] = sym->peer(r) == 0 ? 0 : sym->peer(r) + offset;  // 0: another node
        table[static_cast<size_t>(slot.slot) * world + r] = per_rank[r];
      }
      if (!slot.buffer.empty()) b->slot_addresses_[slot.buffer] = std::move(per_rank);
    } else {
      table[static_cast<size_t>(slot.slot) * world + rank()] = ptr;
      if (!slot.buffer.empty()) {
        std::vector<CUdeviceptr> only_mine(world, 0);
        only_mine[rank()] = ptr;
        b->slot_addresses_[slot.buffer] = std::move(only_mine);
      }
    }
    if (slot.kernel_param) b->local_operands_[slot.slot] = reinterpret_cast<void*>(ptr);
  }
  for (const auto& [name, ptr] : operands) {
    if (!used.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", name, "' is not an operand of kernel ", kernel.spec().name));
    }
  }
  const DriverApi& api = this->api();
  RETURN_IF_ERROR(group_->context().MakeCurrent());
  ASSIGN_OR_RETURN(b->peer_table_, DeviceBuffer::Allocate(api, sizeof(CUdeviceptr) * table.size()));
  CU_RETURN_IF_ERROR(
      api.cuMemcpyHtoD(b->peer_table_.get(), table.data(), sizeof(CUdeviceptr) * table.size()));
  return b;
}

int DefaultCommCtas(int channels, int sm_count, int ctas_per_sm) {
  // No program step on any rank (every chunk moved by its tiles: direct or in tile parts): one
  // comm CTA for the tail waits; another would hold a slot of the persistent grid for nothing.
  if (channels <= 0) return 1;
  // A comm CTA interleaves the channels it owns (comm.cuh), up to 64 at a time.
  constexpr int kChannelsPerCommCta = 64;  // comm.cuh's kCommMaxChannelsPerCta
  const int interleaving = (channels + kChannelsPerCommCta - 1) / kChannelsPerCommCta;
  // Not one per channel: each one here is an SM the GEMM loses.
  if (ctas_per_sm <= 1) return std::max({1, interleaving, std::min(2, sm_count / 8)});
  // One CTA per channel keeps a few tens of KB in flight: far below the memory system's rate.
  // Up to 16 comm CTAs, never more than an eighth of the resident CTA slots, which the GEMM
  // needs: a multiple of the channels where each gets at least two (a split: every channel the
  // same share), else the budget, its CTAs interleaving the channels (never more CTAs than
  // channels then: one past them would own none).
  const int budget = std::max(1, std::min(16, sm_count * ctas_per_sm / 8));
  if (budget >= 2 * channels) return budget / channels * channels;
  return std::max(interleaving, std::min(budget, channels));
}

int TransfersAloneCommCtas(int channels, int resident, int ranks_on_device) {
  constexpr int kMaxCommCtas = 32;
  channels = std::max(channels, 1);
  const int share = resident / std::max(ranks_on_device, 1) - 1;  // less the control CTA
  const int budget = std::min(kMaxCommCtas, share) / channels * channels;
  return std::max(channels, budget);
}

int TransfersAloneComputeCtas(int num_tiles, int sm_count, int room) {
  return std::max(1, std::min({num_tiles, sm_count / 2, room}));
}

int DefaultCopyEngineFreeCtas(int resident, int ranks_on_device) {
  return std::max(1, ranks_on_device > 2 ? resident * 3 / 8 : resident / 32);
}

namespace {

// The backend a launch under `options` runs on: direct launches are SM launches.
Backend LaunchBackend(const LaunchOptions& options) {
  return options.backend == Backend::kDirect ? Backend::kSm : options.backend;
}

// One-time work (uploads, module loads) cannot go into a CUDA graph being captured.
absl::Status RefuseIfCapturing(const DriverApi& api, CUstream stream, absl::string_view what) {
  if (stream == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(const bool capturing, StreamIsCapturing(api, stream));
  if (!capturing) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "first ", what,
      " on a stream being captured into a CUDA graph: its one-time setup "
      "(uploads, module loads) cannot be captured; launch it once before the capture"));
}

}  // namespace

int OverlapRuntime::ResidentSlots(const FusedKernel& k) const {
  return k.fused_ctas_per_sm_ * group_->context().sm_count();
}

int OverlapRuntime::FreeCtas(Backend backend, const LaunchOptions& options, int resident) const {
  if (backend != Backend::kCopyEngine) return 0;
  return options.free_ctas >= 0 ? options.free_ctas
                                : DefaultCopyEngineFreeCtas(resident, group_->ranks_on_device());
}

absl::StatusOr<const KernelLaunch*> OverlapRuntime::Prepare(BoundKernel& bound,
                                                            const LaunchOptions& options,
                                                            CUstream stream) {
  const FusedKernel& k = *bound.kernel_;
  const jit::LaunchMetadata& md = k.metadata();
  const int me = rank();
  const Backend backend = LaunchBackend(options);
  const int resident = ResidentSlots(k);
  int comm = 0;
  if (backend == Backend::kSm) {
    comm = options.comm_ctas > 0
               ? options.comm_ctas
               : DefaultCommCtas(md.suggested_comm_ctas, group_->context().sm_count(),
                                 k.fused_ctas_per_sm_);
  }
  const int free_ctas = FreeCtas(backend, options, resident);
  const auto key =
      std::make_tuple(static_cast<int>(backend), comm, options.compute_ctas, free_ctas);
  auto it = bound.launches_.find(key);
  if (it != bound.launches_.end()) return &it->second;
  RETURN_IF_ERROR(RefuseIfCapturing(api(), stream, "launch of this kernel, binding and backend"));

  KernelLaunch l;
  l.function = k.fused_fn_;
  l.backend = backend;
  l.num_comm_ctas = static_cast<unsigned>(comm);
  l.block[0] = static_cast<unsigned>(md.block_dim);
  l.shared_bytes = static_cast<unsigned>(md.dynamic_smem_bytes);
  l.operands = bound.operands_;
  l.peer_operands = bound.peer_table_.get();
  const plan::Plan& plan = k.plan();
  std::set<int> peers, pulled_by;
  for (const plan::Transfer* t : plan.TransfersById()) {
    if (t == nullptr) continue;
    // Peers on other nodes are the proxy's (its own epoch handshake guards their buffers).
    if (t->rank == me && t->peer != me && group_->same_node(t->peer)) peers.insert(t->peer);
    if (t->dst_rank() == me && t->signal >= 0) {
      l.incoming_signals.push_back({t->signal, t->rank, t->id});
    }
    if (t->kind == plan::TransferKind::kPull && t->peer == me && t->rank != me) {
      pulled_by.insert(t->rank);
    }
  }
  std::sort(l.incoming_signals.begin(), l.incoming_signals.end(),
            [](const IncomingSignal& a, const IncomingSignal& b) { return a.signal < b.signal; });
  l.incoming_signals.erase(
      std::unique(l.incoming_signals.begin(), l.incoming_signals.end(),
                  [](const IncomingSignal& a, const IncomingSignal& b) {
                    return a.signal == b.signal;
                  }),
      l.incoming_signals.end());
  ASSIGN_OR_RETURN(l.identity_fills, IdentityFills(plan, me, bound.slot_addresses_));
  l.guarded_peers.assign(peers.begin(), peers.end());
  l.pulled_by.assign(pulled_by.begin(), pulled_by.end());
  if (backend == Backend::kCopyEngine) {
    auto address = [&bound](const std::string& buffer, int r) -> absl::StatusOr<uint64_t> {
      auto a = bound.slot_addresses_.find(buffer);
      if (a == bound.slot_addresses_.end() || a->second[r] == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "plan buffer '", buffer, "' on rank ", r, " is not bound to symmetric memory"));
      }
      return a->second[r];
    };
    const std::vector<int>* outgoing =
        me < static_cast<int>(md.outgoing_transfers.size()) ? &md.outgoing_transfers[me] : nullptr;
    auto ready = [outgoing](int transfer) -> absl::StatusOr<int> {
      if (outgoing != nullptr) {
        auto f = std::find(outgoing->begin(), outgoing->end(), transfer);
        if (f != outgoing->end()) return static_cast<int>(f - outgoing->begin());
      }
      return absl::InternalError(absl::StrCat(
          "after-compute transfer ", transfer, " is not an outgoing chunk of the kernel"));
    };
    ASSIGN_OR_RETURN(l.copy_program, BuildCopyProgram(plan, me, address, ready, group_->nodes()));
  }
  l.proxy_epoch_words = bound.proxy_epoch_words_;
  RETURN_IF_ERROR(group_->PrepareWaits(l));
  // Every CTA that waits must be resident with the ones it waits for: comm and control CTAs
  // always, compute CTAs up to what fits beside them and the slots the driver's copies need
  // (DefaultCopyEngineFreeCtas says why).
  const int fixed = comm + static_cast<int>(l.num_control_ctas);
  int compute = options.compute_ctas > 0 ? options.compute_ctas
                                         : std::min(md.num_tiles, resident - fixed - free_ctas);
  compute = std::max(compute, 1);
  if ((fixed > 0 || free_ctas > 0) && fixed + compute + free_ctas > resident) {
    return absl::InvalidArgumentError(absl::StrCat(
        BackendName(backend), " backend needs every CTA resident: ", comm, " communication + ",
        l.num_control_ctas, " control + ", compute, " compute CTAs + ", free_ctas,
        " left free for the driver's copies > ", resident, " that fit on this GPU"));
  }
  l.grid[0] = static_cast<unsigned>(fixed + compute);
  auto [inserted, ok] = bound.launches_.emplace(key, std::move(l));
  return &inserted->second;
}

namespace {

absl::Status CheckLocalOperands(const jit::LaunchMetadata& md, Backend backend,
                                const std::array<void*, kMaxOperands>& local_operands) {
  return jit::CheckPerLaunchOperands(md.operands, backend == Backend::kCopyEngine, local_operands);
}

}  // namespace

absl::Status OverlapRuntime::Launch(BoundKernel& bound, CUstream stream,
                                    const LaunchOptions& options) {
  RETURN_IF_ERROR(
      CheckLocalOperands(bound.kernel_->metadata(), options.backend, options.local_operands));
  ASSIGN_OR_RETURN(const KernelLaunch* l, Prepare(bound, options, stream));
  return group_->Launch(*l, stream,
                        LaunchSettings{options.timeout, options.cta_trace, options.dynamic_tiles,
                                       options.prefer_copy_engines, options.local_operands});
}

absl::Status OverlapRuntime::PrepareLaunch(BoundKernel& bound, const LaunchOptions& options) {
  return Prepare(bound, options).status();
}

absl::StatusOr<OverlapRuntime::Geometry> OverlapRuntime::GridOf(BoundKernel& bound,
                                                                 const LaunchOptions& options) {
  ASSIGN_OR_RETURN(const KernelLaunch* l, Prepare(bound, options));
  return Geometry{static_cast<int>(l->grid[0]), static_cast<int>(l->num_comm_ctas),
                  static_cast<int>(l->num_control_ctas)};
}

void OverlapRuntime::SizeTransfersAlone(const FusedKernel& k, LaunchOptions& options) const {
  const int resident = ResidentSlots(k);
  const Backend backend = LaunchBackend(options);
  if (backend == Backend::kSm && options.comm_ctas == 0) {
    options.comm_ctas = TransfersAloneCommCtas(k.metadata().suggested_comm_ctas, resident,
                                               group_->ranks_on_device());
  }
  if (options.compute_ctas == 0) {
    const int comm = backend == Backend::kSm ? options.comm_ctas : 0;
    const int room = resident - comm - 1 - FreeCtas(backend, options, resident);  // 1: control
    options.compute_ctas =
        TransfersAloneComputeCtas(k.metadata().num_tiles, group_->context().sm_count(), room);
  }
}

absl::Status OverlapRuntime::LoadLocal(const FusedKernel& k) {
  if (k.local_fn_ != nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(LoadedKernel local,
                   CompileAndLoad(group_->context(), k.local_,
                                  BuildOptionsFor(group_->context(), cache_, k.fetch_)));
  k.local_module_ = std::move(local.module);
  k.local_fn_ = local.function;
  k.local_ctas_per_sm_ = local.ctas_per_sm;
  return absl::OkStatus();
}

absl::StatusOr<int> OverlapRuntime::LocalOperandSlot(const FusedKernel& kernel,
                                                     std::string_view name) const {
  return jit::PerLaunchOperandSlot(kernel.metadata().operands, name);
}

absl::Status OverlapRuntime::LaunchLocal(const BoundKernel& bound, CUstream stream,
                                         const LocalLaunchOptions& options) {
  const FusedKernel& k = *bound.kernel_;
  const jit::LaunchMetadata& md = k.local_metadata();
  // The local variant moves nothing: no copy program holds an address.
  RETURN_IF_ERROR(CheckLocalOperands(md, Backend::kSm, options.operands));
  if (k.local_fn_ == nullptr) {
    RETURN_IF_ERROR(RefuseIfCapturing(api(), stream, "local launch of this kernel"));
  }
  RETURN_IF_ERROR(LoadLocal(k));
  KernelLaunch l;
  l.function = k.local_fn_;
  l.block[0] = static_cast<unsigned>(md.block_dim);
  l.shared_bytes = static_cast<unsigned>(md.dynamic_smem_bytes);
  const int resident = k.local_ctas_per_sm_ * group_->context().sm_count();
  l.grid[0] = static_cast<unsigned>(
      options.ctas > 0 ? options.ctas : std::max(1, std::min(md.num_tiles, resident)));
  l.operands = bound.local_operands_;
  for (int i = 0; i < kMaxOperands; ++i) {
    if (options.operands[i] != nullptr) l.operands[i] = options.operands[i];
  }
  return group_->LaunchLocal(l, stream, options.dynamic_tiles);
}

absl::StatusOr<std::unique_ptr<LaunchGraph>> OverlapRuntime::CaptureGraph(
    BoundKernel& bound, const LaunchOptions& options) {
  RETURN_IF_ERROR(
      CheckLocalOperands(bound.kernel_->metadata(), options.backend, options.local_operands));
  ASSIGN_OR_RETURN(const KernelLaunch* l, Prepare(bound, options));
  // The graph keeps these pointers for every replay.
  return group_->CaptureGraph(
      *l, LaunchSettings{options.timeout, 0, options.dynamic_tiles, options.prefer_copy_engines,
                         options.local_operands});
}

}  // namespace syncopate::cuda
