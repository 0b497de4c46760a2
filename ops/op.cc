// syncopate::ops::Op over the CUDA runtime (runtime/cuda/overlap_runtime.h): one fused or
// unfused variant per M bucket, a symmetric workspace sized for max_m, and the copies that place
// a run's rows where the bucket's plan wants them.
//
// Row layout. A bucket's plan splits its M rows into equal per-rank slabs of bucket_m / world
// rows. A run at m < bucket_m keeps that layout: rank q's m / world rows go to the start of slab
// q, the rest of the slab is padding (stale rows: every GEMM row depends only on its own A row,
// so padding rows produce padding results and never touch a real row). Results are copied out of
// the same slab positions.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "jit/cache/kernel_cache.h"
#include "jit/compiler/embedded_headers.h"
#include "ops/core/op_agreement.h"
#include "ops/core/op_kernels.h"
#include "ops/core/op_tuning.h"
#include "ops/launch_trace.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/handles.h"
#include "runtime/cuda/kernel_loader.h"
#include "runtime/cuda/overlap_runtime.h"
#include "runtime/gemm/gemm_kernels.h"
#include "syncopate/ops.h"
#include "syncopate/status_absl.h"

namespace syncopate::ops {
namespace {

// The ops' GEMMs need bf16 / fp16 mma (sm_80) at least.
constexpr int kMinComputeCapability = 80;
// NVRTC threads of a Create (each compile takes a core and a few hundred MB).
constexpr int kMaxCompileThreads = 8;

// SYNCOPATE_OPS_IN_PLACE=0 (a developer knob, for A/B runs): every run copies through the
// workspace, as a padded M does, instead of pointing the GEMM at the caller's memory.
bool InPlaceAllowed() {
  const char* knob = std::getenv("SYNCOPATE_OPS_IN_PLACE");
  return knob == nullptr || std::strcmp(knob, "0") != 0;
}

// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte.
bool Overlaps(CUdeviceptr a, int64_t a_bytes, CUdeviceptr b, int64_t b_bytes) {
  return a < b + static_cast<CUdeviceptr>(b_bytes) && b < a + static_cast<CUdeviceptr>(a_bytes);
}

// SYNCOPATE_OPS_COMPUTE_CTAS=N (a developer knob, for A/B runs): a fused kernel's compute CTAs,
// instead of every slot the comm CTAs leave (LaunchOptions::compute_ctas). With ranks sharing a
// GPU, a grid that leaves slots free shows whether CTAs that start late (one rank's last few,
// seen in first runs after idle: bench/RESULTS.md, nineteenth session) shift the ranks' phases.
int ComputeCtasKnob() {
  const char* knob = std::getenv("SYNCOPATE_OPS_COMPUTE_CTAS");
  if (knob == nullptr) return 0;
  const int n = std::atoi(knob);
  return n > 0 ? n : 0;
}

cuda::Backend RuntimeBackend(Backend backend) {
  return backend == Backend::kCopyEngine ? cuda::Backend::kCopyEngine : cuda::Backend::kSm;
}

// Copies `slabs` blocks of `rows` rows each (`row_bytes` per row) between two row layouts whose
// block q starts at row q * src_slab_rows and q * dst_slab_rows: one copy call (a 2D copy whose
// "rows" are the blocks), or one per block where a pitch exceeds what a 2D copy takes.
absl::Status CopySlabs(const cuda::DriverApi& api, CUdeviceptr dst, int64_t dst_slab_rows,
                       CUdeviceptr src, int64_t src_slab_rows, int slabs, int64_t rows,
                       int64_t row_bytes, CUstream stream) {
  if (dst_slab_rows == rows && src_slab_rows == rows) {
    CU_RETURN_IF_ERROR(api.cuMemcpyAsync(dst, src, slabs * rows * row_bytes, stream));
    return absl::OkStatus();
  }
  constexpr int64_t kMaxPitch = (int64_t{1} << 31) - 1;  // CU_DEVICE_ATTRIBUTE_MAX_PITCH's usual
  const int64_t src_pitch = src_slab_rows * row_bytes, dst_pitch = dst_slab_rows * row_bytes;
  if (src_pitch <= kMaxPitch && dst_pitch <= kMaxPitch) {
    CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = src;
    copy.srcPitch = static_cast<size_t>(src_pitch);
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = dst;
    copy.dstPitch = static_cast<size_t>(dst_pitch);
    copy.WidthInBytes = static_cast<size_t>(rows * row_bytes);
    copy.Height = static_cast<size_t>(slabs);
    CU_RETURN_IF_ERROR(api.cuMemcpy2DAsync(&copy, stream));
    return absl::OkStatus();
  }
  for (int q = 0; q < slabs; ++q) {
    CU_RETURN_IF_ERROR(
        api.cuMemcpyAsync(dst + q * dst_pitch, src + q * src_pitch, rows * row_bytes, stream));
  }
  return absl::OkStatus();
}

}  // namespace

// One bucket: its path, its kernels and its binding (made by Create; the weight B is passed per
// launch, so it serves every weight).
struct Variant {
  PathChoice path;
  OpKernels kernels;
  std::unique_ptr<cuda::FusedKernel> gemm;
  std::unique_ptr<cuda::FusedKernel> comm;  // the unfused path's transfers
  struct Bound {
    std::unique_ptr<cuda::BoundKernel> gemm;
    std::unique_ptr<cuda::BoundKernel> comm;
  };
  // The GEMM's operand slot of the caller's own tensor that only this rank touches (AllGather:
  // C; the reductions: A): at M == bucket_m its layout is the workspace's, so a run points the
  // kernel at the caller's memory instead of copying (-1: always copy).
  int in_place_slot = -1;
  // The slot of the rank-private result buffer (OpKernels::private_output) in the kernel that
  // moves the chunks (fused: the GEMM's; unfused: the transfers'): at M == bucket_m a run points
  // it at the caller's C, and the kernel's copies of the final chunks write the result there
  // (-1: the result is copied out after the kernel).
  int out_slot = -1;
  // The GEMM's slot of the weight B, which only this rank reads: each launch passes the run's B
  // there.
  int weight_slot = -1;
  // Made by Create (BindVariant) with the launches' one-time setup done under `options`, so
  // that no run allocates or uploads and a bucket's first run may be recorded into a CUDA graph.
  Bound binding;
  // What every launch of the fused kernel (fused) or the transfers (unfused) passes, but the
  // per-launch operands: fixed at Create, so each run launches under the options prepared.
  cuda::LaunchOptions options;
};

struct Op::Impl {
  GroupConfig group;
  OpConfig config;
  std::unique_ptr<cache::KernelCache> cache;
  std::unique_ptr<cuda::OverlapRuntime> rt;
  // The symmetric workspace (plan buffers) and private padded operands, sized for max_m.
  cuda::SymmetricBuffer* data = nullptr;    // AllGather: A [m, k]; AllReduce: C [m, n]
  cuda::SymmetricBuffer* input = nullptr;   // ReduceScatter: C partials [m, n]
  cuda::SymmetricBuffer* output = nullptr;  // ReduceScatter: the reduced rows [m / world, n]
  cuda::DeviceBuffer a_padded;              // ReduceScatter / AllReduce: A at a bucket's layout
  cuda::DeviceBuffer c_padded;              // AllGather: C at a bucket's layout
  std::vector<Variant> variants;            // ascending bucket_m
  absl::Status sticky;
  std::unique_ptr<LaunchTrace> trace;  // SYNCOPATE_OPS_TRACE_DIR's diagnostics, or null

  ~Impl();
  const cuda::DriverApi& api() const { return rt->api(); }
  absl::Status ApplyMeasuredPaths(int cc);
  absl::Status CheckRanksAgree();
  absl::Status AllocateWorkspace();
  absl::Status PlanVariant(int64_t bucket_m, int cc);
  absl::Status PrebuildKernels();
  absl::Status CompileVariant(Variant& v);
  absl::Status BindVariant(Variant& v);
  cuda::LaunchOptions LaunchOptionsFor(const Variant& v) const;
  absl::StatusOr<Variant*> VariantFor(int64_t m);
  absl::Status CheckRunArgs(const RunArgs& args) const;
  absl::Status Run(const RunArgs& args, CUstream stream);
  // `in_place`: the caller's memory for v.in_place_slot, `out` for v.out_slot; 0 for the
  // workspace's.
  absl::Status Launch(Variant& v, int64_t m, CUstream stream, CUdeviceptr b, CUdeviceptr in_place,
                      CUdeviceptr out = 0);
  // Where a fused launch of v writes its per-CTA records (LaunchTrace), or 0: not traced.
  CUdeviceptr TraceRecords(Variant& v, int64_t m, CUstream stream, const cuda::LaunchOptions& o);
  CUdeviceptr InPlace(const Variant& v, int slot, int64_t m, CUdeviceptr caller,
                      int64_t caller_bytes, CUdeviceptr b) const;
  CUdeviceptr ShardAddress(int64_t bucket_m) const;
};

// `ops_bench --tune`'s measured paths for this op on this GPU (op_tuning.h), for the buckets the
// caller left to the heuristic.
absl::Status Op::Impl::ApplyMeasuredPaths(int cc) {
  if (config.cache_dir.empty() || config.path != PathPreference::kAuto) return absl::OkStatus();
  const OpTuningKey key = OpTuningKeyFor(config, group.world, cuda::ArchFor(cc));
  ASSIGN_OR_RETURN(std::vector<MeasuredBucket> measured, LookupOpTuning(config.cache_dir, key));
  config = WithMeasuredPaths(config, group.world, measured, OpTuningPath(config.cache_dir, key));
  return absl::OkStatus();
}

// Before anything is allocated or compiled: every rank's buckets and their paths (after the
// tuning files, which each rank reads from its own cache_dir) must be the same, or their runs
// would launch different kernels against each other (op_agreement.h).
absl::Status Op::Impl::CheckRanksAgree() {
  Result<std::vector<std::pair<std::string, std::string>>> mine = AgreedFields(config, group.world);
  if (!mine.ok()) return ToAbsl(mine.status());
  ASSIGN_OR_RETURN(std::vector<cuda::PeerMessage> all,
                   rt->group().rendezvous().AllGather(EncodeAgreedFields(*mine)));
  for (int peer = 0; peer < static_cast<int>(all.size()); ++peer) {
    if (peer == group.rank) continue;
    if (std::optional<std::string> differs =
            FirstDisagreement(*mine, DecodeAgreedFields(all[peer].bytes), peer)) {
      return absl::FailedPreconditionError(
          absl::StrCat("the ranks' configs differ: ", *differs,
                       " (every rank must create the op with the same config and buckets, "
                       "and read the same tuning file)"));
    }
  }
  return absl::OkStatus();
}

absl::Status Op::Impl::AllocateWorkspace() {
  const int64_t m = config.max_m, n = config.n, k = config.k;
  switch (config.kind) {
    case OpKind::kAllGatherMatmul: {
      ASSIGN_OR_RETURN(data, rt->AllocateSymmetric("data", m * k * kElementBytes));
      ASSIGN_OR_RETURN(c_padded, cuda::DeviceBuffer::Allocate(api(), m * n * kElementBytes));
      break;
    }
    case OpKind::kMatmulReduceScatter: {
      ASSIGN_OR_RETURN(input, rt->AllocateSymmetric("input", m * n * kElementBytes));
      ASSIGN_OR_RETURN(output,
                       rt->AllocateSymmetric("output", m / group.world * n * kElementBytes));
      ASSIGN_OR_RETURN(a_padded, cuda::DeviceBuffer::Allocate(api(), m * k * kElementBytes));
      break;
    }
    case OpKind::kMatmulAllReduce: {
      ASSIGN_OR_RETURN(data, rt->AllocateSymmetric("data", m * n * kElementBytes));
      ASSIGN_OR_RETURN(a_padded, cuda::DeviceBuffer::Allocate(api(), m * k * kElementBytes));
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status Op::Impl::PlanVariant(int64_t bucket_m, int cc) {
  ASSIGN_OR_RETURN(BucketKernels planned, PlanBucket(config, group.world, bucket_m, cc));
  Variant v;
  v.path = planned.path;
  v.kernels = std::move(planned.kernels);
  variants.push_back(std::move(v));
  return absl::OkStatus();
}

// Every kernel the variants need, built on parallel NVRTC threads before the runtime's
// one-at-a-time Compile calls, which then hit the cache in memory. A Create of three buckets
// compiles up to nine kernels of 1-3 s each.
absl::Status Op::Impl::PrebuildKernels() {
  std::vector<cuda::OverlapRuntime::BuildRequest> requests;
  for (const Variant& v : variants) {
    ASSIGN_OR_RETURN(std::string_view gemm_source, jit::ExampleKernelSource(v.kernels.gemm_source));
    requests.push_back({&v.kernels.plan, &v.kernels.gemm_spec, gemm_source, !v.path.fused});
    if (!v.path.fused) {
      requests.push_back({&v.kernels.plan, &v.kernels.comm_spec, CommOnlySource(), false});
    }
  }
  rt->Prebuild(requests, kMaxCompileThreads);
  return absl::OkStatus();
}

absl::Status Op::Impl::CompileVariant(Variant& v) {
  ASSIGN_OR_RETURN(std::string_view gemm_source, jit::ExampleKernelSource(v.kernels.gemm_source));
  ASSIGN_OR_RETURN(v.gemm, rt->Compile(v.kernels.plan, v.kernels.gemm_spec, gemm_source));
  if (!v.path.fused) {
    ASSIGN_OR_RETURN(v.comm, rt->Compile(v.kernels.plan, v.kernels.comm_spec, CommOnlySource()));
    RETURN_IF_ERROR(rt->LoadLocal(*v.gemm));
  }
  // Not local would be our kernels' defect (op_config_test checks every shape it builds); the
  // runs would still be right, through the copies, so it costs speed, not the op.
  absl::StatusOr<int> slot = rt->LocalOperandSlot(*v.gemm, v.kernels.in_place_operand);
  v.in_place_slot = slot.ok() && InPlaceAllowed() ? *slot : -1;
  if (!v.kernels.private_output.empty()) {
    // Rank-private by the plan's construction (op_config_test checks every shape it builds);
    // per launch on the SM backend only, which every plan with reductions takes.
    absl::StatusOr<int> out =
        rt->LocalOperandSlot(v.path.fused ? *v.gemm : *v.comm, v.kernels.private_output);
    v.out_slot =
        out.ok() && InPlaceAllowed() && RuntimeBackend(v.path.backend) == cuda::Backend::kSm ? *out
                                                                                             : -1;
  }
  // A weight that moves (reloaded, synced, a temporary) would otherwise cost a binding, an
  // allocation and a synchronous upload on its first run, kept forever. Every op kernel takes B
  // per launch (op_config_test checks every shape it builds).
  absl::StatusOr<int> weight = rt->LocalOperandSlot(*v.gemm, "B");
  if (!weight.ok()) return absl::InternalError(weight.status().message());
  v.weight_slot = *weight;
  return absl::OkStatus();
}

// The caller's pointer (`caller_bytes` long) where a run at `m` can use it in place: the
// bucket's own M (no padding, so the caller's rows are laid out as the workspace's), 16-byte
// aligned (vector and TMA accesses) and apart from the weight `b` (the GEMM reads B while it
// writes C, and declares them not to alias; through the workspace, an overlap is only the
// caller's later copy); else 0.
CUdeviceptr Op::Impl::InPlace(const Variant& v, int slot, int64_t m, CUdeviceptr caller,
                              int64_t caller_bytes, CUdeviceptr b) const {
  constexpr CUdeviceptr kAlignment = 16;
  if (slot < 0 || m != v.path.bucket_m || caller % kAlignment != 0) return 0;
  if (Overlaps(caller, caller_bytes, b, config.k * config.n * kElementBytes)) return 0;
  return caller;
}

// The run-time twin of ChoosePath (whose bucket each variant was built for): a lookup without
// the reason string, since it runs on every call.
absl::StatusOr<Variant*> Op::Impl::VariantFor(int64_t m) {
  if (m <= 0 || m % group.world != 0 || m > config.max_m) {
    return ToAbsl(ChoosePath(config, group.world, m).status());  // names what is wrong with m
  }
  auto it = std::lower_bound(variants.begin(), variants.end(), m,
                             [](const Variant& v, int64_t x) { return v.path.bucket_m < x; });
  if (it == variants.end()) return absl::InternalError(absl::StrCat("no bucket for m ", m));
  return &*it;
}

CUdeviceptr Op::Impl::ShardAddress(int64_t bucket_m) const {
  if (data == nullptr || config.kind != OpKind::kAllGatherMatmul) return 0;
  return data->local() + group.rank * (bucket_m / group.world) * config.k * kElementBytes;
}

// A and C are bound to the workspace's and B to a private buffer of the op's; every launch
// passes its run's B, and at a bucket's own M its caller's A or C, for that launch only (Launch,
// InPlace). Then the launch's one-time setup, under the options every run of `v` passes: a run
// finds it done.
absl::Status Op::Impl::BindVariant(Variant& v) {
  std::map<std::string, CUdeviceptr> operands;
  switch (config.kind) {
    case OpKind::kAllGatherMatmul:
      operands = {{"A", data->local()}, {"B", c_padded.get()}, {"C", c_padded.get()}};
      break;
    case OpKind::kMatmulReduceScatter:
      operands = {{"A", a_padded.get()},
                  {"B", a_padded.get()},
                  {"C", input->local()},
                  {"output", output->local()}};
      break;
    case OpKind::kMatmulAllReduce:
      operands = {{"A", a_padded.get()}, {"B", a_padded.get()}, {"C", data->local()}};
      // Runs that cannot take the caller's C (another M than the bucket's) copy the result out
      // of "data" afterwards; the kernel's copies into "out" then go to where they come from.
      if (!v.kernels.private_output.empty()) operands[v.kernels.private_output] = data->local();
      break;
  }
  v.options = LaunchOptionsFor(v);
  ASSIGN_OR_RETURN(v.binding.gemm, rt->Bind(*v.gemm, operands));
  if (v.path.fused) return rt->PrepareLaunch(*v.binding.gemm, v.options);
  ASSIGN_OR_RETURN(v.binding.comm, rt->Bind(*v.comm, operands));
  return rt->PrepareLaunch(*v.binding.comm, v.options);
}

absl::Status Op::Impl::CheckRunArgs(const RunArgs& args) const {
  if (args.a == 0) return absl::InvalidArgumentError("run: a is null");
  if (args.b == 0) return absl::InvalidArgumentError("run: b is null");
  if (args.c == 0) return absl::InvalidArgumentError("run: c is null");
  if (args.a_gathered != 0 && config.kind != OpKind::kAllGatherMatmul) {
    return absl::InvalidArgumentError(absl::StrCat(
        "run: a_gathered is only for all_gather_matmul, this op is ", OpKindName(config.kind)));
  }
  return absl::OkStatus();
}

cuda::LaunchOptions Op::Impl::LaunchOptionsFor(const Variant& v) const {
  cuda::LaunchOptions options;
  options.backend = RuntimeBackend(v.path.backend);
  options.timeout = absl::Milliseconds(config.timeout_ms);
  options.comm_ctas = config.comm_ctas;
  // The GEMMs claim their tiles, not a static deal: beside concurrent ranks not every CTA of a
  // persistent grid starts at once, and a late CTA's static share ran after everyone else's
  // (LocalSchedule::claim). One op's launches run in its stream's order, so they share the
  // group's counter in turn. Not the unfused transfers: the comm-only kernel claims no tiles,
  // and a counter would only make its comm CTAs join a compute deal it does not have.
  if (v.path.fused) {
    options.dynamic_tiles = true;
    options.compute_ctas = ComputeCtasKnob();
    return options;
  }
  // The transfers run alone here: more comm CTAs than a fused kernel spares the GEMM, as many
  // as ranks sharing this GPU leave room for, and few tile CTAs, which only wait
  // (SizeTransfersAlone says why both matter).
  rt->SizeTransfersAlone(*v.comm, options);
  return options;
}

CUdeviceptr Op::Impl::TraceRecords(Variant& v, int64_t m, CUstream stream,
                                   const cuda::LaunchOptions& o) {
  if (trace == nullptr) return 0;
  // A captured launch would bake one slot's address into the graph: replays are not traced.
  if (absl::StatusOr<bool> capturing = cuda::StreamIsCapturing(api(), stream);
      !capturing.ok() || *capturing) {
    return 0;
  }
  absl::StatusOr<cuda::OverlapRuntime::Geometry> geo = rt->GridOf(*v.binding.gemm, o);
  if (!geo.ok()) return 0;
  return trace->Next(geo->ctas, geo->comm_ctas, geo->control_ctas, v.path.bucket_m, m);
}

absl::Status Op::Impl::Launch(Variant& v, int64_t m, CUstream stream, CUdeviceptr b,
                              CUdeviceptr in_place, CUdeviceptr out) {
  cuda::LaunchOptions options = v.options;
  std::array<void*, kMaxOperands> gemm_operands{};
  if (in_place != 0) gemm_operands[v.in_place_slot] = reinterpret_cast<void*>(in_place);
  gemm_operands[v.weight_slot] = reinterpret_cast<void*>(b);
  // The fused kernel takes the GEMM's operands too; the unfused transfers only `out`.
  if (v.path.fused) options.local_operands = gemm_operands;
  if (out != 0) options.local_operands[v.out_slot] = reinterpret_cast<void*>(out);
  if (v.path.fused) {
    options.cta_trace = TraceRecords(v, m, stream, options);
    absl::Status launched = rt->Launch(*v.binding.gemm, stream, options);
    if (!launched.ok() && options.cta_trace != 0) trace->DropLast();
    return launched;
  }
  const cuda::LocalLaunchOptions local{.operands = gemm_operands, .dynamic_tiles = true};
  // Unfused: the gather before the GEMM reads it; the GEMM's partials before they are reduced.
  if (config.kind == OpKind::kAllGatherMatmul) {
    RETURN_IF_ERROR(rt->Launch(*v.binding.comm, stream, options));
    return rt->LaunchLocal(*v.binding.gemm, stream, local);
  }
  RETURN_IF_ERROR(rt->LaunchLocal(*v.binding.gemm, stream, local));
  return rt->Launch(*v.binding.comm, stream, options);
}

// Members go in reverse order: the variants' modules and the padded operands before rt, whose
// Group waits for this rank's work to end. So wait first, with the op's context current (the
// destroying thread may have none, and the frees would then fail and leak).
Op::Impl::~Impl() {
  if (rt == nullptr) return;
  // Fails only without a retained context, when there is nothing to wait for.
  if (!rt->group().context().MakeCurrent().ok()) return;
  CU_LOG_IF_ERROR(api().cuCtxSynchronize());
  if (trace != nullptr) {
    if (absl::Status written = trace->Write(); !written.ok()) {
      std::fprintf(stderr, "syncopate: op trace: %s\n", std::string(written.message()).c_str());
    }
  }
}

absl::Status Op::Impl::Run(const RunArgs& args, CUstream stream) {
  RETURN_IF_ERROR(CheckRunArgs(args));
  // A run may come from another thread than Create (an engine's worker): the copies below come
  // before Group::Launch makes the context current.
  RETURN_IF_ERROR(rt->group().context().MakeCurrent());
  ASSIGN_OR_RETURN(Variant * variant, VariantFor(args.m));
  Variant& v = *variant;
  const int world = group.world;
  const int64_t rows = args.m / world;          // this run's rows per rank
  const int64_t slab = v.path.bucket_m / world;  // the bucket's rows per rank
  const int64_t a_row = config.k * kElementBytes, c_row = config.n * kElementBytes;
  const cuda::DriverApi& api = this->api();
  switch (config.kind) {
    case OpKind::kAllGatherMatmul: {
      const CUdeviceptr shard = ShardAddress(v.path.bucket_m);
      if (args.a != shard) {
        CU_RETURN_IF_ERROR(api.cuMemcpyAsync(shard, args.a, rows * a_row, stream));
      }
      const CUdeviceptr c_in_place =
          InPlace(v, v.in_place_slot, args.m, args.c, args.m * c_row, args.b);
      RETURN_IF_ERROR(Launch(v, args.m, stream, args.b, c_in_place));
      if (c_in_place == 0) {
        RETURN_IF_ERROR(
            CopySlabs(api, args.c, rows, c_padded.get(), slab, world, rows, c_row, stream));
      }
      if (args.a_gathered != 0) {
        RETURN_IF_ERROR(
            CopySlabs(api, args.a_gathered, rows, data->local(), slab, world, rows, a_row, stream));
      }
      return absl::OkStatus();
    }
    case OpKind::kMatmulReduceScatter:
    case OpKind::kMatmulAllReduce: {
      const CUdeviceptr a_in_place =
          InPlace(v, v.in_place_slot, args.m, args.a, args.m * a_row, args.b);
      if (a_in_place == 0) {
        RETURN_IF_ERROR(
            CopySlabs(api, a_padded.get(), slab, args.a, rows, world, rows, a_row, stream));
      }
      // The kernel writes the caller's C while the GEMM may still read A: not where they meet.
      const CUdeviceptr c_out =
          Overlaps(args.c, args.m * c_row, args.a, args.m * a_row)
              ? 0
              : InPlace(v, v.out_slot, args.m, args.c, args.m * c_row, args.b);
      RETURN_IF_ERROR(Launch(v, args.m, stream, args.b, a_in_place, c_out));
      if (config.kind == OpKind::kMatmulReduceScatter) {
        CU_RETURN_IF_ERROR(api.cuMemcpyAsync(args.c, output->local(), rows * c_row, stream));
        return absl::OkStatus();
      }
      if (c_out != 0) return absl::OkStatus();
      return CopySlabs(api, args.c, rows, data->local(), slab, world, rows, c_row, stream);
    }
  }
  return absl::InternalError("run: unknown op kind");
}

Result<std::unique_ptr<Op>> Op::Create(const GroupConfig& group, const OpConfig& config) {
  Status checked = CheckConfig(group, config);
  if (!checked.ok()) return checked;
  Result<std::vector<int64_t>> buckets = BucketsFor(config, group.world);
  if (!buckets.ok()) return buckets.status();
  auto impl = std::make_unique<Impl>();
  impl->group = group;
  impl->config = config;
  auto created = [&]() -> absl::Status {
    if (absl::StatusOr<const cuda::DriverApi*> driver = cuda::Driver(); !driver.ok()) {
      return absl::UnavailableError(absl::StrCat("no usable GPU: ", driver.status().message()));
    }
    cache::KernelCache::Options cache_options;
    cache_options.dir = config.cache_dir;
    cache_options.memory_only = config.cache_dir.empty();
    ASSIGN_OR_RETURN(impl->cache, cache::KernelCache::Open(cache_options));
    cuda::GroupOptions options;
    options.group_id = group.job;
    options.rank = group.rank;
    options.world_size = group.world;
    options.device_ordinal = group.device;
    options.rendezvous_timeout = absl::Milliseconds(group.rendezvous_timeout_ms);
    options.rendezvous_dir = group.rendezvous_dir;
    if (group.bootstrap) {
      options.bootstrap = [fn = group.bootstrap](
                              std::string_view mine) -> absl::StatusOr<std::vector<std::string>> {
        std::vector<std::string> all;
        const Status s = fn(std::string(mine), &all);
        if (!s.ok()) return ToAbsl(s);
        return all;
      };
    }
    ASSIGN_OR_RETURN(impl->rt, cuda::OverlapRuntime::Join(options, impl->cache.get()));
    const int cc = impl->rt->group().context().compute_capability();
    if (cc < kMinComputeCapability) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPU ", group.device, " has compute capability ", cc / 10, ".", cc % 10,
                       "; the ops need ", kMinComputeCapability / 10, ".0 or newer"));
    }
    ASSIGN_OR_RETURN(impl->trace,
                     LaunchTrace::FromEnvironment(
                         impl->api(), absl::StrCat(group.job, "_", OpKindName(config.kind), "_rank",
                                                   group.rank)));
    RETURN_IF_ERROR(impl->ApplyMeasuredPaths(cc));
    RETURN_IF_ERROR(impl->CheckRanksAgree());
    RETURN_IF_ERROR(impl->AllocateWorkspace());
    for (int64_t bucket : *buckets) RETURN_IF_ERROR(impl->PlanVariant(bucket, cc));
    RETURN_IF_ERROR(impl->PrebuildKernels());
    for (Variant& v : impl->variants) {
      RETURN_IF_ERROR(impl->CompileVariant(v));
      RETURN_IF_ERROR(impl->BindVariant(v));
    }
    return absl::OkStatus();
  }();
  if (!created.ok()) {
    return FromAbsl(absl::Status(
        created.code(), absl::StrCat(OpKindName(config.kind), " op (rank ", group.rank, " of ",
                                     group.world, ", job ", group.job, "): ", created.message())));
  }
  return std::unique_ptr<Op>(new Op(std::move(impl)));
}

Op::Op(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Op::~Op() = default;

Status Op::Run(const RunArgs& args, CUstream stream) {
  if (impl_->sticky.ok()) impl_->sticky = impl_->rt->group().RecordedTimeout();
  if (!impl_->sticky.ok()) return FromAbsl(impl_->sticky);
  absl::Status status = impl_->Run(args, stream);
  // Argument errors leave the op as it was; a failure after the first launch step may leave
  // ranks at different epochs, so it sticks.
  if (!status.ok() && !absl::IsInvalidArgument(status) && !absl::IsFailedPrecondition(status)) {
    impl_->sticky = status;
  }
  return FromAbsl(status);
}

Status Op::Synchronize(CUstream stream) {
  if (!impl_->sticky.ok()) return FromAbsl(impl_->sticky);
  absl::Status status = impl_->rt->Sync(stream);
  if (!status.ok()) impl_->sticky = status;
  return FromAbsl(status);
}

Status Op::error() const {
  if (!impl_->sticky.ok()) return FromAbsl(impl_->sticky);
  return FromAbsl(impl_->rt->group().RecordedTimeout());
}

// The path the bucket's variant was built with (PlanBucket: ChoosePath's), at this m.
Result<PathChoice> Op::Path(int64_t m) const {
  absl::StatusOr<Variant*> v = impl_->VariantFor(m);
  if (!v.ok()) return FromAbsl(v.status());
  PathChoice path = (*v)->path;
  path.m = m;
  return path;
}

CUdeviceptr Op::InputWorkspace(int64_t m) const {
  absl::StatusOr<Variant*> v = impl_->VariantFor(m);
  return v.ok() ? impl_->ShardAddress((*v)->path.bucket_m) : 0;
}

const OpConfig& Op::config() const { return impl_->config; }
int Op::rank() const { return impl_->group.rank; }
int Op::world() const { return impl_->group.world; }

}  // namespace syncopate::ops
