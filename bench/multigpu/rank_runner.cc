// One rank of syncopate_tp_bench; see rank_runner.h.
#include "bench/multigpu/rank_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/multigpu/check_kernels.h"
#include "bench/multigpu/kernels.h"
#include "bench/multigpu/results.h"
#include "core/base/status_macros.h"
#include "jit/cache/kernel_cache.h"
#include "jit/compiler/embedded_headers.h"
#include "runtime/cuda/overlap_runtime.h"
#include "runtime/cuda/workloads/test_kernels.h"
#include "runtime/gemm/cublas_lib.h"

namespace syncopate::tp_bench {
namespace {

using cuda::Backend;
using cuda::DeviceBuffer;

constexpr int64_t kEs = 2;  // bf16
// The correctness tolerances, shared with the workloads' checks (test_kernels.h).
using workloads::kAtol;
using workloads::kReduceAtol;
using workloads::kReduceRtol;
using workloads::kRtol;

// What one rank measured for one configuration; travels between ranks as text.
struct Measurement {
  double time_ms = -1;
  std::string check = "skip";
  double rel_err = -1;
  double out_sum = 0, out_sq = 0;
  std::string note;
  bool fatal = false;  // the group is broken: stop this world size

  std::string Encode() const {
    return absl::StrCat(absl::StrFormat("%.17g", time_ms), "\x1f", check, "\x1f",
                        absl::StrFormat("%.17g", rel_err), "\x1f",
                        absl::StrFormat("%.17g", out_sum), "\x1f",
                        absl::StrFormat("%.17g", out_sq), "\x1f", fatal ? 1 : 0, "\x1f", note);
  }
  static Measurement Decode(const std::string& s) {
    Measurement m;
    std::vector<std::string> f = absl::StrSplit(s, '\x1f');
    if (f.size() < 7) {
      m.check = "error";
      m.note = "malformed result from a peer";
      return m;
    }
    (void)absl::SimpleAtod(f[0], &m.time_ms);
    m.check = f[1];
    (void)absl::SimpleAtod(f[2], &m.rel_err);
    (void)absl::SimpleAtod(f[3], &m.out_sum);
    (void)absl::SimpleAtod(f[4], &m.out_sq);
    m.fatal = f[5] == "1";
    m.note = f[6];
    return m;
  }
};

// Rank 0's view of one configuration: slowest rank's time, worst error, any failure.
Measurement Combine(const std::vector<Measurement>& all) {
  Measurement c = all[0];
  std::set<std::string> checks;
  for (size_t r = 0; r < all.size(); ++r) {
    const Measurement& m = all[r];
    checks.insert(m.check);
    c.time_ms = (c.time_ms < 0 || m.time_ms < 0) ? -1 : std::max(c.time_ms, m.time_ms);
    c.rel_err = std::max(c.rel_err, m.rel_err);
    c.fatal = c.fatal || m.fatal;
    if (r > 0 && !m.note.empty() && m.note != all[0].note) {
      absl::StrAppend(&c.note, c.note.empty() ? "" : "; ", "rank ", r, ": ", m.note);
    }
  }
  for (const char* worst : {"error", "fail", "unsupported"}) {
    if (checks.count(worst)) {
      c.check = worst;
      return c;
    }
  }
  c.check = checks.size() == 1 ? *checks.begin() : "skip";
  return c;
}

Measurement Failed(const absl::Status& s, bool fatal = false) {
  Measurement m;
  m.check = "error";
  m.note = std::string(s.message()).substr(0, 400);
  m.fatal = fatal;
  return m;
}

// A chunks-per-shard variant of one problem: plan, compiled kernels, bindings.
struct Variant {
  int chunks = 0;
  ProblemKernels pk;
  std::unique_ptr<cuda::FusedKernel> gemm, comm;
  std::unique_ptr<cuda::BoundKernel> gemm_bound, comm_bound;
  bool usable = false;
  std::string error;
};

// What the steps of Runner::MeasureAll share for one problem: the rows so far, the variants, and
// what one step finds for a later one.
struct ProblemRun {
  const Problem& p;
  std::vector<ResultRow>& rows;
  std::vector<Variant> variants;
  Variant* base = nullptr;  // the first usable variant: inputs, local GEMM, cuBLAS
  // The fastest comm_only configuration without a failed check, which the unfused row runs.
  const Variant* best_comm = nullptr;
  std::string best_backend;
  double best_comm_ms = -1;
};

class Runner {
 public:
  Runner(const BenchFlags& flags, int world, int rank) : f_(flags), world_(world), rank_(rank) {}

  absl::Status Init(const std::string& group_id, const std::vector<Problem>& problems);
  // Measures every configuration of `p`; rank 0 prints and appends the rows, also those measured
  // before a failure. Returns non-OK only when the world size cannot go on (group broken,
  // rendezvous failed).
  absl::Status RunProblem(const Problem& p);

 private:
  const cuda::DriverApi& api() const { return rt_->api(); }
  CUstream stream() const { return stream_.get(); }
  bool is_ag(const Problem& p) const { return p.workload == Workload::kAllGatherGemm; }
  uint64_t SeedA(const Problem& p, int q) const { return p.seed() * 1000 + q; }
  uint64_t SeedB(const Problem& p, int q) const { return p.seed() * 1000 + 500 + q; }

  absl::Status Allocate(const std::vector<Problem>& problems);
  absl::Status BuildVariant(const Problem& p, Variant& v);
  absl::Status SetUpInputs(const Problem& p, const Variant& v);
  // SetUpInputs of AG: every rank's shard in a_ and data, B, the reference of the full GEMM.
  absl::Status SetUpGatherInputs(const Problem& p, const Variant& v);
  // SetUpInputs of RS / AR: this rank's partial (checked, saved), the reference of the sum of
  // every rank's partial, and which rows of it this rank ends up with.
  absl::Status SetUpReduceInputs(const Problem& p, const Variant& v);
  absl::Status Reference(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, const Problem& p,
                         int64_t m, bool accumulate);
  // Median ms over reps of `run` (after warm-up); `prepare` runs before each, untimed.
  absl::StatusOr<double> Time(const std::function<absl::Status()>& prepare,
                              const std::function<absl::Status()>& run);
  // Sync that turns a protocol failure into a fatal measurement.
  absl::Status SyncAll() { return rt_->Sync(stream()); }
  // Check after a launch. kResult: C and the gathered A (AG), this rank's reduced rows (RS), the
  // full sum (AR). kGatherOnly: the gathered A alone (AG comm_only computes no C).
  enum class CheckWhat { kNone, kResult, kGatherOnly };
  Measurement CheckResult(const Problem& p, CheckWhat what);
  absl::Status PoisonForCheck(const Problem& p);
  // --trace: two launches, then one traced (impl/trace.cuh); the records go to a CSV named by
  // `tag`. Collective (every rank launches).
  absl::Status TraceFused(Variant& v, const cuda::LaunchOptions& lo, const std::string& tag);
  absl::Status RestorePartial(const Problem& p);
  absl::StatusOr<Measurement> Gather(const Measurement& mine);
  // Measures (time, then one checked launch) and gathers; `rows` gets rank 0's row.
  absl::Status Measure(const Problem& p, ResultRow row, const std::function<absl::Status()>& prepare,
                       const std::function<absl::Status()>& run,
                       const std::function<absl::Status()>& prepare_check, CheckWhat what,
                       std::vector<ResultRow>& rows, Measurement* combined);
  void Emit(const Problem& p, std::vector<ResultRow>& rows);
  // Every configuration of `p`, in the order of rank_runner.h's list; each step below is one
  // entry of it.
  absl::Status MeasureAll(const Problem& p, std::vector<ResultRow>& rows);
  // Plans and kernels for every chunks value; a variant is used only where every rank built it
  // (launches must match across ranks). Sets run.base.
  absl::Status BuildVariants(ProblemRun& run);
  // Inputs and the fp32 reference, the same way on every rank; any failure is fatal for the world
  // size, since ranks would no longer agree on what runs next.
  absl::Status SetUpOnAllRanks(ProblemRun& run);
  // The local GEMM (identity schedule): T_gemm_local. AG: C checked against the reference.
  // RS / AR: its output is this rank's partial, checked in SetUpInputs against the own-partial
  // reference (the comm_only and unfused measurements start from that partial).
  absl::Status MeasureLocalGemm(ProblemRun& run);
  // The local GEMM on a smaller grid (--grid-pct), unchecked (same kernel as above).
  absl::Status MeasureLocalGemmGrids(ProblemRun& run);
  // cuBLAS on the same per-rank GEMM (bf16 out), for reference; not checked.
  absl::Status MeasureCublas(ProblemRun& run);
  // comm_only per backend x chunks: T_comm; records the fastest in run.best_*.
  absl::Status MeasureCommOnly(ProblemRun& run);
  // One comm_only row: backend `b`, variant `v`.
  absl::Status MeasureCommOnlyConfig(ProblemRun& run, const std::string& b, const Variant& v);
  // The fused kernel per backend x chunks (x comm CTA count, grid and tile dealing on SM).
  absl::Status MeasureFused(ProblemRun& run);
  // One fused row: backend `b`, variant `v`, one comm CTA count, grid and tile dealing.
  absl::Status MeasureFusedConfig(ProblemRun& run, const std::string& b, Variant& v, int comm_ctas,
                                  int pct, const std::string& dealing);
  // Unfused: the parts back to back at the best comm_only config (what a fallback runs).
  absl::Status MeasureUnfused(ProblemRun& run);
  // The launch options of backend "ce" or "sm" from the flags.
  cuda::LaunchOptions LaunchOptionsFor(const std::string& backend) const;
  // For `v`'s comm-only kernel, which runs alone: the ops' unfused comm CTAs (SM backend) and
  // --transfers-compute-ctas.
  cuda::LaunchOptions TransfersAloneOptionsFor(const std::string& backend, const Variant& v) const;
  // CTAs in `pct` percent of this rank's SMs (at least one).
  int GridCtas(int pct) const;
  // The copy-engine backend moves copies only: a plan that reduces gets an "unsupported" row
  // (returns true) instead of a measurement.
  bool SkipOnCopyEngine(ProblemRun& run, const std::string& impl, const std::string& backend,
                        const Variant& v) const;

  const BenchFlags& f_;
  int world_, rank_;
  std::unique_ptr<cache::KernelCache> cache_;
  std::unique_ptr<cuda::OverlapRuntime> rt_;
  std::unique_ptr<workloads::TestKernels> tk_;
  std::unique_ptr<CheckKernels> checks_;
  std::unique_ptr<gemm::CublasLib> cublas_;
  std::string cublas_error_;
  cuda::Stream stream_;
  std::vector<cuda::Event> events_;
  // A run that is two launches marks the point between them (MarkMid) during timed reps, so
  // Time can say where the time of a slow composite went.
  std::vector<cuda::Event> mid_events_;
  int timed_rep_ = -1;       // the rep Time is in; -1 in warm-up and checks
  std::vector<bool> mid_marked_;
  std::string split_note_;   // set by Time when every rep marked its middle
  absl::Status MarkMid() {
    if (timed_rep_ < 0) return absl::OkStatus();
    mid_marked_[timed_rep_] = true;
    return mid_events_[timed_rep_].Record(stream());
  }
  // Symmetric (peers read / write them) and local buffers, sized for the largest problem.
  cuda::SymmetricBuffer* data_ = nullptr;    // AG: gathered A; AR: C reduced in place
  cuda::SymmetricBuffer* input_ = nullptr;   // RS: C (this rank's partial)
  cuda::SymmetricBuffer* output_ = nullptr;  // RS: this rank's reduced rows
  DeviceBuffer a_, b_, c_, qa_, qb_, ref_, partial_;
  // Per problem: shard rows of every rank (AG), this rank's result rows (RS).
  std::vector<std::pair<int64_t, int64_t>> shards_;
  int64_t row0_ = 0, rows_ = 0;
  double ref_absmax_ = 0;
  std::string ref_note_;
  Measurement local_check_;  // RS / AR: the local GEMM's partial against its own reference
};

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

absl::StatusOr<double> Runner::Time(const std::function<absl::Status()>& prepare,
                                    const std::function<absl::Status()>& run) {
  for (int i = 0; i < f_.warmup; ++i) {
    if (prepare) RETURN_IF_ERROR(prepare());
    RETURN_IF_ERROR(run());
  }
  // No host sync between reps: a rank's host running ahead only queues work, and the launch
  // protocol's entry waits line the ranks up on the GPU.
  mid_marked_.assign(f_.reps, false);
  split_note_.clear();
  for (int i = 0; i < f_.reps; ++i) {
    if (prepare) RETURN_IF_ERROR(prepare());
    RETURN_IF_ERROR(events_[2 * i].Record(stream()));
    timed_rep_ = i;
    absl::Status ran = run();
    timed_rep_ = -1;
    RETURN_IF_ERROR(ran);
    RETURN_IF_ERROR(events_[2 * i + 1].Record(stream()));
  }
  RETURN_IF_ERROR(SyncAll());
  std::vector<double> ms, first, second;
  for (int i = 0; i < f_.reps; ++i) {
    ASSIGN_OR_RETURN(float t, events_[2 * i + 1].ElapsedMsSince(events_[2 * i]));
    ms.push_back(t);
    if (mid_marked_[i]) {
      ASSIGN_OR_RETURN(float a, mid_events_[i].ElapsedMsSince(events_[2 * i]));
      ASSIGN_OR_RETURN(float b, events_[2 * i + 1].ElapsedMsSince(mid_events_[i]));
      first.push_back(a);
      second.push_back(b);
    }
  }
  auto median = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  if (first.size() == ms.size()) {
    split_note_ = absl::StrFormat("parts %.3f + %.3f ms (medians)", median(first), median(second));
  }
  return median(ms);
}

absl::Status Runner::TraceFused(Variant& v, const cuda::LaunchOptions& lo, const std::string& tag) {
  ASSIGN_OR_RETURN(cuda::OverlapRuntime::Geometry geo, rt_->GridOf(*v.gemm_bound, lo));
  const size_t bytes = sizeof(uint64_t) * 4 * geo.ctas;
  ASSIGN_OR_RETURN(DeviceBuffer records, DeviceBuffer::Allocate(api(), bytes));
  CU_RETURN_IF_ERROR(api().cuMemsetD8Async(records.get(), 0, bytes, stream()));
  // The traced launch follows two others without a host sync, as a timed rep does.
  for (int i = 0; i < 2; ++i) RETURN_IF_ERROR(rt_->Launch(*v.gemm_bound, stream(), lo));
  cuda::LaunchOptions traced = lo;
  traced.cta_trace = records.get();
  RETURN_IF_ERROR(rt_->Launch(*v.gemm_bound, stream(), traced));
  RETURN_IF_ERROR(SyncAll());
  std::vector<uint64_t> rec(4 * static_cast<size_t>(geo.ctas));
  CU_RETURN_IF_ERROR(api().cuMemcpyDtoH(rec.data(), records.get(), bytes));
  const std::string path = absl::StrCat(f_.trace_dir, "/", tag, "_rank", rank_, ".csv");
  std::ofstream out(path);
  out << "cta,comm,smid,start_ns,end_ns,wait_ns,waits\n";
  for (int b = 0; b < geo.ctas; ++b) {
    const uint64_t* r = &rec[4 * static_cast<size_t>(b)];
    out << b << ',' << (b < geo.comm_ctas ? 1 : 0) << ',' << (r[3] >> 32) << ',' << r[0] << ','
        << r[1] << ',' << r[2] << ',' << (r[3] & 0xffffffffu) << '\n';
  }
  if (!out.good()) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::Status Runner::PoisonForCheck(const Problem& p) {
  CUstream s = stream();
  switch (p.workload) {
    case Workload::kAllGatherGemm: {
      // Peers' rows become NaN: a chunk that never arrives shows up in the gathered-A check and
      // in C. The own shard is put back from the full copy.
      RETURN_IF_ERROR(tk_->Poison16(data_->local(), p.m * p.k, s));
      const auto [lo, hi] = shards_[rank_];
      CU_RETURN_IF_ERROR(api().cuMemcpyAsync(data_->local() + lo * p.k * kEs,
                                             a_.get() + lo * p.k * kEs, (hi - lo) * p.k * kEs, s));
      return tk_->Poison16(c_.get(), p.m * p.n, s);
    }
    case Workload::kGemmReduceScatter:
      RETURN_IF_ERROR(tk_->Poison16(input_->local(), p.m * p.n, s));
      return tk_->Poison16(output_->local(), rows_ * p.n, s);
    case Workload::kGemmAllReduce:
      return tk_->Poison16(data_->local(), p.m * p.n, s);
  }
  return absl::OkStatus();
}

absl::Status Runner::RestorePartial(const Problem& p) {
  // comm_only moves whatever the result buffer holds: put this rank's GEMM partial back (ring
  // and in-place plans reduce into it, so repeated launches would otherwise compound).
  CUdeviceptr dst = p.workload == Workload::kGemmAllReduce ? data_->local() : input_->local();
  CU_RETURN_IF_ERROR(api().cuMemcpyAsync(dst, partial_.get(), p.m * p.n * kEs, stream()));
  return absl::OkStatus();
}

Measurement Runner::CheckResult(const Problem& p, CheckWhat what_to_check) {
  Measurement m;
  if (what_to_check == CheckWhat::kNone) return m;
  if (what_to_check == CheckWhat::kGatherOnly) {
    auto mm = checks_->Mismatch(data_->local(), a_.get(), p.m * p.k, stream());
    if (!mm.ok()) return Failed(mm.status());
    m.check = *mm == 0 ? "pass" : "fail";
    m.rel_err = static_cast<double>(*mm) / static_cast<double>(p.m * p.k);
    if (*mm != 0) m.note = absl::StrFormat("gathered A differs in %d elements", *mm);
    return m;
  }
  CUstream s = stream();
  absl::StatusOr<CompareResult> r;
  double rtol = kRtol, atol = kAtol;
  std::string what;
  int64_t bad_a = 0;
  if (is_ag(p)) {
    {
      auto mm = checks_->Mismatch(data_->local(), a_.get(), p.m * p.k, s);
      if (!mm.ok()) return Failed(mm.status());
      bad_a = *mm;
    }
    r = checks_->Compare(c_.get(), ref_.get(), p.m, p.n, rtol, atol * ref_absmax_, s);
    what = "C = allgather(A) B^T";
  } else {
    rtol = kReduceRtol;
    atol = kReduceAtol;
    if (p.workload == Workload::kGemmReduceScatter) {
      r = checks_->Compare(output_->local(), ref_.get() + row0_ * p.n * 4, rows_, p.n, rtol,
                           atol * ref_absmax_, s);
      what = absl::StrCat("rows [", row0_, ", ", row0_ + rows_, ") of sum_r A_r B_r^T");
    } else {
      r = checks_->Compare(data_->local(), ref_.get(), p.m, p.n, rtol, atol * ref_absmax_, s);
      what = "sum_r A_r B_r^T on every rank";
    }
  }
  if (!r.ok()) return Failed(r.status());
  m.rel_err = r->rel_err;
  m.out_sum = r->out_sum;
  m.out_sq = r->out_sq;
  const bool ok = r->Passed(rtol) && bad_a == 0;
  m.check = ok ? "pass" : "fail";
  if (!ok) {
    m.note = absl::StrFormat("%s: %d non-finite, %d of %d outside tolerance, rel err %.2e",
                             what, r->nonfinite, r->out_of_tolerance, r->elements, r->rel_err);
    if (bad_a > 0) absl::StrAppend(&m.note, absl::StrFormat("; gathered A differs in %d elements", bad_a));
  }
  if (!ref_note_.empty()) absl::StrAppend(&m.note, m.note.empty() ? "" : "; ", ref_note_);
  return m;
}

absl::StatusOr<Measurement> Runner::Gather(const Measurement& mine) {
  ASSIGN_OR_RETURN(std::vector<cuda::PeerMessage> all, rt_->group().rendezvous().AllGather(mine.Encode()));
  std::vector<Measurement> ms;
  for (const cuda::PeerMessage& msg : all) ms.push_back(Measurement::Decode(msg.bytes));
  return Combine(ms);
}

absl::Status Runner::Measure(const Problem& p, ResultRow row,
                             const std::function<absl::Status()>& prepare,
                             const std::function<absl::Status()>& run,
                             const std::function<absl::Status()>& prepare_check,
                             CheckWhat what, std::vector<ResultRow>& rows,
                             Measurement* combined) {
  Measurement mine;
  if (rt_->group().broken()) {
    mine = Failed(absl::FailedPreconditionError("group broken by an earlier failure"), true);
  } else {
    absl::StatusOr<double> t = Time(prepare, run);
    if (!t.ok()) {
      mine = Failed(t.status(), rt_->group().broken());
    } else {
      if (f_.check && what != CheckWhat::kNone) {
        absl::Status st = prepare_check ? prepare_check() : absl::OkStatus();
        if (st.ok()) st = run();
        if (st.ok()) st = SyncAll();
        mine = st.ok() ? CheckResult(p, what) : Failed(st, rt_->group().broken());
      }
      mine.time_ms = *t;
      // Time's split of this measurement (the checked launch above is not timed).
      if (!split_note_.empty()) absl::StrAppend(&mine.note, mine.note.empty() ? "" : "; ", split_note_);
    }
  }
  ASSIGN_OR_RETURN(Measurement all, Gather(mine));
  row.time_ms = all.time_ms;
  row.tflops = all.time_ms > 0 && row.impl != "comm-only" ? p.gemm_flop() / (all.time_ms * 1e9) : -1;
  row.check = all.check;
  row.rel_err = all.rel_err;
  row.out_sum = all.out_sum;
  row.out_sq = all.out_sq;
  row.note = row.note.empty() ? all.note : absl::StrCat(row.note, all.note.empty() ? "" : "; ", all.note);
  rows.push_back(row);
  // The table prints when the problem ends; this line now, so a run cut off by a time limit
  // still shows how far it got (and that it was measuring, not compiling).
  if (rank_ == 0) {
    std::fprintf(stderr, "  measured %s %s x%d: %.4f ms, %s\n", row.impl.c_str(),
                 row.backend.c_str(), row.chunks, row.time_ms, row.check.c_str());
  }
  if (combined) *combined = all;
  if (all.fatal) {
    return absl::AbortedError(absl::StrCat(p.Label(), " ", row.impl, " ", row.backend, " x",
                                           row.chunks, ": ", all.note));
  }
  return absl::OkStatus();
}

void Runner::Emit(const Problem& p, std::vector<ResultRow>& rows) {
  if (rank_ != 0) return;
  FillBounds(rows);
  ResultRow pick;
  if (SelectBest(rows, &pick)) rows.push_back(pick);
  for (const ResultRow& r : rows) PrintTableRow(stdout, r);
  std::string err;
  if (!AppendCsv(f_.csv, rows, &err)) std::fprintf(stderr, "syncopate_tp_bench: %s\n", err.c_str());
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

absl::Status Runner::MeasureLocalGemm(ProblemRun& run) {
  const Problem& p = run.p;
  // Tiles claimed, as the ops' fallback does (ops/op.cc): a static deal loses whole CTA shares
  // when a CTA starts late beside concurrent ranks.
  auto local = [&]() {
    return rt_->LaunchLocal(*run.base->gemm_bound, stream(), {.dynamic_tiles = true});
  };
  ResultRow r = RowFor(p, "local-gemm");
  if (is_ag(p)) {
    return Measure(
        p, r, nullptr, local, [&] { return tk_->Poison16(c_.get(), p.m * p.n, stream()); },
        CheckWhat::kResult, run.rows, nullptr);
  }
  RETURN_IF_ERROR(Measure(p, r, nullptr, local, nullptr, CheckWhat::kNone, run.rows, nullptr));
  ASSIGN_OR_RETURN(Measurement check, Gather(local_check_));
  ResultRow& back = run.rows.back();
  back.check = f_.check ? check.check : "skip";
  back.rel_err = check.rel_err;
  back.note = absl::StrCat("checked against this rank's own partial",
                           check.note.empty() ? "" : "; ", check.note);
  return absl::OkStatus();
}

absl::Status Runner::MeasureLocalGemmGrids(ProblemRun& run) {
  const int sms = rt_->group().context().sm_count();
  for (int pct : f_.grid_pct) {
    if (pct == 100) continue;
    ResultRow r = RowFor(run.p, "local-gemm");
    r.note = absl::StrCat("grid ", GridCtas(pct), " CTAs (", pct, "% of ", sms, " SMs)");
    auto launch = [&] {
      return rt_->LaunchLocal(*run.base->gemm_bound, stream(),
                              {.ctas = GridCtas(pct), .dynamic_tiles = true});
    };
    RETURN_IF_ERROR(
        Measure(run.p, r, nullptr, launch, nullptr, CheckWhat::kNone, run.rows, nullptr));
  }
  return absl::OkStatus();
}

absl::Status Runner::MeasureCublas(ProblemRun& run) {
  const Problem& p = run.p;
  ResultRow r = RowFor(p, "cublas-gemm");
  CUdeviceptr a = is_ag(p) ? data_->local() : a_.get();
  auto launch = [&] {
    return cublas_->Gemm(a, b_.get(), c_.get(), p.m, p.n, p.k, plan::DType::kBF16, false, false);
  };
  Measurement mine;
  auto t = Time(nullptr, launch);
  mine = t.ok() ? Measurement{} : Failed(t.status());
  if (t.ok()) mine.time_ms = *t;
  ASSIGN_OR_RETURN(Measurement all, Gather(mine));
  r.time_ms = all.time_ms;
  r.tflops = all.time_ms > 0 ? p.gemm_flop() / (all.time_ms * 1e9) : -1;
  r.check = all.check == "error" ? "error" : "skip";
  r.note = all.note;
  run.rows.push_back(r);
  return absl::OkStatus();
}

absl::Status Runner::MeasureCommOnly(ProblemRun& run) {
  for (const std::string& b : f_.backends) {
    for (Variant& v : run.variants) {
      if (!v.usable) continue;
      if (SkipOnCopyEngine(run, "comm-only", b, v)) continue;
      RETURN_IF_ERROR(MeasureCommOnlyConfig(run, b, v));
    }
  }
  return absl::OkStatus();
}

absl::Status Runner::MeasureCommOnlyConfig(ProblemRun& run, const std::string& b,
                                           const Variant& v) {
  const Problem& p = run.p;
  const bool reduce = !is_ag(p);
  ResultRow r = RowFor(p, "comm-only");
  r.backend = b;
  r.chunks = v.chunks;
  const cuda::LaunchOptions lo = TransfersAloneOptionsFor(b, v);
  auto launch = [&] { return rt_->Launch(*v.comm_bound, stream(), lo); };
  std::function<absl::Status()> prepare;
  if (reduce) prepare = [&] { return RestorePartial(p); };
  std::function<absl::Status()> prepare_check = [&]() -> absl::Status {
    RETURN_IF_ERROR(PoisonForCheck(p));
    if (reduce) return RestorePartial(p);
    return absl::OkStatus();
  };
  Measurement all;
  RETURN_IF_ERROR(Measure(p, r, prepare, launch, prepare_check,
                          reduce ? CheckWhat::kResult : CheckWhat::kGatherOnly, run.rows, &all));
  const double comm_bytes =
      is_ag(p) ? static_cast<double>(p.m) * p.k * kEs * (world_ - 1) / world_
               : static_cast<double>(p.m) * p.n * kEs * (world_ - 1) / world_ *
                     (p.workload == Workload::kGemmAllReduce ? 2 : 1);
  ResultRow& back = run.rows.back();
  if (all.time_ms > 0) {
    // What the transfers ran on: the default counts depend on the GPU and the ranks sharing it.
    std::string grid;
    if (auto g = rt_->GridOf(*v.comm_bound, lo); g.ok()) {
      grid = absl::StrCat(", grid ", g->ctas);
      if (g->comm_ctas > 0) absl::StrAppend(&grid, " (", g->comm_ctas, " comm)");
    }
    // The plan too: --rs-plan / --ar-plan A/B runs write rows the CSV cannot tell apart otherwise.
    back.note = absl::StrCat(
        absl::StrFormat("%.1f GB/s per rank", comm_bytes / (all.time_ms * 1e6)), grid, ", plan ",
        PlanTemplate(f_, p.workload), back.note.empty() ? "" : "; ", back.note);
  }
  if (all.time_ms > 0 && all.check != "fail" && all.check != "error" &&
      (run.best_comm_ms < 0 || all.time_ms < run.best_comm_ms)) {
    run.best_comm_ms = all.time_ms;
    run.best_comm = &v;
    run.best_backend = b;
  }
  return absl::OkStatus();
}

absl::Status Runner::MeasureFused(ProblemRun& run) {
  for (const std::string& b : f_.backends) {
    for (Variant& v : run.variants) {
      if (!v.usable) continue;
      if (SkipOnCopyEngine(run, "syncopate", b, v)) continue;
      const std::vector<int> comm_counts = b == "sm" ? f_.comm_ctas : std::vector<int>{0};
      const std::vector<int> pcts = b == "sm" ? f_.grid_pct : std::vector<int>{100};
      for (int comm_ctas : comm_counts) {
        for (int pct : pcts) {
          for (const std::string& dealing : f_.tile_dealing) {
            RETURN_IF_ERROR(MeasureFusedConfig(run, b, v, comm_ctas, pct, dealing));
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Runner::MeasureFusedConfig(ProblemRun& run, const std::string& b, Variant& v,
                                        int comm_ctas, int pct, const std::string& dealing) {
  const Problem& p = run.p;
  ResultRow r = RowFor(p, "syncopate");
  r.backend = b;
  r.chunks = v.chunks;
  cuda::LaunchOptions lo = LaunchOptionsFor(b);
  lo.comm_ctas = comm_ctas;
  lo.dynamic_tiles = dealing == "dynamic";
  // The comm CTAs count toward the grid.
  if (pct != 100) {
    ASSIGN_OR_RETURN(cuda::OverlapRuntime::Geometry geo, rt_->GridOf(*v.gemm_bound, lo));
    lo.compute_ctas = std::max(1, GridCtas(pct) - geo.comm_ctas);
  }
  auto launch = [&] { return rt_->Launch(*v.gemm_bound, stream(), lo); };
  RETURN_IF_ERROR(Measure(
      p, r, nullptr, launch, [&] { return PoisonForCheck(p); }, CheckWhat::kResult, run.rows,
      nullptr));
  if (!f_.trace_dir.empty() && b == "sm") {
    RETURN_IF_ERROR(
        TraceFused(v, lo,
                   absl::StrCat(WorkloadName(p.workload), "_", p.model, "_M", p.m, "_tp", world_,
                                "_x", v.chunks, "_comm", comm_ctas, "_pct", pct, "_", dealing)));
  }
  std::string what;
  if (comm_ctas > 0) what = absl::StrCat("comm_ctas=", comm_ctas);
  if (pct != 100) absl::StrAppend(&what, what.empty() ? "" : " ", "compute_ctas=", lo.compute_ctas);
  if (lo.dynamic_tiles) absl::StrAppend(&what, what.empty() ? "" : " ", "dynamic tiles");
  if (!what.empty()) {
    ResultRow& back = run.rows.back();
    back.note = absl::StrCat(what, back.note.empty() ? "" : "; ", back.note);
  }
  return absl::OkStatus();
}

absl::Status Runner::MeasureUnfused(ProblemRun& run) {
  const Problem& p = run.p;
  ResultRow r = RowFor(p, "unfused");
  r.backend = run.best_backend;
  r.chunks = run.best_comm->chunks;
  const Variant* v = run.best_comm;
  const cuda::LaunchOptions lo = TransfersAloneOptionsFor(run.best_backend, *v);
  auto launch = [&]() -> absl::Status {
    if (is_ag(p)) {
      RETURN_IF_ERROR(rt_->Launch(*v->comm_bound, stream(), lo));
      RETURN_IF_ERROR(MarkMid());
      return rt_->LaunchLocal(*v->gemm_bound, stream(), {.dynamic_tiles = true});
    }
    RETURN_IF_ERROR(rt_->LaunchLocal(*v->gemm_bound, stream(), {.dynamic_tiles = true}));
    RETURN_IF_ERROR(MarkMid());
    return rt_->Launch(*v->comm_bound, stream(), lo);
  };
  r.note = is_ag(p) ? "comm_only then local GEMM" : "local GEMM then comm_only";
  if (f_.transfers_compute_ctas > 0) {
    absl::StrAppend(&r.note, "; transfers on ", f_.transfers_compute_ctas, " compute CTAs");
  }
  return Measure(
      p, r, nullptr, launch, [&] { return PoisonForCheck(p); }, CheckWhat::kResult, run.rows,
      nullptr);
}

}  // namespace

absl::Status RunRank(const BenchFlags& flags, int world, int rank, const std::string& group_id) {
  const std::vector<Problem> problems = ProblemsFor(flags, world);
  Runner runner(flags, world, rank);
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
