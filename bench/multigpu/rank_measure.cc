// One rank of syncopate_tp_bench (rank_runner_internal.h): timing a configuration, checking
// its output, gathering every rank's measurement into rank 0's row, and the rows of each kind
// (local GEMM, cuBLAS, comm-only, fused, unfused).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/multigpu/rank_runner_internal.h"
#include "core/base/status_macros.h"

namespace syncopate::tp_bench::runner {

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

Measurement Failed(const absl::Status& s, bool fatal) {
  Measurement m;
  m.check = "error";
  m.note = std::string(s.message()).substr(0, 400);
  m.fatal = fatal;
  return m;
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
    const size_t start = 2 * static_cast<size_t>(i);  // the rep's events: start, start + 1
    if (prepare) RETURN_IF_ERROR(prepare());
    RETURN_IF_ERROR(events_[start].Record(stream()));
    timed_rep_ = i;
    absl::Status ran = run();
    timed_rep_ = -1;
    RETURN_IF_ERROR(ran);
    RETURN_IF_ERROR(events_[start + 1].Record(stream()));
  }
  RETURN_IF_ERROR(SyncAll());
  std::vector<double> ms, first, second;
  for (int i = 0; i < f_.reps; ++i) {
    const size_t start = 2 * static_cast<size_t>(i);
    ASSIGN_OR_RETURN(float t, events_[start + 1].ElapsedMsSince(events_[start]));
    ms.push_back(t);
    if (mid_marked_[i]) {
      ASSIGN_OR_RETURN(float a, mid_events_[i].ElapsedMsSince(events_[start]));
      ASSIGN_OR_RETURN(float b, events_[start + 1].ElapsedMsSince(mid_events_[i]));
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
    m.note = absl::StrFormat("%s: %d non-finite, %d of %d outside tolerance, rel err %.2e", what,
                             r->nonfinite, r->out_of_tolerance, r->elements, r->rel_err);
    if (bad_a > 0)
      absl::StrAppend(&m.note, absl::StrFormat("; gathered A differs in %d elements", bad_a));
  }
  if (!ref_note_.empty()) absl::StrAppend(&m.note, m.note.empty() ? "" : "; ", ref_note_);
  return m;
}

absl::StatusOr<Measurement> Runner::Gather(const Measurement& mine) {
  ASSIGN_OR_RETURN(std::vector<cuda::PeerMessage> all,
                   rt_->group().rendezvous().AllGather(mine.Encode()));
  std::vector<Measurement> ms;
  ms.reserve(all.size());
  for (const cuda::PeerMessage& msg : all) ms.push_back(Measurement::Decode(msg.bytes));
  return Combine(ms);
}

absl::Status Runner::Measure(const Problem& p, ResultRow row,
                             const std::function<absl::Status()>& prepare,
                             const std::function<absl::Status()>& run,
                             const std::function<absl::Status()>& prepare_check, CheckWhat what,
                             std::vector<ResultRow>& rows, Measurement* combined) {
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
      if (!split_note_.empty())
        absl::StrAppend(&mine.note, mine.note.empty() ? "" : "; ", split_note_);
    }
  }
  ASSIGN_OR_RETURN(Measurement all, Gather(mine));
  row.time_ms = all.time_ms;
  row.tflops =
      all.time_ms > 0 && row.impl != "comm-only" ? p.gemm_flop() / (all.time_ms * 1e9) : -1;
  row.check = all.check;
  row.rel_err = all.rel_err;
  row.out_sum = all.out_sum;
  row.out_sq = all.out_sq;
  row.note =
      row.note.empty() ? all.note : absl::StrCat(row.note, all.note.empty() ? "" : "; ", all.note);
  rows.push_back(row);
  // The table prints when the problem ends; this line now, so a run cut off by a time limit
  // still shows how far it got (and that it was measuring, not compiling).
  if (rank_ == 0) {
    std::fprintf(stderr, "  measured %s %s x%d: %.4f ms, %s\n", row.impl.c_str(),
                 row.backend.c_str(), row.chunks, row.time_ms, row.check.c_str());
  }
  if (combined) *combined = all;
  if (all.fatal) {
    return absl::AbortedError(
        absl::StrCat(p.Label(), " ", row.impl, " ", row.backend, " x", row.chunks, ": ", all.note));
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

absl::Status Runner::ForEachBackendVariant(
    ProblemRun& run, const std::string& impl,
    const std::function<absl::Status(const std::string&, Variant&)>& measure) {
  for (const std::string& b : f_.backends) {
    for (Variant& v : run.variants) {
      if (!v.usable) continue;
      if (SkipOnCopyEngine(run, impl, b, v)) continue;
      RETURN_IF_ERROR(measure(b, v));
    }
  }
  return absl::OkStatus();
}

absl::Status Runner::MeasureCommOnly(ProblemRun& run) {
  return ForEachBackendVariant(run, "comm-only", [&](const std::string& b, Variant& v) {
    return MeasureCommOnlyConfig(run, b, v);
  });
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
  const double row_bytes = static_cast<double>(is_ag(p) ? p.k : p.n) * kEs;
  const double comm_bytes = static_cast<double>(p.m) * row_bytes * (world_ - 1) / world_ *
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
  return ForEachBackendVariant(run, "syncopate", [&](const std::string& b, Variant& v) {
    const std::vector<int> comm_counts = b == "sm" ? f_.comm_ctas : std::vector<int>{0};
    const std::vector<int> pcts = b == "sm" ? f_.grid_pct : std::vector<int>{100};
    for (int comm_ctas : comm_counts) {
      for (int pct : pcts) {
        for (const std::string& dealing : f_.tile_dealing) {
          RETURN_IF_ERROR(MeasureFusedConfig(run, b, v, comm_ctas, pct, dealing));
        }
      }
    }
    return absl::OkStatus();
  });
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

}  // namespace syncopate::tp_bench::runner
