// syncopate_tp_bench's rank (rank_runner.h): the Runner class and what its parts share.
// rank_runner.cc sets a problem up and walks its configurations; rank_measure.cc times, checks
// and gathers each of them into rows. Internal to the bench. Thread-compatible: one Runner per
// rank process.
#pragma once

#include <cuda.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/multigpu/check_kernels.h"
#include "bench/multigpu/kernels.h"
#include "bench/multigpu/results.h"
#include "bench/multigpu/tp_config.h"
#include "jit/cache/kernel_cache.h"
#include "runtime/cuda/overlap_runtime.h"
#include "runtime/cuda/workloads/test_kernels.h"
#include "runtime/gemm/cublas_lib.h"

namespace syncopate::tp_bench::runner {

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
                        absl::StrFormat("%.17g", out_sum), "\x1f", absl::StrFormat("%.17g", out_sq),
                        "\x1f", fatal ? 1 : 0, "\x1f", note);
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
Measurement Combine(const std::vector<Measurement>& all);
Measurement Failed(const absl::Status& s, bool fatal = false);

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
  absl::Status Reference(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, const Problem& p, int64_t m,
                         bool accumulate);
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
  absl::Status Measure(const Problem& p, ResultRow row,
                       const std::function<absl::Status()>& prepare,
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
  // Calls `measure(b, v)` for every backend of the flags and every usable variant; on the copy
  // engine a plan that reduces gets an "unsupported" `impl` row instead (SkipOnCopyEngine).
  absl::Status ForEachBackendVariant(
      ProblemRun& run, const std::string& impl,
      const std::function<absl::Status(const std::string&, Variant&)>& measure);
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
  int timed_rep_ = -1;  // the rep Time is in; -1 in warm-up and checks
  std::vector<bool> mid_marked_;
  std::string split_note_;  // set by Time when every rep marked its middle
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

}  // namespace syncopate::tp_bench::runner
