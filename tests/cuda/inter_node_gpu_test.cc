// Fused AllGather+GEMM over 2 "nodes" x 2 ranks (4 rank processes on the one GPU): the group
// spans nodes (GroupOptions::nodes), the compiler leaves the inter-node chunks to the proxy, and
// InterNodeKernel carries them over UCX (tcp, Debian's host-only build: staged through pinned
// host memory), setting the same signal words the tiles wait on. Every launch gets fresh inputs
// and poisoned peer rows, and the gathered A and C are checked element by element against the
// fp32 reference. A rank that dies before its launch is reported by the others within a bound.
// LABEL gpu; skips without a GPU. The UCX bootstrap is a TCP hub rank 0 runs
// (runtime/ucx/forked_bootstrap.h).
#include <cstdlib>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "gtest/gtest.h"
#include "runtime/cuda/inter_node_kernel.h"
#include "runtime/cuda/workloads/multiprocess.h"
#include "runtime/cuda/workloads/proxy_launcher.h"
#include "runtime/cuda/workloads/workloads.h"
#include "runtime/ucx/forked_bootstrap.h"
#include "tests/cuda/gpu_test_env.h"
#if SYNCOPATE_GPU_TEST_WITH_DAEMON
#include "tests/cuda/daemon_fetcher.h"
#include "tests/testing/subprocess.h"
#endif

namespace syncopate::cuda {
namespace {

constexpr int kWorld = 4;
constexpr int kRanksPerNode = 2;

// allgather.two_level: a rank's own shard goes to the same local index on the other node, and it
// receives that rank's shard, chunk by chunk; nothing else crosses nodes.
absl::StatusOr<std::unique_ptr<workloads::Launcher>> CheckedProxyLauncher(
    OverlapRuntime& rt, BoundKernel& bound, const ucx::ForkedBootstrap& forked,
    const workloads::ProxyLauncherOptions& options, int chunks) {
  ASSIGN_OR_RETURN(std::unique_ptr<workloads::ProxyLauncher> l,
                   workloads::ProxyLauncher::Create(rt, bound, forked, options));
  const InterNodeKernel& k = l->kernel();
  if (k.num_inter_node_sends() != chunks || k.num_inter_node_receives() != chunks) {
    return absl::InternalError(absl::StrCat("rank ", rt.rank(), " carries ",
                                            k.num_inter_node_sends(), " sends and ",
                                            k.num_inter_node_receives(),
                                            " receives between nodes, expected ", chunks, " each"));
  }
  return l;
}

uint64_t FreshSeed() {
  static std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// `fetcher`: where each rank's fused kernel comes from (empty: NVRTC in the rank).
std::vector<absl::Status> RunTwoNodes(Backend backend, int launches, int dying_rank,
                                      absl::Duration timeout,
                                      decltype(workloads::WorkloadConfig::fetcher) fetcher = {}) {
  absl::StatusOr<ucx::ForkedBootstrap> forked = ucx::ForkedBootstrap::Create();
  if (!forked.ok()) return std::vector<absl::Status>(kWorld, forked.status());
  workloads::WorkloadConfig base;
  base.group_id = workloads::UniqueGroupId("in");
  base.world = kWorld;
  base.ranks_per_node = kRanksPerNode;
  base.dtype = plan::DType::kBF16;
  base.backend = backend;
  base.plan_template = "allgather.two_level";
  base.chunks = 2;
  base.m = 512, base.n = 256, base.k = 128;
  base.launches = launches;
  base.seed = FreshSeed();
  base.timeout = timeout;
  base.fetcher = std::move(fetcher);
  return workloads::RunRanks(kWorld, absl::Seconds(300), [&](int r) {
    workloads::WorkloadConfig c = base;
    c.rank = r;
    workloads::ProxyLauncherOptions o;
    o.transfer_timeout = timeout;
    o.die_at_launch = r == dying_rank ? 0 : -1;
    c.launcher = [&forked, o, chunks = c.chunks](OverlapRuntime& rt, BoundKernel& bound) {
      return CheckedProxyLauncher(rt, bound, *forked, o, chunks);
    };
    return workloads::RunAllGatherGemm(c);
  });
}

class InterNodeFusedTest : public ::testing::TestWithParam<Backend> {};

TEST_P(InterNodeFusedTest, AllGatherGemmOverTwoNodesMatchesReference) {
  SYNCOPATE_REQUIRE_GPU();
  SYNCOPATE_REQUIRE_RANKS_FIT(kWorld);
  std::vector<absl::Status> results =
      RunTwoNodes(GetParam(), /*launches=*/4, /*dying_rank=*/-1, absl::Seconds(20));
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(results[r].ok()) << BackendName(GetParam()) << " rank " << r << ": "
                                 << results[r];
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, InterNodeFusedTest,
                         ::testing::Values(Backend::kCopyEngine, Backend::kSm),
                         [](const auto& info) { return std::string(BackendName(info.param)); });

#if SYNCOPATE_GPU_TEST_WITH_DAEMON
// A group spanning nodes, its kernel from the node's daemon: each rank sends its group's node
// map with the request (CompileRequest::nodes), so the daemon compiles the two-node kernel and
// every rank loads that binary (the workload fails a rank that compiled instead, naming why),
// then runs it with the proxy and checks every element.
TEST(InterNodeFetchTest, RanksOfTwoNodesRunTheDaemonsBinary) {
  SYNCOPATE_REQUIRE_GPU();
  SYNCOPATE_REQUIRE_RANKS_FIT(kWorld);
  testing::TempDir dir;
  const char* syncopated = std::getenv("SYNCOPATED");  // the bundle's daemon on the GPU machine
  testing::DaemonProcess daemon(syncopated != nullptr ? syncopated : SYNCOPATED_PATH, dir,
                                "gpu_two_node_fetch", {"--cache_dir=" + dir.Path("cache")});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  std::vector<absl::Status> results =
      RunTwoNodes(Backend::kCopyEngine, /*launches=*/2, /*dying_rank=*/-1, absl::Seconds(20),
                  testing::DaemonFetcherAt(daemon.socket()));
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r] << "\n--- daemon log ---\n"
                                 << daemon.Log();
  }
}
#endif

// Rank 1 (node 0) exits before its first launch. Its node peer waits for it on the device, rank 3
// (node 1, same local index) waits for its chunk over UCX; the others wait for what those two
// never forward. Every survivor fails within the bound, and the dead rank is named by at least
// one of them (the ones that waited for it directly; see FusedTimeoutTest for why not all).
TEST(InterNodeFaultTest, DeadRankIsNamedWithinTheDeadline) {
  SYNCOPATE_REQUIRE_GPU();
  SYNCOPATE_REQUIRE_RANKS_FIT(kWorld);
  const absl::Time start = absl::Now();
  std::vector<absl::Status> results =
      RunTwoNodes(Backend::kCopyEngine, /*launches=*/2, /*dying_rank=*/1, absl::Seconds(2));
  EXPECT_FALSE(results[1].ok());  // its process exited with 3
  int named = 0;
  for (int r : {0, 2, 3}) {
    EXPECT_FALSE(results[r].ok()) << "rank " << r << " succeeded without rank 1";
    // "... rank 1 (host pid N) failed ...", "... from rank 1 ...", "... for rank 1 to enter ...".
    const std::string m(results[r].message());
    named += absl::StrContains(m, "rank 1 (") || absl::StrContains(m, "from rank 1") ||
             absl::StrContains(m, "for rank 1 ");
  }
  EXPECT_GE(named, 1) << results[0] << " / " << results[2] << " / " << results[3];
  EXPECT_LT(absl::Now() - start, absl::Seconds(200));
}

}  // namespace
}  // namespace syncopate::cuda
