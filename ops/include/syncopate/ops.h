// Syncopate ops: AllGather+GEMM, GEMM+ReduceScatter and GEMM+AllReduce as objects a serving
// engine or trainer makes once (a collective, host-blocking Create on every rank of the group)
// and runs many times on its own stream. Standard library and cuda.h only.
//
//   syncopate::ops::OpConfig config{.kind = OpKind::kAllGatherMatmul, .max_m = 8192,
//                                    .n = 7168, .k = 4096};
//   auto op = syncopate::ops::Op::Create({.job = "tp0", .rank = r, .world = 4}, config);
//   if (!op.ok()) ...;                              // op.status() names what is wrong
//   (*op)->Run({.m = 4096, .a = shard, .b = w, .c = out}, stream);  // stream-ordered
//   (*op)->Synchronize(stream);                     // a host wait; errors are sticky
//
// Shapes (per rank, row-major, contiguous; C = A B^T, B an nn.Linear-style weight [n, k]):
//   kAllGatherMatmul     a: this rank's shard [m/world, k]   c: [m, n] (A gathered over ranks)
//                        a_gathered (optional): [m, k], the gathered A
//   kMatmulReduceScatter a: [m, k]                           c: [m/world, n] (this rank's rows
//                                                               of the sum over ranks)
//   kMatmulAllReduce     a: [m, k]                           c: [m, n] (the sum over ranks)
// M is the whole problem's row count (tokens), any multiple of the world size up to max_m.
//
// Paths: Create compiles a kernel per M bucket (OpConfig::m_buckets); a run at M takes the
// smallest bucket >= M, padding each rank's rows. Per bucket, the op runs either the fused kernel
// (every tile waits only for the chunks it reads; chunks leave as soon as written) or the unfused
// sequence (the local GEMM, then the same plan's transfers). Which one depends only on the config
// and M (ChoosePath: OpConfig::bucket_paths, else the path preference, else a heuristic; Create
// first adds the paths `ops_bench --tune` measured into cache_dir), so every rank of a node takes
// the same path; Path(m) says which and why.
//
// Thread-safety: one thread at a time per Op. Ops of one process must have distinct jobs.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "syncopate/status.h"

namespace syncopate::ops {

enum class OpKind : int { kAllGatherMatmul = 0, kMatmulReduceScatter = 1, kMatmulAllReduce = 2 };
enum class DType : int { kBF16 = 0, kFP16 = 1 };
// How a fused kernel moves chunks: copy engines (copies only; AllGather) or communication CTAs
// inside the kernel (any plan). kAuto: ChoosePath's heuristic.
enum class Backend : int { kAuto = 0, kCopyEngine = 1, kSm = 2 };
// kAuto: ChoosePath's heuristic; kFused / kUnfused: that path at every M.
enum class PathPreference : int { kAuto = 0, kFused = 1, kUnfused = 2 };

const char* OpKindName(OpKind kind);       // "all_gather_matmul", ...
const char* BackendName(Backend backend);  // "auto", "ce", "sm"

// The group this rank belongs to: ranks of one node meet through a rendezvous named by `job`.
struct GroupConfig {
  std::string job;  // unique per group on the node (letters, digits, '-', '_', '.')
  int rank = 0;
  int world = 1;
  int device = 0;  // CUDA device ordinal of this rank
  int64_t rendezvous_timeout_ms = 30000;
  // Where the ranks' rendezvous sockets live: "" uses abstract socket names, which only
  // processes of one network namespace share; ranks in separate containers of one node give a
  // folder they all mount.
  std::string rendezvous_dir;
  // The caller's allgather (e.g. over torch.distributed) instead of the sockets: given this
  // rank's message, fills `all` with every rank's, indexed by rank; every rank calls it in the
  // same order, and it bounds its own waits. The symmetric workspace's handles then travel by
  // pidfd_getfd(2), which needs ptrace permission over the peer processes (same user; Create
  // grants it where Yama asks).
  std::function<Status(const std::string& mine, std::vector<std::string>* all)> bootstrap;
};

// One bucket's path, set by the caller (e.g. from its own measurements: `ops_bench`): it wins
// over `path` and the heuristic for the runs that take this bucket.
struct BucketPath {
  int64_t bucket_m = 0;  // one of the op's buckets (BucketsFor)
  bool fused = true;
  Backend backend = Backend::kAuto;  // kAuto: the heuristic's
  int chunks = 0;                    // 0: OpConfig::chunks, else 1
  std::string why;                   // for Path's reason ("": set by the caller)
};

struct OpConfig {
  OpKind kind = OpKind::kAllGatherMatmul;
  int64_t max_m = 0;  // largest M a run may take; a multiple of the world size
  int64_t n = 0;      // C's columns (per rank: the weight's rows)
  int64_t k = 0;      // the reduction dimension (per rank)
  DType dtype = DType::kBF16;
  Backend backend = Backend::kAuto;
  PathPreference path = PathPreference::kAuto;
  // M buckets, each a multiple of the world size, at most max_m; max_m is always one. Empty:
  // max_m and its quarters (BucketsFor).
  std::vector<int64_t> m_buckets;
  std::vector<BucketPath> bucket_paths;  // per-bucket paths; each bucket at most once
  int chunks = 0;     // chunks per rank's shard, 1..8; 0: the heuristic's
  // SM backend: communication CTAs (the SM budget); 0: the runtime's default (a fused kernel's
  // DefaultCommCtas, the unfused transfers' TransfersAloneCommCtas; their compute CTAs are
  // TransfersAloneComputeCtas).
  int comm_ctas = 0;
  int64_t timeout_ms = 2000;  // every device-side wait of a run; a late peer is then named
  std::string cache_dir;      // kernel cache (and `syncopate tune` table) folder; "": none
  // A fused GEMM+ReduceScatter on the SM backend reduces each tile's part of a chunk into its
  // owner as soon as the tile is written, instead of moving whole chunks after their last tile
  // (jit::KernelSpec::push_tiles; where the plan allows, whole chunks elsewhere). With the
  // heuristic's chunks it then takes one chunk per shard. On by default since it passed the
  // ops' GPU tests (MPS and time-sliced) and ran 1.3-3.5% faster than whole chunks in the ops
  // at M=8192, 2 ranks (H100, bench/RESULTS.md, nineteenth session); false for whole chunks.
  bool tile_parts = true;
};

// What a run at one M does.
struct PathChoice {
  int64_t m = 0;
  int64_t bucket_m = 0;  // the kernel's M; rows past m are padding
  bool fused = false;
  Backend backend = Backend::kSm;  // what moves the chunks (fused kernel or unfused transfers)
  int chunks = 1;
  bool tile_parts = false;  // OpConfig::tile_parts applies (a fused ReduceScatter, SM backend)
  // The chunk plan template the bucket's kernels run: allgather.push, reducescatter.direct, or
  // for an AllReduce allreduce.direct_out (C of at most 2 MiB) or allreduce.direct (the
  // developer knob SYNCOPATE_OPS_ALLREDUCE_PLAN takes one for every bucket).
  std::string plan;
  std::string reason;  // one line: why this path (ending "; plan <plan>")
};

// Checks the two configs without touching a GPU: InvalidArgument naming the field at fault.
Status CheckConfig(const GroupConfig& group, const OpConfig& op);
// The buckets Create compiles: m_buckets (sorted, max_m added) or, when empty, max_m and its
// quarters down to 256 rows per rank, each rounded up to a multiple of 64 x world.
Result<std::vector<int64_t>> BucketsFor(const OpConfig& op, int world);
// The path of a run at `m` (pure: the same on every rank). InvalidArgument when m is not a
// positive multiple of the world size or exceeds max_m.
Result<PathChoice> ChoosePath(const OpConfig& op, int world, int64_t m);

struct RunArgs {
  int64_t m = 0;
  CUdeviceptr a = 0;
  CUdeviceptr b = 0;
  CUdeviceptr c = 0;
  CUdeviceptr a_gathered = 0;  // kAllGatherMatmul only; 0: not wanted
};

class Op {
 public:
  // Collective: every rank of `group` calls it with the same OpConfig. Joins the group, allocates
  // and exchanges the symmetric workspace, builds every bucket's kernels (through the kernel
  // cache in cache_dir), binds them and does their launches' one-time setup, so runs need no
  // warm-up. Unavailable when there is no GPU (the message says why), InvalidArgument
  // for a bad config or a GPU the kernels cannot run on, FailedPrecondition naming the field
  // where another rank's config, buckets or their paths (after its tuning file) differ.
  static Result<std::unique_ptr<Op>> Create(const GroupConfig& group, const OpConfig& config);
  ~Op();
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  // Stream-ordered on `stream`: copies the inputs into the workspace where the kernel needs
  // them there (see InputWorkspace), launches, copies the output out. At a bucket's own M (no
  // padding) the GEMM uses the caller's memory in place where only this rank touches it (the
  // AllGather's c, the reductions' a; 16-byte aligned), so those copies are skipped. The weight
  // `b` is read where it lies, a new pointer at any run (weights that are reloaded or synced
  // cost nothing). Never allocates device memory (Create binds every bucket's kernels and does
  // their launches' one-time setup) and never waits on the host. Every rank must run the same
  // sequence of Ms, in stream order (one stream, or streams joined by events). Any thread may
  // run it (the run makes the op's CUDA context current), one at a time.
  //
  // Capturable: a run on a stream being captured into the caller's CUDA graph is recorded, and
  // every replay of the graph is a new run (the kernels take their launch epoch on the device),
  // as long as every rank replays the same graphs in the same order. Either backend (the copy
  // engine's side streams are forked and joined inside the capture, and copy their epoch from
  // words the kernel writes). No warm-up is needed: a bucket's first run may be the one
  // captured. The op and its workspace must outlive the graph. Runs outside graphs and replays
  // may be mixed freely.
  Status Run(const RunArgs& args, CUstream stream);
  // Waits for every run on `stream`. DeadlineExceeded names a peer that did not deliver; that
  // error, like any failed run's, is sticky: later calls return it.
  Status Synchronize(CUstream stream);
  // The sticky error, or a device-side wait that timed out in any run so far (replays of a
  // graph included; read from host-mapped memory, no synchronisation), or OK.
  Status error() const;

  // The path the bucket's kernels were built with (ChoosePath's answer for this op).
  Result<PathChoice> Path(int64_t m) const;
  // kAllGatherMatmul: where this rank's shard of a run at `m` lives in the workspace; a Run
  // whose `a` is this address skips the input copy (write the shard there yourself, on the run's
  // stream). 0 for the other kinds, whose A is read in place at a bucket's own M and copied
  // into the workspace at other Ms.
  CUdeviceptr InputWorkspace(int64_t m) const;
  const OpConfig& config() const;
  int rank() const;
  int world() const;

 private:
  struct Impl;
  explicit Op(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace syncopate::ops
