// CSV, selection and table printing for syncopate_tp_bench; see results.h.
#include "bench/multigpu/results.h"

#include <algorithm>
#include <fstream>
#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace syncopate::tp_bench {
namespace {

std::string Num(double v) { return v < 0 ? "" : absl::StrFormat("%.6g", v); }

std::string Quote(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\"", "\"\""}, {"\n", " "}}), "\"");
}

bool Counts(const ResultRow& r) { return r.check == "pass" || r.check == "skip"; }

}  // namespace

ResultRow RowFor(const Problem& p, const std::string& impl) {
  ResultRow r;
  r.impl = impl;
  r.workload = WorkloadName(p.workload);
  r.model = p.model;
  r.tokens = p.tokens;
  r.m = p.m;
  r.n = p.n;
  r.k = p.k;
  r.world = p.world;
  return r;
}

std::string CsvHeader() {
  return "impl,workload,model,tokens,m,n,k,world,backend,chunks,time_ms,tflops,t_gemm_local_ms,"
         "t_comm_ms,bound_ms,ratio_to_bound,rel_err,check,out_sum,out_sq,note";
}

std::string CsvLine(const ResultRow& r) {
  return absl::StrCat(
      Quote(r.impl), ",", r.workload, ",", Quote(r.model), ",", r.tokens, ",", r.m, ",", r.n, ",",
      r.k, ",", r.world, ",", Quote(r.backend), ",", r.chunks, ",", Num(r.time_ms), ",",
      Num(r.tflops), ",", Num(r.t_gemm_local_ms), ",", Num(r.t_comm_ms), ",", Num(r.bound_ms),
      ",", Num(r.ratio_to_bound), ",", Num(r.rel_err), ",", r.check, ",",
      absl::StrFormat("%.9g", r.out_sum), ",", absl::StrFormat("%.9g", r.out_sq), ",",
      Quote(r.note));
}

bool AppendCsv(const std::string& path, const std::vector<ResultRow>& rows, std::string* error) {
  struct stat st;
  const bool fresh = ::stat(path.c_str(), &st) != 0 || st.st_size == 0;
  std::ofstream f(path, std::ios::app);
  if (!f) {
    if (error) *error = absl::StrCat("cannot open ", path, " for appending");
    return false;
  }
  if (fresh) f << CsvHeader() << "\n";
  for (const ResultRow& r : rows) f << CsvLine(r) << "\n";
  f.flush();
  if (!f && error) *error = absl::StrCat("write to ", path, " failed");
  return static_cast<bool>(f);
}

void FillBounds(std::vector<ResultRow>& rows) {
  double gemm = -1, comm = -1;
  for (const ResultRow& r : rows) {
    // The fastest local GEMM (--grid-pct adds rows on smaller grids): the bound is the best the
    // rank's GEMM does alone.
    if (r.impl == "local-gemm" && r.time_ms > 0 && (gemm < 0 || r.time_ms < gemm)) gemm = r.time_ms;
    if (r.impl == "comm-only" && r.time_ms > 0 && Counts(r) && (comm < 0 || r.time_ms < comm)) {
      comm = r.time_ms;
    }
  }
  const double bound = std::max(gemm, comm);
  for (ResultRow& r : rows) {
    r.t_gemm_local_ms = gemm;
    r.t_comm_ms = comm;
    r.bound_ms = gemm > 0 && comm > 0 ? bound : -1;
    r.ratio_to_bound = r.bound_ms > 0 && r.time_ms > 0 ? r.time_ms / r.bound_ms : -1;
  }
}

bool SelectBest(const std::vector<ResultRow>& rows, ResultRow* pick) {
  const ResultRow* best = nullptr;
  const ResultRow* second = nullptr;
  for (const ResultRow& r : rows) {
    if ((r.impl != "syncopate" && r.impl != "unfused") || r.time_ms <= 0 || !Counts(r)) continue;
    if (best == nullptr || r.time_ms < best->time_ms) {
      second = best;
      best = &r;
    } else if (second == nullptr || r.time_ms < second->time_ms) {
      second = &r;
    }
  }
  if (best == nullptr) return false;
  *pick = *best;
  pick->impl = "select";
  pick->note = absl::StrCat("picked ", best->impl, " ", best->backend, " x", best->chunks,
                            best->impl == "unfused" ? " (fusing loses here: fall back)" : "");
  if (second != nullptr) {
    absl::StrAppend(&pick->note, absl::StrFormat("; runner-up %s %s x%d is %.3fx slower",
                                                 second->impl, second->backend, second->chunks,
                                                 second->time_ms / best->time_ms));
  }
  return true;
}

void PrintTableHeader(std::FILE* out) {
  std::fprintf(out, "%-12s %-3s %-14s %6s %4s %-5s %3s %9s %8s %9s %9s %7s %9s %-11s %s\n",
               "impl", "wl", "model", "M", "TP", "bknd", "chk", "time_ms", "TFLOP/s", "gemm_ms",
               "comm_ms", "/bound", "rel_err", "check", "note");
}

void PrintTableRow(std::FILE* out, const ResultRow& r) {
  auto f = [](double v, const char* fmt) { return v < 0 ? std::string("-") : absl::StrFormat(fmt, v); };
  std::fprintf(out, "%-12s %-3s %-14s %6ld %4d %-5s %3d %9s %8s %9s %9s %7s %9s %-11s %s\n",
               r.impl.c_str(), r.workload.c_str(), r.model.c_str(), static_cast<long>(r.tokens),
               r.world, r.backend.c_str(), r.chunks, f(r.time_ms, "%.4f").c_str(),
               f(r.tflops, "%.1f").c_str(), f(r.t_gemm_local_ms, "%.4f").c_str(),
               f(r.t_comm_ms, "%.4f").c_str(), f(r.ratio_to_bound, "%.3f").c_str(),
               f(r.rel_err, "%.2e").c_str(), r.check.c_str(), r.note.c_str());
  std::fflush(out);
}

}  // namespace syncopate::tp_bench
