// Fused AllGather+GEMM and GEMM+ReduceScatter workloads for the GPU tests; see workloads.h.
#include "runtime/cuda/workloads/workloads.h"

#include <unistd.h>

#include <csignal>
#include <memory>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/plan/templates.h"
#include "jit/cache/kernel_cache.h"
#include "jit/compiler/embedded_headers.h"
#include "runtime/cuda/workloads/test_kernels.h"

namespace syncopate::workloads {
namespace {

using cuda::DeviceBuffer;
using cuda::OverlapRuntime;

uint64_t Seed(uint64_t base, int launch, int who) {
  return base * 1000003ull + static_cast<uint64_t>(launch) * 7919ull + static_cast<uint64_t>(who);
}

// Rows [lo, hi) of axis 0 that `rank` holds in `buffer` at the start (its shard).
absl::StatusOr<std::pair<int64_t, int64_t>> ShardRows(const plan::Plan& p, int rank,
                                                      const std::string& buffer) {
  auto it = p.ranks[rank].initial.find(buffer);
  if (it == p.ranks[rank].initial.end() || it->second.boxes().empty()) {
    return absl::InternalError(absl::StrCat("rank ", rank, " has no initial ", buffer));
  }
  int64_t lo = INT64_MAX, hi = 0;
  for (const plan::Box& b : it->second.boxes()) {
    lo = std::min(lo, b.lo[0]);
    hi = std::max(hi, b.hi[0]);
  }
  return std::make_pair(lo, hi);
}

struct Setup {
  std::unique_ptr<cache::KernelCache> cache;
  std::unique_ptr<OverlapRuntime> rt;
  std::unique_ptr<cuda::FusedKernel> kernel;
  std::unique_ptr<TestKernels> tk;
  cuda::Stream stream;
  plan::Plan plan;
};

enum class Collective { kAllGather, kReduceScatter };

absl::StatusOr<Setup> Prepare(const WorkloadConfig& c, Collective collective) {
  // The plan moves rows of A [M, K] for AllGather+GEMM and of C [M, N] for GEMM+ReduceScatter.
  const bool ag = collective == Collective::kAllGather;
  const plan::Shape shape = ag ? plan::Shape{c.m, c.k} : plan::Shape{c.m, c.n};
  jit::KernelSpec spec = ag ? (c.wgmma ? jit::GemmWgmmaSpecForAllGather(c.m, c.n, c.k, c.dtype)
                                       : jit::GemmSpecForAllGather(c.m, c.n, c.k, c.dtype))
                            : (c.wgmma ? jit::GemmWgmmaSpecForReduceScatter(c.m, c.n, c.k, c.dtype)
                                       : jit::GemmSpecForReduceScatter(c.m, c.n, c.k, c.dtype));
  spec.push_tiles = c.push_tiles;
  Setup s;
  cache::KernelCache::Options co;
  co.dir = TestCacheDir();
  co.memory_only = static_cast<bool>(c.fetcher);
  ASSIGN_OR_RETURN(s.cache, cache::KernelCache::Open(co));
  cuda::GroupOptions go;
  go.group_id = c.group_id;
  go.rank = c.rank;
  go.world_size = c.world;
  if (c.ranks_per_node > 0 && c.span_nodes) {
    for (int r = 0; r < c.world; ++r) go.nodes.push_back(r / c.ranks_per_node);
  }
  ASSIGN_OR_RETURN(s.rt, OverlapRuntime::Join(go, s.cache.get()));
  plan::TemplateParams tp;
  tp.world_size = c.world;
  tp.shape = shape;
  tp.dtype = c.dtype;
  tp.axis = 0;
  tp.chunks_per_shard = c.chunks;
  tp.ranks_per_node = c.ranks_per_node;
  ASSIGN_OR_RETURN(s.plan, plan::BuildTemplate(c.plan_template, tp));
  const int cc = s.rt->group().context().compute_capability();
  if (c.wgmma && cc != 90) {
    return absl::FailedPreconditionError(
        absl::StrCat("the wgmma GEMM needs sm_90; this GPU is sm_", cc));
  }
  ASSIGN_OR_RETURN(std::string_view source,
                   jit::ExampleKernelSource(c.wgmma ? "gemm_wgmma.cuh" : "gemm_mma.cuh"));
  jit::KernelFetcher fetch =
      c.fetcher ? c.fetcher(s.plan, spec, source, s.rt->nodes()) : jit::KernelFetcher();
  ASSIGN_OR_RETURN(s.kernel, s.rt->Compile(s.plan, spec, source, fetch));
  if (c.fetcher && !s.kernel->fetched()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", c.rank, " compiled the fused kernel itself instead of loading the fetched "
        "binary: ", s.kernel->fetch_error().empty() ? "no fetcher" : s.kernel->fetch_error()));
  }
  ASSIGN_OR_RETURN(TestKernels tk, TestKernels::Load(s.rt->group().context()));
  s.tk = std::make_unique<TestKernels>(std::move(tk));
  ASSIGN_OR_RETURN(s.stream, cuda::Stream::Create(s.rt->api()));
  return s;
}

// The launches of LaunchLoop.
absl::Status RunLaunches(const WorkloadConfig& c, Setup& s, cuda::BoundKernel& bound,
                         const std::function<absl::Status(int)>& refill,
                         const std::function<absl::Status(int)>& check) {
  cuda::LaunchOptions lo;
  lo.backend = c.backend;
  lo.timeout = c.timeout;
  lo.dynamic_tiles = c.dynamic_tiles;
  std::unique_ptr<cuda::LaunchGraph> graph;
  std::unique_ptr<Launcher> launcher;
  if (c.launcher) {
    if (c.graph) return absl::InvalidArgumentError("a custom launcher does not replay graphs");
    ASSIGN_OR_RETURN(launcher, c.launcher(*s.rt, bound));
  }
  if (c.epoch_jump > 0 && (c.graph || c.launcher)) {
    return absl::InvalidArgumentError("epoch_jump: direct launches only");
  }
  if (c.graph) {
    ASSIGN_OR_RETURN(graph, s.rt->CaptureGraph(bound, lo));
  }
  for (int i = 0; i < c.launches; ++i) {
    RETURN_IF_ERROR(refill(i));
    if (graph) {
      RETURN_IF_ERROR(graph->Replay(s.stream.get()));
    } else if (launcher) {
      RETURN_IF_ERROR(launcher->Launch(s.stream.get(), lo));
    } else {
      RETURN_IF_ERROR(s.rt->Launch(bound, s.stream.get(), lo));
    }
    if (c.rank == c.killed_rank && i == c.kill_after_launch) raise(SIGKILL);
    const bool jump = i == 0 && c.epoch_jump > 0;
    const bool checked = (i + 1) % c.check_every == 0 || i + 1 == c.launches || jump;
    if (checked) {
      absl::Status synced =
          launcher ? launcher->Sync(s.stream.get()) : s.rt->Sync(s.stream.get());
      if (!synced.ok()) {
        // A failed group stays failed: a second Sync must not report the launch as done.
        if (!launcher && s.rt->Sync(s.stream.get()).ok()) {
          return absl::InternalError(
              absl::StrCat("launch ", i, ": a second Sync returned OK after ", synced.message()));
        }
        return absl::Status(synced.code(), absl::StrCat("launch ", i, ": ", synced.message()));
      }
      absl::Status ok = check(i);
      if (!ok.ok()) {
        return absl::Status(ok.code(), absl::StrCat("rank ", c.rank, " launch ", i, " (seed ",
                                                    c.seed, "): ", ok.message()));
      }
    }
    if (jump) {
      RETURN_IF_ERROR(s.rt->group().SkipEpochsForTesting(c.epoch_jump, s.stream.get()));
    }
  }
  return absl::OkStatus();
}

// After launches whose kernels drew tiles from the group's counter (the Hopper kernel with
// dynamic tiles): every rank of the node published its draws in its tile-progress word, which
// peers' joined CTAs follow (launch_abi.h "Tile progress"); a word still 0 means they would
// leave a computing peer after the fixed wait. Read through each rank's table, after a barrier
// every rank reaches (so one rank's failure keeps nobody waiting and every peer's launches
// ended).
absl::Status CheckTileProgressPublished(const WorkloadConfig& c, Setup& s,
                                        const absl::Status& launched) {
  const absl::Status met = s.rt->group().rendezvous().Barrier();
  RETURN_IF_ERROR(launched);
  RETURN_IF_ERROR(met);
  for (int q = 0; q < c.world; ++q) {
    absl::StatusOr<uint32_t> word = s.rt->group().TileProgressForTesting(q);
    if (absl::IsNotFound(word.status())) continue;  // another node: nothing mapped
    RETURN_IF_ERROR(word.status());
    if (*word == 0) {
      return absl::InternalError(absl::StrCat(
          "rank ", c.rank, " sees rank ", q, "'s tile-progress word still 0 after ", c.launches,
          " launches that drew tiles: peers cannot tell that it computes"));
    }
  }
  return absl::OkStatus();
}

// The launch loop shared by both workloads: before each launch `refill(i)`, after the checked
// ones `check(i)`. Graph mode captures one launch first.
absl::Status LaunchLoop(const WorkloadConfig& c, Setup& s, cuda::BoundKernel& bound,
                        const std::function<absl::Status(int)>& refill,
                        const std::function<absl::Status(int)>& check) {
  absl::Status launched = RunLaunches(c, s, bound, refill, check);
  const bool draws_tiles =
      c.wgmma && c.dynamic_tiles && c.killed_rank < 0 && c.absent_rank < 0 && !c.launcher;
  if (!draws_tiles) return launched;
  return CheckTileProgressPublished(c, s, launched);
}

// Runs the local kernel with `options` on fresh `a` and whatever `b` holds, and checks it
// against the reference on the same data. After a failed launch: the context must still run
// kernels.
absl::Status CheckLocalLaunch(Setup& s, cuda::BoundKernel& bound, CUdeviceptr a, CUdeviceptr b,
                              CUdeviceptr c_out, CUdeviceptr ref, const WorkloadConfig& c,
                              const cuda::LocalLaunchOptions& options, const std::string& what) {
  const cuda::DriverApi& api = s.rt->api();
  CUstream st = s.stream.get();
  RETURN_IF_ERROR(s.tk->Fill(a, c.m * c.k, c.dtype, Seed(c.seed, 99, 0), st));
  RETURN_IF_ERROR(s.tk->Poison16(c_out, c.m * c.n, st));
  RETURN_IF_ERROR(s.rt->LaunchLocal(bound, st, options));
  RETURN_IF_ERROR(s.tk->ReferenceGemm(a, b, ref, c.m, c.n, c.k, c.dtype, false, st));
  ASSIGN_OR_RETURN(auto got, Download16(api, c_out, c.m * c.n, st));
  ASSIGN_OR_RETURN(auto want, DownloadF32(api, ref, c.m * c.n, st));
  return CompareToReference(got, want, c.m, c.n, c.dtype, kRtol, kAtol, what);
}

absl::Status CheckDeviceUsable(Setup& s, cuda::BoundKernel& bound, CUdeviceptr a, CUdeviceptr b,
                               CUdeviceptr c_out, CUdeviceptr ref, const WorkloadConfig& c) {
  return CheckLocalLaunch(s, bound, a, b, c_out, ref, c, {}, "local launch after the failed one");
}

}  // namespace

std::string TestCacheDir() {
  const char* env = std::getenv("SYNCOPATE_TEST_CACHE");
  return env ? env : "/tmp/syncopate-gpu-test-cache";
}

absl::Status RunAllGatherGemm(const WorkloadConfig& c) {
  ASSIGN_OR_RETURN(Setup s, Prepare(c, Collective::kAllGather));
  const cuda::DriverApi& api = s.rt->api();
  CUstream st = s.stream.get();
  const int64_t es = 2;
  ASSIGN_OR_RETURN(cuda::SymmetricBuffer * data, s.rt->AllocateSymmetric("data", c.m * c.k * es));
  ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(api, c.n * c.k * es));
  ASSIGN_OR_RETURN(DeviceBuffer out, DeviceBuffer::Allocate(api, c.m * c.n * es));
  ASSIGN_OR_RETURN(DeviceBuffer full_a, DeviceBuffer::Allocate(api, c.m * c.k * es));
  ASSIGN_OR_RETURN(DeviceBuffer ref, DeviceBuffer::Allocate(api, c.m * c.n * 4));
  ASSIGN_OR_RETURN(auto bound, s.rt->Bind(*s.kernel, {{"A", data->local()},
                                                     {"B", b.get()},
                                                     {"C", out.get()}}));
  std::vector<std::pair<int64_t, int64_t>> shards;
  for (int q = 0; q < c.world; ++q) {
    ASSIGN_OR_RETURN(auto rows, ShardRows(s.plan, q, "data"));
    shards.push_back(rows);
  }
  // Rank q's shard of launch i, written at `base` (a full [M, K] buffer).
  auto fill_shard = [&](CUdeviceptr base, int q, int i) {
    auto [lo, hi] = shards[q];
    return s.tk->Fill(base + lo * c.k * es, (hi - lo) * c.k, c.dtype, Seed(c.seed, i, q), st);
  };
  if (c.absent_rank == c.rank) {
    // Joined and ready, but never launches: the others must time out naming this rank.
    RETURN_IF_ERROR(s.rt->group().rendezvous().Barrier());
    return s.rt->group().rendezvous().Barrier();
  }
  auto refill = [&](int i) -> absl::Status {
    // Peers' rows are poisoned: a chunk that never arrives shows up as NaN.
    RETURN_IF_ERROR(s.tk->Poison16(data->local(), c.m * c.k, st));
    RETURN_IF_ERROR(fill_shard(data->local(), c.rank, i));
    RETURN_IF_ERROR(s.tk->Fill(b.get(), c.n * c.k, c.dtype, Seed(c.seed, i, 1000 + c.rank), st));
    return s.tk->Poison16(out.get(), c.m * c.n, st);
  };
  auto check = [&](int i) -> absl::Status {
    for (int q = 0; q < c.world; ++q) RETURN_IF_ERROR(fill_shard(full_a.get(), q, i));
    ASSIGN_OR_RETURN(auto gathered, Download16(api, data->local(), c.m * c.k, st));
    ASSIGN_OR_RETURN(auto expected_a, Download16(api, full_a.get(), c.m * c.k, st));
    for (int64_t e = 0; e < c.m * c.k; ++e) {
      if (gathered[e] != expected_a[e]) {
        return absl::DataLossError(absl::StrCat("gathered A differs at row ", e / c.k, " col ",
                                                e % c.k, ": got 0x", absl::Hex(gathered[e]),
                                                ", want 0x", absl::Hex(expected_a[e])));
      }
    }
    RETURN_IF_ERROR(s.tk->ReferenceGemm(full_a.get(), b.get(), ref.get(), c.m, c.n, c.k, c.dtype,
                                        false, st));
    ASSIGN_OR_RETURN(auto got, Download16(api, out.get(), c.m * c.n, st));
    ASSIGN_OR_RETURN(auto want, DownloadF32(api, ref.get(), c.m * c.n, st));
    return CompareToReference(got, want, c.m, c.n, c.dtype, kRtol, kAtol, "C = allgather(A) B^T");
  };
  absl::Status status = LaunchLoop(c, s, *bound, refill, check);
  if (c.dynamic_tiles && c.killed_rank < 0 && c.absent_rank < 0) {
    // The local variant claiming tiles from the group's counter: 3 CTAs over every tile, twice
    // (the last CTA out resets the counter for the next launch). After every rank's last
    // launch, since peers read this rank's `data`; every rank reaches the barrier, so one
    // rank's failure keeps nobody waiting there.
    const absl::Status met = s.rt->group().rendezvous().Barrier();
    if (!status.ok()) return status;
    RETURN_IF_ERROR(met);
    for (int i = 0; i < 2; ++i) {
      RETURN_IF_ERROR(CheckLocalLaunch(
          s, *bound, data->local(), b.get(), out.get(), ref.get(), c,
          {.ctas = 3, .dynamic_tiles = true},
          absl::StrCat("local launch ", i, " dealing tiles from the group's counter")));
    }
  }
  if (c.killed_rank >= 0) {
    // No barrier with a dead rank: the survivor's own launch has ended (Sync returned), so its
    // buffers are free; the GPU must still run a local launch right.
    absl::Status usable =
        CheckDeviceUsable(s, *bound, data->local(), b.get(), out.get(), ref.get(), c);
    if (!usable.ok()) {
      return absl::Status(usable.code(), absl::StrCat(usable.message(), " (after: ",
                                                      status.ToString(), ")"));
    }
    return status;
  }
  if (c.absent_rank >= 0) {
    // Every rank's launch has ended (failed) before anyone reuses its buffers.
    RETURN_IF_ERROR(s.rt->group().rendezvous().Barrier());
    absl::Status usable =
        CheckDeviceUsable(s, *bound, data->local(), b.get(), out.get(), ref.get(), c);
    RETURN_IF_ERROR(s.rt->group().rendezvous().Barrier());
    if (!usable.ok()) {
      return absl::Status(usable.code(), absl::StrCat(usable.message(), " (after: ",
                                                      status.ToString(), ")"));
    }
  }
  return status;
}

absl::Status RunGemmReduceScatter(const WorkloadConfig& c) {
  ASSIGN_OR_RETURN(Setup s, Prepare(c, Collective::kReduceScatter));
  const cuda::DriverApi& api = s.rt->api();
  CUstream st = s.stream.get();
  const int64_t es = 2;
  const plan::BufferSpec* out_spec = s.plan.FindBuffer("output");
  if (out_spec == nullptr) return absl::InternalError("plan has no output buffer");
  const int64_t out_elems = out_spec->NumElements();
  ASSIGN_OR_RETURN(cuda::SymmetricBuffer * input, s.rt->AllocateSymmetric("input", c.m * c.n * es));
  ASSIGN_OR_RETURN(cuda::SymmetricBuffer * output, s.rt->AllocateSymmetric("output", out_elems * es));
  ASSIGN_OR_RETURN(DeviceBuffer a, DeviceBuffer::Allocate(api, c.m * c.k * es));
  ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(api, c.n * c.k * es));
  ASSIGN_OR_RETURN(DeviceBuffer qa, DeviceBuffer::Allocate(api, c.m * c.k * es));
  ASSIGN_OR_RETURN(DeviceBuffer qb, DeviceBuffer::Allocate(api, c.n * c.k * es));
  ASSIGN_OR_RETURN(DeviceBuffer ref, DeviceBuffer::Allocate(api, c.m * c.n * 4));
  ASSIGN_OR_RETURN(auto bound, s.rt->Bind(*s.kernel, {{"A", a.get()},
                                                     {"B", b.get()},
                                                     {"C", input->local()},
                                                     {"output", output->local()}}));
  if (c.absent_rank == c.rank) return s.rt->group().rendezvous().Barrier();
  // Where this rank's result lives: the postcondition's region of "output" on this rank, and the
  // rows of the full product it holds.
  const plan::Expectation* mine = nullptr;
  for (const plan::Expectation& e : s.plan.postcondition) {
    if (e.rank == c.rank && e.buffer == "output") mine = &e;
  }
  if (mine == nullptr || mine->sources.empty()) {
    return absl::InternalError("plan has no postcondition for this rank's output");
  }
  // The output buffer is as large as the largest shard; this rank's result may be shorter.
  const int64_t row0 = mine->sources[0].region.boxes()[0].lo[0];
  const int64_t rows = mine->region.NumElements() / c.n;
  auto refill = [&](int i) -> absl::Status {
    RETURN_IF_ERROR(s.tk->Fill(a.get(), c.m * c.k, c.dtype, Seed(c.seed, i, c.rank), st));
    RETURN_IF_ERROR(s.tk->Fill(b.get(), c.n * c.k, c.dtype, Seed(c.seed, i, 1000 + c.rank), st));
    RETURN_IF_ERROR(s.tk->Poison16(input->local(), c.m * c.n, st));
    return s.tk->Poison16(output->local(), out_elems, st);
  };
  auto check = [&](int i) -> absl::Status {
    for (int q = 0; q < c.world; ++q) {
      RETURN_IF_ERROR(s.tk->Fill(qa.get(), c.m * c.k, c.dtype, Seed(c.seed, i, q), st));
      RETURN_IF_ERROR(s.tk->Fill(qb.get(), c.n * c.k, c.dtype, Seed(c.seed, i, 1000 + q), st));
      RETURN_IF_ERROR(s.tk->ReferenceGemm(qa.get(), qb.get(), ref.get(), c.m, c.n, c.k, c.dtype,
                                          q > 0, st));
    }
    ASSIGN_OR_RETURN(auto got, Download16(api, output->local(), rows * c.n, st));
    ASSIGN_OR_RETURN(auto all, DownloadF32(api, ref.get(), c.m * c.n, st));
    // For a failure report: did this rank's own GEMM produce its partial ("input")?
    auto own_partial = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(DeviceBuffer own, DeviceBuffer::Allocate(api, c.m * c.n * 4));
      RETURN_IF_ERROR(s.tk->ReferenceGemm(a.get(), b.get(), own.get(), c.m, c.n, c.k, c.dtype,
                                          false, st));
      ASSIGN_OR_RETURN(auto in, Download16(api, input->local(), c.m * c.n, st));
      ASSIGN_OR_RETURN(auto want_in, DownloadF32(api, own.get(), c.m * c.n, st));
      return CompareToReference(in, want_in, c.m, c.n, c.dtype, kRtol, kAtol,
                                "own partial in \"input\"");
    };
    std::vector<float> want(all.begin() + row0 * c.n, all.begin() + (row0 + rows) * c.n);
    // Each rank's partial is rounded to 16 bits before the reduction: a looser bound.
    absl::Status ok =
        CompareToReference(got, want, rows, c.n, c.dtype, kReduceRtol, kReduceAtol,
                           absl::StrCat("rows [", row0, ", ", row0 + rows, ") of sum_r A_r B_r^T"));
    if (ok.ok()) return ok;
    absl::Status partial = own_partial();
    return absl::Status(ok.code(), absl::StrCat(ok.message(), "; ",
                                                partial.ok() ? "own partial in \"input\" is right"
                                                             : partial.message()));
  };
  absl::Status status = LaunchLoop(c, s, *bound, refill, check);
  if (c.absent_rank >= 0) {
    absl::Status barrier = s.rt->group().rendezvous().Barrier();
    if (!barrier.ok() && status.ok()) return barrier;
  }
  return status;
}

}  // namespace syncopate::workloads
