// The public C++ API of the GPU runtime (what the client library exposes): join a node-local
// group, allocate symmetric buffers, compile a fused overlap kernel (plan x kernel spec -> the
// overlap compiler -> NVRTC, through the kernel cache when one is given), bind operands to memory,
// launch on a stream with {backend, timeout}, Sync(). Also the identity-schedule (local) variant
// of the same kernel for baselines.
//
//   ASSIGN_OR_RETURN(auto rt, OverlapRuntime::Join({"job7", rank, world, gpu}));
//   ASSIGN_OR_RETURN(auto* a, rt->AllocateSymmetric("A", bytes));
//   ASSIGN_OR_RETURN(auto kernel, rt->Compile(plan, spec, gemm_source));
//   ASSIGN_OR_RETURN(auto bound, rt->Bind(*kernel, {{"A", a->local()}, {"B", b}, {"C", c}}));
//   RETURN_IF_ERROR(rt->Launch(*bound, stream, {.backend = Backend::kCopyEngine}));
//   RETURN_IF_ERROR(rt->Sync(stream));  // DeadlineExceeded names a peer that never delivered
//
// Backends (per launch, no recompilation): kCopyEngine runs the plan's transfers on side streams
// (copies only: plans with reductions need kSm); kSm runs them in communication CTAs of the fused
// kernel, and the compiler lets a chunk's last producer tile move it itself ("direct" chunks:
// stores / atomic reductions from the epilogue into the peer). kDirect is accepted as kSm with
// one communication CTA for whatever is not direct.
//
// Thread-safety: one thread at a time per OverlapRuntime; kernels and bindings are immutable
// after creation and may be shared by launches of the same runtime.
#pragma once

#include <cuda.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/plan/plan.h"
#include "jit/build/kernel_build.h"
#include "jit/cache/kernel_cache.h"
#include "jit/compiler/codegen.h"
#include "jit/compiler/kernel_spec.h"
#include "runtime/cuda/group.h"

namespace syncopate::cuda {

// SM backend's comm CTAs when LaunchOptions::comm_ctas is 0, for a plan with `channels` program
// channels: a multiple of them where each gets at least two CTAs (each channel's steps split over
// its CTAs), else fewer CTAs than channels, each interleaving several (comm.cuh; never fewer
// than one per 64 channels). Where the kernel holds one CTA per SM
// (`ctas_per_sm`; the wgmma GEMM's shared memory), every comm CTA takes a whole SM from the
// GEMM (all CTAs of a grid get the same shared memory): two, however many channels (a comm CTA
// interleaves its channels, and in plans whose transfers wait for tiles the compute CTAs join
// the transfers at the end; one per channel took 7 of an 8-rank share's 16 SMs for the direct
// ReduceScatter's 7 rounds). Measured 2026-12-06 (H100, 2 ranks as MPS clients at 50%, 8B M=8192,
// tp bench
// --comm-ctas): fused AllGather 1.28-1.41 ms at 2 against 1.41-1.47 at 8 (the rule before),
// 1.48 at 16 and 1.60-1.80 at 1; ReduceScatter 1.63 at 2, 1.66 at 8, 1.85 at 16; at M=2048,
// 2 was 2-9% faster than 8. Below 16 SMs one (the rule before gave one there too, and a GPU
// view of 3 SMs fits one comm, one control and one compute CTA). Otherwise up to 16 and an
// eighth of the resident slots (`ctas_per_sm` x `sm_count`), however many channels. With no
// channel (no rank has a program step) one, for the tail waits.
int DefaultCommCtas(int channels, int sm_count, int ctas_per_sm);

// SM backend's comm CTAs for a kernel that moves chunks and computes nothing (an unfused
// sequence's transfers), when the caller sets none: up to 32 (a multiple of `channels`), as
// many as fit with one control CTA in this rank's part of the `resident` slots it sees when
// `ranks_on_device` ranks share the GPU. With 2 ranks as MPS clients, 32 made an 8B M=8192
// GEMM+AllReduce 6% faster than DefaultCommCtas' 16 (ReduceScatter 1.6%, same call); but 8
// ranks of 32 on one GPU (MPS, 50% each) waited for chunks until their deadline, and 16 passed
// (bench/RESULTS.md, 2026-12-06 eighth session). The rule is empirical: that deadlock was seen
// when each rank's grid also held compute CTAs up to its resident slots, all only waiting, so the
// ranks' whole grids never fit together. Such launches now take few compute CTAs
// (TransfersAloneComputeCtas); whether 32 comm CTAs at 8 ranks pass beside them has not been
// tried, so the division stays. Under MPS with a thread percentage a client's SM count is
// already its share, so the division is conservative when the shares split the GPU.
int TransfersAloneCommCtas(int channels, int resident, int ranks_on_device);

// Compute CTAs for a kernel that moves chunks and computes nothing, when the caller sets none:
// one per two SMs the rank sees (`sm_count`; under MPS its share), at most one per tile and at
// most `room` (the resident slots its comm and control CTAs and the driver's copies leave;
// on a small GPU a rank alone may get nearly every slot as comm CTAs), never fewer than one.
//
// Why: such a kernel's tile CTAs only wait for chunks (AllGather) or count tiles into them
// (ReduceScatter), yet the default grid fills every resident slot left. Those slots are what the
// driver's copy kernels (copy engine backend on one GPU) and the peers' comm CTAs (ranks sharing a
// GPU) need. Measured 2026-12-06, H100, 4 ranks as MPS clients (32 SMs each), 8B AG M=2048
// comm-only on the copy engine, 3,000 launches per row: 16 tile CTAs 0.159 ms (2 chunks) and
// 0.229 (4), no stall; one CTA 0.286 and 0.294 (it waits for every tile in turn); the full grid
// 0.452 at 2 chunks and stalled at 4 (the session before).
int TransfersAloneComputeCtas(int num_tiles, int sm_count, int room);

// CTA slots a copy-engine launch leaves free: at least one; 1/32 of the resident slots with one
// or two ranks on the GPU, 3/8 with more.
//
// Why: the driver may run a device-to-device cuMemcpyAsync as a kernel on the SMs (it does on
// the H200 for copies between two processes' mappings of the one GPU, at most chunk sizes). A
// fused kernel that holds every resident CTA slot while its tiles wait for those very copies
// deadlocks until its deadline: measured 2026-12-04, a probe kernel of all 4224 (2112 under
// MPS) slots stalls a side-stream copy, one slot fewer lets it through; the tp bench's
// AllGather at 2-8 chunks timed out on every launch with no slot free and passed with one.
// More free slots speed the copies (8B AG comm-only, chunks 2: 9 GB/s per rank with 1 free,
// 45 with 16, 318 with 40 of 132) but take them from the GEMM (fused 1.63 ms with 4 free,
// 2.0 with 16, 3.7 with 40): a few by default, LaunchOptions::free_ctas for more.
// With more than two ranks on the GPU (`ranks_on_device`) a few are not enough: 4 ranks as MPS
// clients (32 SMs each, the fused wgmma AG holding one CTA per SM) stalled within 15 launches
// with 1 and with 4 slots free and ran 2 x 2,000 launches clean with 8 (2026-12-06, H100), then
// 20,000 per variant at 1, 2 and 4 chunks, but at 8 chunks it still stalled, and a 300-launch
// test at 2 chunks stalled at launch 205 (2026-12-06, eleventh session). 12 of 32 ran 6,000
// launches at 8 chunks clean; 16 did not finish its row in 100 s (not known why). So 3/8 of the
// slots there; two ranks keep 1/32 (80,000 launches clean at 2 ranks). Empirical like the
// numbers: which copy kernels need how many slots is not established.
int DefaultCopyEngineFreeCtas(int resident, int ranks_on_device);

// How LaunchLocal runs the local variant.
struct LocalLaunchOptions {
  int ctas = 0;  // 0 = persistent: min(tiles, resident CTAs)
  // As LaunchOptions::local_operands.
  std::array<void*, kMaxOperands> operands{};
  // As LaunchOptions::dynamic_tiles, from the group's tile counter: never while another launch
  // of the group that deals dynamically may run on another stream.
  bool dynamic_tiles = false;
};

struct LaunchOptions {
  Backend backend = Backend::kCopyEngine;
  absl::Duration timeout = absl::Milliseconds(2000);  // every wait's deadline
  int comm_ctas = 0;     // SM backend: 0 = DefaultCommCtas
  int compute_ctas = 0;  // 0 = persistent: min(tiles, resident CTAs for the rest of the GPU)
  int free_ctas = -1;    // copy engine: slots left for the driver's copies; -1 = default
  // Diagnostics: per-CTA timeline of this launch (jit/include/syncopate/impl/trace.cuh), device
  // memory of 4 x u64 per CTA of the grid (GridCtas says how many), or 0.
  CUdeviceptr cta_trace = 0;
  // Deal tiles dynamically to kernels that claim them (gemm_wgmma.cuh does): a CTA that starts
  // late beside concurrent ranks takes fewer tiles. Off by default until measured on a GPU.
  bool dynamic_tiles = false;
  // Copy engine: ask the driver to run the copies on the copy engines (LaunchSettings).
  bool prefer_copy_engines = true;
  // This launch's pointers for operand slots that only this rank touches (LocalOperandSlot), in
  // place of the bound ones; nullptr keeps the binding's. No peer maps them, so they may change
  // from launch to launch without a new binding: a caller's output written in place. A
  // rank-private plan buffer (jit::OperandSlot::rank_private) qualifies on the SM backend only:
  // the copy engine's copy program holds the bound address.
  std::array<void*, kMaxOperands> local_operands{};
};

// A compiled overlap kernel (fused and local variants) loaded in the runtime's context.
class FusedKernel {
 public:
  const jit::LaunchMetadata& metadata() const { return fused_.generated.metadata; }
  const jit::LaunchMetadata& local_metadata() const { return local_.generated.metadata; }
  const plan::Plan& plan() const { return plan_; }
  const jit::KernelSpec& spec() const { return spec_; }
  const std::string& fused_source() const { return fused_.generated.source; }
  double compile_ms() const { return compile_ms_; }  // NVRTC time of the fused variant
  // Whether the fused variant's binary came from the fetcher given to Compile (the daemon), and
  // if a fetcher was given but not used, why.
  bool fetched() const { return fetched_; }
  const std::string& fetch_error() const { return fetch_error_; }

 private:
  friend class OverlapRuntime;
  plan::Plan plan_;
  jit::KernelSpec spec_;
  jit::PreparedKernel fused_;
  jit::PreparedKernel local_;
  Module fused_module_;
  CUfunction fused_fn_ = nullptr;
  int fused_ctas_per_sm_ = 0;
  // The local variant is compiled on first use (LaunchLocal): most users never launch it.
  mutable Module local_module_;
  mutable CUfunction local_fn_ = nullptr;
  mutable int local_ctas_per_sm_ = 0;
  double compile_ms_ = 0;
  jit::KernelFetcher fetch_;  // also serves the local variant, compiled later
  bool fetched_ = false;
  std::string fetch_error_;
};

// A kernel with memory bound to every operand slot; holds the peer-operand table and the
// per-backend launch descriptions.
class BoundKernel {
 public:
  const FusedKernel& kernel() const { return *kernel_; }
  // Plan buffer -> its address on every rank (0 where not mapped here: another node, or a
  // rank's private memory).
  const std::map<std::string, std::vector<CUdeviceptr>>& buffer_addresses() const {
    return slot_addresses_;
  }
  // Every later launch ends only once the host-mapped word at `device_address` reached its
  // epoch (a bounded tail wait in the kernel, WordKind::kProxyEpoch). InterNodeKernel's proxy
  // sets it after copying out the launch's inter-node chunks. Drops launches prepared before.
  void AddProxyEpochWord(CUdeviceptr device_address) {
    proxy_epoch_words_.push_back(device_address);
    launches_.clear();
  }
  void RemoveProxyEpochWord(CUdeviceptr device_address) {
    std::erase(proxy_epoch_words_, device_address);
    launches_.clear();
  }

 private:
  friend class OverlapRuntime;
  const FusedKernel* kernel_ = nullptr;
  std::array<void*, kMaxOperands> operands_{};
  std::array<void*, kMaxOperands> local_operands_{};  // spec operands, for the local kernel
  DeviceBuffer peer_table_;
  std::map<std::string, std::vector<CUdeviceptr>> slot_addresses_;  // buffer -> per rank
  std::vector<uint64_t> proxy_epoch_words_;
  // (backend, comm ctas, compute ctas option) -> launch
  std::map<std::tuple<int, int, int, int>, KernelLaunch> launches_;
};

class OverlapRuntime {
 public:
  // Joins the node-local group (collective; see Group::Create). `cache` (optional, shared,
  // must outlive the runtime) serves compiles.
  static absl::StatusOr<std::unique_ptr<OverlapRuntime>> Join(const GroupOptions& options,
                                                              cache::KernelCache* cache = nullptr);

  int rank() const { return group_->rank(); }
  int world_size() const { return group_->world_size(); }
  // Rank -> node id, what a daemon's CompileRequest::nodes needs (client/kernel_fetch.h).
  const std::vector<int>& nodes() const { return group_->nodes(); }
  Group& group() { return *group_; }
  const DriverApi& api() const { return group_->api(); }

  // Collective: every rank allocates `name` with the same size, in the same order.
  absl::StatusOr<SymmetricBuffer*> AllocateSymmetric(const std::string& name, size_t bytes);

  // Prepares (jit/build: validates the plan, checks the spec against it, generates with the
  // group's node map: inter-node chunks are left to InterNodeKernel's proxy) and builds (NVRTC
  // for this GPU: ArchFor in kernel_loader.h, sm_90a on Hopper so wgmma kernels build) the fused
  // and local variants of `kernel_source` for `plan`. Not collective, but every rank must
  // compile the same. InvalidArgument naming the plan or the spec when they do not fit.
  // Which GEMM kernel suits the GPU: SelectGemm (runtime/gemm/gemm_kernels.h).
  // `fetch`: where binaries may come from before NVRTC runs here, e.g. the node's daemon
  // (client/kernel_fetch.h), used only for the exact cache key this build derives.
  absl::StatusOr<std::unique_ptr<FusedKernel>> Compile(const plan::Plan& plan,
                                                       const jit::KernelSpec& spec,
                                                       std::string_view kernel_source,
                                                       jit::KernelFetcher fetch = {});

  // What Compile (and, with `local`, LoadLocal) of these kernels will build, built now on up to
  // `max_threads` NVRTC threads into the runtime's cache (nothing without one), so those calls
  // then load from memory; they run one thread at a time, these compiles need not. Errors are
  // left for those calls to report.
  struct BuildRequest {
    const plan::Plan* plan = nullptr;
    const jit::KernelSpec* spec = nullptr;
    std::string_view kernel_source;
    bool local = false;  // the identity-schedule variant too
  };
  void Prebuild(const std::vector<BuildRequest>& requests, int max_threads);

  // Binds every operand slot of the kernel (metadata().operands, by slot name) to this rank's
  // memory. Slots that peers access (consumed / produced / plan-only) must be symmetric buffers
  // from AllocateSymmetric (the pointer is looked up), others may be any device pointer.
  // Collective only in that every rank must bind the same buffers.
  absl::StatusOr<std::unique_ptr<BoundKernel>> Bind(
      const FusedKernel& kernel, const std::map<std::string, CUdeviceptr>& operands);

  // Launch e = epoch()+1 of the fused kernel on `stream` (asynchronous).
  absl::Status Launch(BoundKernel& bound, CUstream stream, const LaunchOptions& options);
  // Does the one-time setup of a Launch of `bound` under `options` now (the launch's waits and
  // copy program, their uploads), so that such a Launch allocates nothing and may be the first
  // one recorded into a CUDA graph. Local operands may differ per launch; the rest of `options`
  // that sizes the grid (backend, comm / compute / free CTAs) must be what the launches pass.
  absl::Status PrepareLaunch(BoundKernel& bound, const LaunchOptions& options);
  // The identity-schedule kernel on the spec operands (no communication, no protocol); compiled
  // on the first call (or by LoadLocal).
  absl::Status LaunchLocal(const BoundKernel& bound, CUstream stream,
                           const LocalLaunchOptions& options = {});
  // The slot of `kernel`'s operand `name` if only this rank reads or writes it (a kernel
  // parameter that is no plan buffer), so LaunchOptions::local_operands may replace it; else
  // InvalidArgument naming why.
  absl::StatusOr<int> LocalOperandSlot(const FusedKernel& kernel, std::string_view name) const;
  // Compiles and loads the local variant now, so a later LaunchLocal does no one-time work.
  absl::Status LoadLocal(const FusedKernel& kernel);
  // The grid a Launch with `options` runs: CTAs in all, of which comm CTAs (SM backend) come
  // first. For sizing LaunchOptions::cta_trace.
  struct Geometry {
    int ctas = 0;
    int comm_ctas = 0;
    int control_ctas = 0;  // after the comm CTAs (a copy-engine launch's gates and tails)
  };
  absl::StatusOr<Geometry> GridOf(BoundKernel& bound, const LaunchOptions& options);
  // Sizes the grid of a launch of `kernel` that moves chunks and computes nothing (an unfused
  // sequence's transfers), where `options` leaves it to the runtime (0): comm CTAs on the SM
  // backend (TransfersAloneCommCtas) and compute CTAs (TransfersAloneComputeCtas), for this
  // rank's GPU and the ranks sharing it.
  void SizeTransfersAlone(const FusedKernel& kernel, LaunchOptions& options) const;
  // Waits for every launch on `stream`; DeadlineExceeded names the peer that did not deliver.
  absl::Status Sync(CUstream stream) { return group_->Sync(stream); }
  // One launch captured into a CUDA graph; each Replay() is the next launch (group.h).
  absl::StatusOr<std::unique_ptr<LaunchGraph>> CaptureGraph(BoundKernel& bound,
                                                            const LaunchOptions& options);

 private:
  // The launch of `bound` under `options`, built on first use. `stream`: where it will be
  // issued; a first use on a stream being captured into a graph is refused (building does
  // synchronous uploads, which a capture forbids).
  absl::StatusOr<const KernelLaunch*> Prepare(BoundKernel& bound, const LaunchOptions& options,
                                              CUstream stream = nullptr);
  // CTAs of `kernel`'s fused variant resident at once on this rank's GPU (its share under MPS).
  int ResidentSlots(const FusedKernel& kernel) const;
  // CTA slots a launch on `backend` leaves free for the driver's copies: options.free_ctas, or
  // DefaultCopyEngineFreeCtas for the ranks sharing this GPU; none off the copy engine.
  int FreeCtas(Backend backend, const LaunchOptions& options, int resident) const;
  // The group's node map, for every kernel this runtime generates.
  jit::CodegenOptions Codegen() const;
  std::unique_ptr<Group> group_;
  cache::KernelCache* cache_ = nullptr;
};

}  // namespace syncopate::cuda
