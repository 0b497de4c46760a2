// Result rows of syncopate_tp_bench and baselines.py (one CSV schema for both, so run.sh merges
// them), the fallback selection, and the printed table.
//
// impl (what a row measured):
//   syncopate     the fused kernel (backend ce|sm, chunks per shard)
//   unfused       Syncopate's parts back to back: comm_only then local GEMM (AG), or local GEMM
//                 then comm_only (RS / AR), at the best comm_only config
//   local-gemm    the GEMM alone, identity schedule (T_gemm_local)
//   comm-only     the plan's transfers alone (T_comm; see kernels.h), per backend and chunks
//   cublas-gemm   cuBLAS on the same per-rank GEMM, for reference
//   select        the config the fallback logic picks for this problem (see SelectBest)
//   cublas+nccl / async-tp / torch-gemm / nccl-comm: rows of baselines.py
// Times are the max over ranks of each rank's median (a collective is done when its last rank
// is). bound_ms = max(t_gemm_local_ms, t_comm_ms) of the same run (t_comm = best comm-only).
// Thread-compatible value types.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "bench/multigpu/tp_config.h"

namespace syncopate::tp_bench {

struct ResultRow {
  std::string impl;
  std::string workload;
  std::string model;
  int64_t tokens = 0, m = 0, n = 0, k = 0;
  int world = 0;
  std::string backend = "-";
  int chunks = 0;
  double time_ms = -1;  // < 0: not measured
  double tflops = -1;   // per rank, of the GEMM
  double t_gemm_local_ms = -1;
  double t_comm_ms = -1;
  double bound_ms = -1;
  double ratio_to_bound = -1;  // time_ms / bound_ms
  double rel_err = -1;         // max over ranks of ||out - ref|| / ||ref||
  std::string check = "skip";  // pass | fail | skip | unsupported | error
  double out_sum = 0;          // rank 0's output, for cross-checks with baselines.py
  double out_sq = 0;
  std::string note;
};

ResultRow RowFor(const Problem& p, const std::string& impl);

std::string CsvHeader();
std::string CsvLine(const ResultRow& row);  // quoted where needed, no trailing newline
// Appends rows (header first when the file is new or empty).
bool AppendCsv(const std::string& path, const std::vector<ResultRow>& rows, std::string* error);

// Fills t_gemm_local_ms / t_comm_ms / bound_ms / ratio_to_bound of every row from the
// problem's local-gemm row and its fastest passing comm-only row.
void FillBounds(std::vector<ResultRow>& rows);

// The fallback selection: among rows that passed their check (or were not checked only when
// nothing was), of impl syncopate or unfused, the fastest; a "select" row copying it, whose note
// says what it picked and by how much it beat the runner-up. Never picks a failed config; when
// every fused config loses to "unfused", the pick is "unfused" (fusing does not pay here).
// Returns false when nothing qualifies.
bool SelectBest(const std::vector<ResultRow>& rows, ResultRow* pick);

void PrintTableHeader(std::FILE* out);
void PrintTableRow(std::FILE* out, const ResultRow& row);

}  // namespace syncopate::tp_bench
