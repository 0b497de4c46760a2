// ForkedBootstrap with more than one waiting rank: rank 0 starts the hub and hands its address to
// the other ranks through one pipe made before the fork. Forked processes (no exec, no UCX
// transport), each joining and passing a barrier; the parent reads their exit codes. Ranks
// reading the pipe together once got each other's bytes (seen with 4 ranks on the GPU machine).
#include "runtime/ucx/forked_bootstrap.h"

#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace syncopate::ucx {
namespace {

// Exit codes of a rank: 0 joined and passed the barrier; 2 Join failed; 3 the barrier failed.
int RunRank(const ForkedBootstrap& forked, int rank, int world) {
  std::unique_ptr<TcpBootstrapHub> hub;
  absl::StatusOr<std::unique_ptr<TcpBootstrap>> b =
      forked.Join(rank, world, absl::Now() + absl::Seconds(30), hub);
  if (!b.ok()) return 2;
  if (!(*b)->Barrier(absl::Now() + absl::Seconds(30)).ok()) return 3;
  // Rank 0 keeps the hub until everyone is through a second barrier.
  return (*b)->Barrier(absl::Now() + absl::Seconds(30)).ok() ? 0 : 3;
}

TEST(ForkedBootstrapTest, EveryRankGetsTheWholeHubAddress) {
  // Several rounds: the interleaving the byte-wise protocol suffered from depends on timing.
  for (int world : {2, 4, 8, 8, 8, 8}) {
    absl::StatusOr<ForkedBootstrap> forked = ForkedBootstrap::Create();
    ASSERT_TRUE(forked.ok()) << forked.status();
    std::vector<pid_t> pids;
    for (int r = 0; r < world; ++r) {
      const pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) ::_exit(RunRank(*forked, r, world));
      pids.push_back(pid);
    }
    for (int r = 0; r < world; ++r) {
      int status = 0;
      ASSERT_EQ(::waitpid(pids[r], &status, 0), pids[r]);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << "world " << world << " rank " << r << ": status " << status;
    }
  }
}

// A rank 0 that never publishes: the others give up at their deadline, naming why.
TEST(ForkedBootstrapTest, MissingPublisherIsADeadlineNotAHang) {
  absl::StatusOr<ForkedBootstrap> forked = ForkedBootstrap::Create();
  ASSERT_TRUE(forked.ok()) << forked.status();
  std::unique_ptr<TcpBootstrapHub> hub;
  absl::StatusOr<std::unique_ptr<TcpBootstrap>> b =
      forked->Join(1, 2, absl::Now() + absl::Milliseconds(300), hub);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kDeadlineExceeded) << b.status();
  EXPECT_NE(b.status().message().find("did not publish"), std::string::npos) << b.status();
}

}  // namespace
}  // namespace syncopate::ucx
