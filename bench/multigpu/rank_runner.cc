// One rank of syncopate_tp_bench; see rank_runner.h. This file: setting a problem up (buffers,
// kernels, inputs and references) and walking its configurations; rank_measure.cc measures each.
#include "bench/multigpu/rank_runner.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/multigpu/rank_runner_internal.h"
#include "core/base/status_macros.h"
#include "jit/compiler/embedded_headers.h"

namespace syncopate::tp_bench {
namespace runner {

absl::Status Runner::Init(const std::string& group_id, const std::vector<Problem>& problems) {
  cache::KernelCache::Options co;
  co.dir = f_.cache_dir;
  auto cache = cache::KernelCache::Open(co);
  if (!cache.ok()) {
    co.dir.clear();
    co.memory_only = true;  // compile per rank rather than fail
    ASSIGN_OR_RETURN(cache, cache::KernelCache::Open(co));
  }
  cache_ = *std::move(cache);
  cuda::GroupOptions go;
  go.group_id = group_id;
  go.rank = rank_;
  go.world_size = world_;
  go.device_ordinal = rank_ / f_.ranks_per_gpu;
  go.rendezvous_timeout = absl::Seconds(120);
  ASSIGN_OR_RETURN(rt_, cuda::OverlapRuntime::Join(go, cache_.get()));
  ASSIGN_OR_RETURN(stream_, cuda::Stream::Create(api()));
  if (rank_ == 0) {
    const cuda::Context& ctx = rt_->group().context();
    // Under MPS with an active thread percentage the count is the client's share, not the GPU's.
    std::printf("rank 0: %d SMs seen, %d ranks on its GPU\n", ctx.sm_count(),
                rt_->group().ranks_on_device());
    std::fflush(stdout);
  }
  ASSIGN_OR_RETURN(workloads::TestKernels tk, workloads::TestKernels::Load(rt_->group().context()));
  tk_ = std::make_unique<workloads::TestKernels>(std::move(tk));
  ASSIGN_OR_RETURN(CheckKernels ck, CheckKernels::Load(rt_->group().context()));
  checks_ = std::make_unique<CheckKernels>(std::move(ck));
  auto blas = gemm::CublasLib::Open(stream());
  if (blas.ok()) {
    cublas_ = *std::move(blas);
  } else {
    cublas_error_ = std::string(blas.status().message());  // fp32 reference falls back, below
  }
  // Every rank must run the same steps (the cuBLAS timing gathers): use cuBLAS only where all
  // ranks have it.
  ASSIGN_OR_RETURN(std::vector<cuda::PeerMessage> have,
                   rt_->group().rendezvous().AllGather(cublas_ ? "1" : "0"));
  for (const cuda::PeerMessage& m : have) {
    if (m.bytes != "1" && cublas_) {
      cublas_.reset();
      cublas_error_ = "cuBLAS missing on a peer rank";
    }
  }
  for (int i = 0; i < 2 * f_.reps; ++i) {
    ASSIGN_OR_RETURN(cuda::Event e, cuda::Event::Create(api(), CU_EVENT_DEFAULT));
    events_.push_back(std::move(e));
  }
  for (int i = 0; i < f_.reps; ++i) {
    ASSIGN_OR_RETURN(cuda::Event e, cuda::Event::Create(api(), CU_EVENT_DEFAULT));
    mid_events_.push_back(std::move(e));
  }
  return Allocate(problems);
}

absl::Status Runner::Allocate(const std::vector<Problem>& problems) {
  int64_t data = 0, input = 0, output = 0, a = 0, b = 0, c = 0, ref = 0, partial = 0, qa = 0;
  for (const Problem& p : problems) {
    b = std::max(b, p.n * p.k * kEs);
    c = std::max(c, p.m * p.n * kEs);
    ref = std::max(ref, p.m * p.n * 4);
    if (is_ag(p)) {
      data = std::max(data, p.m * p.k * kEs);
      a = std::max(a, p.m * p.k * kEs);  // the full A, as every rank's shards make it
    } else {
      a = std::max(a, p.m * p.k * kEs);
      qa = std::max(qa, p.m * p.k * kEs);
      partial = std::max(partial, p.m * p.n * kEs);
      if (p.workload == Workload::kGemmAllReduce) {
        data = std::max(data, p.m * p.n * kEs);
      } else {
        input = std::max(input, p.m * p.n * kEs);
        output = std::max(output, (p.m + world_ - 1) / world_ * p.n * kEs);
      }
    }
  }
  // Symmetric allocation is collective: every rank allocates the same names and sizes in the same
  // order (they all see the same problem list).
  if (data > 0) {
    ASSIGN_OR_RETURN(data_, rt_->AllocateSymmetric("data", data));
  }
  if (input > 0) {
    ASSIGN_OR_RETURN(input_, rt_->AllocateSymmetric("input", input));
  }
  if (output > 0) {
    ASSIGN_OR_RETURN(output_, rt_->AllocateSymmetric("output", output));
  }
  auto alloc = [&](DeviceBuffer& buf, int64_t bytes) -> absl::Status {
    if (bytes <= 0) return absl::OkStatus();
    ASSIGN_OR_RETURN(buf, DeviceBuffer::Allocate(api(), bytes));
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(alloc(a_, a));
  RETURN_IF_ERROR(alloc(b_, b));
  RETURN_IF_ERROR(alloc(c_, c));
  RETURN_IF_ERROR(alloc(qa_, qa));
  RETURN_IF_ERROR(alloc(qb_, qa > 0 ? b : 0));
  RETURN_IF_ERROR(alloc(ref_, ref));
  return alloc(partial_, partial);
}

absl::Status Runner::BuildVariant(const Problem& p, Variant& v) {
  ASSIGN_OR_RETURN(v.pk, BuildProblemKernels(f_, p, v.chunks,
                                              rt_->group().context().compute_capability()));
  ASSIGN_OR_RETURN(std::string_view gemm_src, jit::ExampleKernelSource(v.pk.gemm_source));
  ASSIGN_OR_RETURN(v.gemm, rt_->Compile(v.pk.plan, v.pk.gemm_spec, gemm_src));
  ASSIGN_OR_RETURN(v.comm, rt_->Compile(v.pk.plan, v.pk.comm_spec, CommOnlySource()));
  std::map<std::string, CUdeviceptr> ops;
  switch (p.workload) {
    case Workload::kAllGatherGemm:
      ops = {{"A", data_->local()}, {"B", b_.get()}, {"C", c_.get()}};
      break;
    case Workload::kGemmReduceScatter:
      ops = {{"A", a_.get()}, {"B", b_.get()}, {"C", input_->local()}, {"output", output_->local()}};
      break;
    case Workload::kGemmAllReduce:
      ops = {{"A", a_.get()}, {"B", b_.get()}, {"C", data_->local()}};
      break;
  }
  ASSIGN_OR_RETURN(v.gemm_bound, rt_->Bind(*v.gemm, ops));
  ASSIGN_OR_RETURN(v.comm_bound, rt_->Bind(*v.comm, ops));
  return absl::OkStatus();
}

absl::Status Runner::Reference(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, const Problem& p,
                               int64_t m, bool accumulate) {
  if (cublas_) return cublas_->Gemm(a, b, c, m, p.n, p.k, plan::DType::kBF16, /*out_f32=*/true,
                                    accumulate);
  return tk_->ReferenceGemm(a, b, c, static_cast<int>(m), static_cast<int>(p.n),
                            static_cast<int>(p.k), plan::DType::kBF16, accumulate, stream());
}

absl::Status Runner::SetUpInputs(const Problem& p, const Variant& v) {
  ref_note_ =
      cublas_ ? "" : absl::StrCat("fp32 reference by the naive kernel (", cublas_error_, ")");
  RETURN_IF_ERROR(is_ag(p) ? SetUpGatherInputs(p, v) : SetUpReduceInputs(p, v));
  ASSIGN_OR_RETURN(ref_absmax_, checks_->AbsMax(ref_.get(), p.m * p.n, stream()));
  return absl::OkStatus();
}

absl::Status Runner::SetUpGatherInputs(const Problem& p, const Variant& v) {
  const plan::DType bf = plan::DType::kBF16;
  CUstream s = stream();
  // Every rank's shard, as the plan places it, from that rank's seed: the full A every rank
  // must end up with. Kept in a_ (the gathered-A check); data starts as the full A too, so the
  // local GEMM has all of it.
  shards_.clear();
  for (int q = 0; q < world_; ++q) {
    auto it = v.pk.plan.ranks[q].initial.find("data");
    if (it == v.pk.plan.ranks[q].initial.end() || it->second.boxes().empty()) {
      return absl::InternalError(absl::StrCat("plan: rank ", q, " has no initial shard"));
    }
    int64_t lo = INT64_MAX, hi = 0;
    for (const plan::Box& bx : it->second.boxes()) {
      lo = std::min(lo, bx.lo[0]);
      hi = std::max(hi, bx.hi[0]);
    }
    shards_.push_back({lo, hi});
    RETURN_IF_ERROR(tk_->Fill(a_.get() + lo * p.k * kEs, (hi - lo) * p.k, bf, SeedA(p, q), s));
  }
  CU_RETURN_IF_ERROR(api().cuMemcpyAsync(data_->local(), a_.get(), p.m * p.k * kEs, s));
  RETURN_IF_ERROR(tk_->Fill(b_.get(), p.n * p.k, bf, SeedB(p, rank_), s));
  return Reference(a_.get(), b_.get(), ref_.get(), p, p.m, false);
}

absl::Status Runner::SetUpReduceInputs(const Problem& p, const Variant& v) {
  const plan::DType bf = plan::DType::kBF16;
  CUstream s = stream();
  RETURN_IF_ERROR(tk_->Fill(a_.get(), p.m * p.k, bf, SeedA(p, rank_), s));
  RETURN_IF_ERROR(tk_->Fill(b_.get(), p.n * p.k, bf, SeedB(p, rank_), s));
  // This rank's partial first: the local GEMM is checked against it, and its output saved
  // (the partial that comm_only moves). Then the full sum of every rank's partial, each peer's
  // inputs regenerated from its seed.
  RETURN_IF_ERROR(Reference(a_.get(), b_.get(), ref_.get(), p, p.m, false));
  const CUdeviceptr c = p.workload == Workload::kGemmAllReduce ? data_->local() : input_->local();
  RETURN_IF_ERROR(tk_->Poison16(c, p.m * p.n, s));
  RETURN_IF_ERROR(rt_->LaunchLocal(*v.gemm_bound, s));
  ASSIGN_OR_RETURN(double own_absmax, checks_->AbsMax(ref_.get(), p.m * p.n, s));
  ASSIGN_OR_RETURN(CompareResult own,
                   checks_->Compare(c, ref_.get(), p.m, p.n, kRtol, kAtol * own_absmax, s));
  local_check_ = Measurement{};
  local_check_.check = own.Passed(kRtol) ? "pass" : "fail";
  local_check_.rel_err = own.rel_err;
  if (local_check_.check == "fail") {
    local_check_.note = absl::StrFormat("own partial: %d non-finite, %d of %d outside tolerance",
                                        own.nonfinite, own.out_of_tolerance, own.elements);
  }
  CU_RETURN_IF_ERROR(api().cuMemcpyAsync(partial_.get(), c, p.m * p.n * kEs, s));
  for (int q = 0; q < world_; ++q) {
    if (q == rank_) continue;
    RETURN_IF_ERROR(tk_->Fill(qa_.get(), p.m * p.k, bf, SeedA(p, q), s));
    RETURN_IF_ERROR(tk_->Fill(qb_.get(), p.n * p.k, bf, SeedB(p, q), s));
    RETURN_IF_ERROR(Reference(qa_.get(), qb_.get(), ref_.get(), p, p.m, true));
  }
  row0_ = 0;
  rows_ = p.m;
  if (p.workload == Workload::kGemmReduceScatter) {
    const plan::Expectation* mine = nullptr;
    for (const plan::Expectation& e : v.pk.plan.postcondition) {
      if (e.rank == rank_ && e.buffer == "output") mine = &e;
    }
    if (mine == nullptr || mine->sources.empty()) {
      return absl::InternalError("plan has no postcondition for this rank's output");
    }
    row0_ = mine->sources[0].region.boxes()[0].lo[0];
    rows_ = mine->region.NumElements() / p.n;
  }
  return absl::OkStatus();
}

absl::Status Runner::RunProblem(const Problem& p) {
  std::vector<ResultRow> rows;
  absl::Status st = MeasureAll(p, rows);
  Emit(p, rows);
  return st;
}

absl::Status Runner::MeasureAll(const Problem& p, std::vector<ResultRow>& rows) {
  ProblemRun run{p, rows};
  RETURN_IF_ERROR(BuildVariants(run));
  if (run.base == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(SetUpOnAllRanks(run));
  RETURN_IF_ERROR(MeasureLocalGemm(run));
  RETURN_IF_ERROR(MeasureLocalGemmGrids(run));
  if (cublas_) RETURN_IF_ERROR(MeasureCublas(run));
  RETURN_IF_ERROR(MeasureCommOnly(run));
  RETURN_IF_ERROR(MeasureFused(run));
  if (run.best_comm != nullptr) RETURN_IF_ERROR(MeasureUnfused(run));
  return absl::OkStatus();
}

cuda::LaunchOptions Runner::LaunchOptionsFor(const std::string& backend) const {
  cuda::LaunchOptions lo;
  lo.backend = backend == "ce" ? Backend::kCopyEngine : Backend::kSm;
  lo.timeout = absl::Milliseconds(f_.timeout_ms);
  lo.free_ctas = f_.ce_free_ctas;
  lo.prefer_copy_engines = f_.ce_prefer_dma;
  return lo;
}

cuda::LaunchOptions Runner::TransfersAloneOptionsFor(const std::string& backend,
                                                     const Variant& v) const {
  cuda::LaunchOptions lo = LaunchOptionsFor(backend);
  lo.compute_ctas = f_.transfers_compute_ctas;
  rt_->SizeTransfersAlone(*v.comm, lo);
  return lo;
}

int Runner::GridCtas(int pct) const {
  return std::max(1, rt_->group().context().sm_count() * pct / 100);
}

bool Runner::SkipOnCopyEngine(ProblemRun& run, const std::string& impl, const std::string& backend,
                              const Variant& v) const {
  if (backend != "ce" || !v.pk.has_reductions) return false;
  ResultRow r = RowFor(run.p, impl);
  r.backend = backend;
  r.chunks = v.chunks;
  r.check = "unsupported";
  r.note = absl::StrCat("copy-engine backend moves copies only; plan ",
                        PlanTemplate(f_, run.p.workload), " reduces");
  run.rows.push_back(r);
  return true;
}

absl::Status Runner::BuildVariants(ProblemRun& run) {
  const absl::Time started = absl::Now();
  if (rank_ == 0) std::fprintf(stderr, "  building the kernels of %s\n", run.p.Label().c_str());
  const cache::CacheStats cache_before = cache_->Stats();
  run.variants.resize(f_.chunks.size());
  for (size_t i = 0; i < run.variants.size(); ++i) {
    Variant& v = run.variants[i];
    v.chunks = f_.chunks[i];
    absl::Status st = BuildVariant(run.p, v);
    Measurement mine;
    mine.check = st.ok() ? "pass" : "error";
    mine.note = st.ok() ? "" : std::string(st.message()).substr(0, 400);
    ASSIGN_OR_RETURN(Measurement all, Gather(mine));
    v.usable = all.check == "pass";
    v.error = all.note;
    if (!v.usable) {
      ResultRow r = RowFor(run.p, "syncopate");
      r.chunks = v.chunks;
      r.check = "unsupported";
      r.note = absl::StrCat("plan/compile: ", v.error);
      run.rows.push_back(r);
    }
  }
  for (Variant& v : run.variants) {
    if (v.usable && run.base == nullptr) run.base = &v;
  }
  if (rank_ == 0) {
    // Where rank 0's kernels came from: a kernel cache filled beforehand (gpu-run.sh's
    // WARM_ARGS) should leave nothing to compile here.
    const cache::CacheStats c = cache_->Stats();
    std::fprintf(stderr,
                 "  built in %.1f s (every rank); rank 0's kernels: %llu from memory, %llu from "
                 "disk, %llu fetched, %llu compiled here\n",
                 absl::ToDoubleSeconds(absl::Now() - started),
                 static_cast<unsigned long long>(c.memory_hits - cache_before.memory_hits),
                 static_cast<unsigned long long>(c.disk_hits - cache_before.disk_hits),
                 static_cast<unsigned long long>(c.fetched - cache_before.fetched),
                 static_cast<unsigned long long>(c.compiles - cache_before.compiles));
  }
  return absl::OkStatus();
}

absl::Status Runner::SetUpOnAllRanks(ProblemRun& run) {
  absl::Status st = SetUpInputs(run.p, *run.base);
  Measurement mine = st.ok() ? Measurement{} : Failed(st, true);
  ASSIGN_OR_RETURN(Measurement all, Gather(mine));
  if (all.fatal) return absl::AbortedError(absl::StrCat(run.p.Label(), " set-up: ", all.note));
  return absl::OkStatus();
}

}  // namespace runner

absl::Status RunRank(const BenchFlags& flags, int world, int rank, const std::string& group_id) {
  const std::vector<Problem> problems = ProblemsFor(flags, world);
  runner::Runner runner(flags, world, rank);
  RETURN_IF_ERROR(runner.Init(group_id, problems));
  for (const Problem& p : problems) {
    if (rank == 0) {
      std::printf("\n== %s\n", p.Label().c_str());
      std::fflush(stdout);
    }
    RETURN_IF_ERROR(runner.RunProblem(p));
  }
  return absl::OkStatus();
}

}  // namespace syncopate::tp_bench
