// The fused workloads the GPU tests run inside each rank process: AllGather+GEMM (consumer side:
// tiles wait for the gathered rows of A) and GEMM+ReduceScatter (producer side: finished tiles of
// C leave as chunks, reduced on their owner). Each call joins a group, compiles through the
// overlap compiler + NVRTC (kernel cache shared by the ranks), binds symmetric buffers, runs
// `launches` launches with fresh random inputs and poisoned outputs, and checks every output
// element against the fp32 reference GEMM (test_kernels.h) at the checked launches.
// Thread-safety: runs in a forked rank process.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/plan/plan.h"
#include "jit/build/kernel_build.h"
#include "runtime/cuda/overlap_runtime.h"

namespace syncopate::workloads {

// How a workload launches and waits for its bound kernel. The default is the OverlapRuntime's
// own Launch/Sync; a group spanning nodes plugs in the inter-node kernel
// (runtime/cuda/inter_node_kernel.h), which this library does not link.
class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual absl::Status Launch(CUstream stream, const cuda::LaunchOptions& options) = 0;
  virtual absl::Status Sync(CUstream stream) = 0;
};
using LauncherFactory = std::function<absl::StatusOr<std::unique_ptr<Launcher>>(
    cuda::OverlapRuntime&, cuda::BoundKernel&)>;

struct WorkloadConfig {
  std::string group_id;
  int world = 2;
  int rank = 0;
  plan::DType dtype = plan::DType::kBF16;
  cuda::Backend backend = cuda::Backend::kCopyEngine;
  std::string plan_template;  // "allgather.push", "reducescatter.direct", ...
  int chunks = 1;
  int64_t m = 0, n = 0, k = 0;
  int launches = 1;
  int check_every = 1;  // check after launch i when (i + 1) % check_every == 0, and the last
  bool graph = false;   // capture one launch, replay `launches` times
  uint64_t seed = 1;
  absl::Duration timeout = absl::Seconds(20);
  // Fault injection: this rank joins, compiles, binds, then never launches (waits at a barrier
  // the others reach after their failed launch).
  int absent_rank = -1;
  // Fault injection: this rank SIGKILLs itself right after issuing launch `kill_after_launch`
  // (its kernel in flight); the others must fail by their deadline, naming it, and then run a
  // local launch on the same GPU.
  int killed_rank = -1;
  int kill_after_launch = 0;
  // > 0: after launch 0 (synced), every rank's group skips this many epochs
  // (Group::SkipEpochsForTesting): the later launches meet protocol words that old.
  uint32_t epoch_jump = 0;
  // The Hopper kernel (examples/kernels/gemm_wgmma.cuh) instead of gemm_mma.cuh; needs sm_90:
  // elsewhere the workload returns FailedPrecondition("... needs sm_90 ...").
  bool wgmma = false;
  // LaunchOptions::dynamic_tiles: kernels that claim tiles (gemm_wgmma.cuh) get them from the
  // group's counter instead of a static deal.
  bool dynamic_tiles = false;
  // jit::KernelSpec::push_tiles: the GEMM+ReduceScatter's tiles reduce their own parts of the
  // outgoing chunks as they finish.
  bool push_tiles = false;
  // Where the fused kernel's binary comes from, made in the rank process for what it builds
  // (e.g. DaemonKernelFetcher over a Client of the node's daemon). When set, the rank's kernel
  // cache is in memory only, so every rank asks, and a rank whose binary was not fetched fails
  // naming why: the run checks the fetched binary end to end.
  // Given the plan, the spec, the kernel source and the group's node map (OverlapRuntime::nodes).
  std::function<jit::KernelFetcher(const plan::Plan&, const jit::KernelSpec&, std::string_view,
                                   const std::vector<int>&)>
      fetcher;
  // > 0: ranks [n * ranks_per_node, (n + 1) * ranks_per_node) play node n (GroupOptions::nodes
  // and the two-level templates' ranks_per_node); launches need a `launcher` that carries the
  // inter-node chunks.
  int ranks_per_node = 0;
  // false: the template is still two-level, but the group stays on one node (the baseline the
  // inter-node benchmark compares with).
  bool span_nodes = true;
  LauncherFactory launcher;  // empty: the runtime's own Launch/Sync (not with graph)
};

absl::Status RunAllGatherGemm(const WorkloadConfig& config);
absl::Status RunGemmReduceScatter(const WorkloadConfig& config);

// Directory of the kernel cache the test ranks share (so one rank compiles, the others load).
std::string TestCacheDir();

}  // namespace syncopate::workloads
