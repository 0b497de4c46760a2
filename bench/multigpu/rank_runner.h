// One rank of syncopate_tp_bench, run in a forked process (tp_bench_main.cc forks before any CUDA
// call): joins the node-local group of `world` ranks, then for every problem compiles the fused
// GEMM and comm_only kernels for each chunks-per-shard value, builds fresh random inputs and the
// fp32 reference, and measures and checks, in this order:
//   local-gemm   identity schedule, no communication          -> T_gemm_local
//   cublas-gemm  the same per-rank GEMM through cuBLAS        (reference figure)
//   comm-only    per backend x chunks                         -> T_comm = the fastest
//   syncopate    fused kernel per backend x chunks
//   unfused      the parts back to back at the best comm-only config
// Every rank measures every config (the group's launches must be the same on all ranks); each
// config's per-rank results meet on every rank through the rendezvous (AllGather), and rank 0
// prints them and appends them to the CSV. A protocol failure (a wait that timed out) breaks the
// group: the rank reports it and the remaining problems of this world size are not run.
// Thread-safety: single-threaded, one per process.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "bench/multigpu/tp_config.h"

namespace syncopate::tp_bench {

absl::Status RunRank(const BenchFlags& flags, int world, int rank, const std::string& group_id);

}  // namespace syncopate::tp_bench
