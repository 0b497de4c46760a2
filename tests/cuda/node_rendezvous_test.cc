// NodeRendezvous across forked processes: bytes and file descriptors reach every rank; a rank that
// never shows up, or joins with another world size, makes the others fail with an error naming
// it, within the deadline. No GPU needed (LABEL unit).
#include "runtime/cuda/node_rendezvous.h"

#include <sys/mman.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/workloads/multiprocess.h"

namespace syncopate::cuda {
namespace {

using ::syncopate::workloads::RunRanks;
using ::syncopate::workloads::UniqueGroupId;
using ::testing::HasSubstr;

absl::Status ExchangeAndCheck(const std::string& group, int rank, int world,
                              const std::string& dir) {
  RendezvousOptions o{group, rank, world, dir, absl::Seconds(20)};
  absl::StatusOr<std::unique_ptr<NodeRendezvous>> rv = NodeRendezvous::Connect(o);
  if (!rv.ok()) return rv.status();
  // Each rank sends a memfd; peers pread what the sender wrote into it (the file is shared).
  int p[1] = {::memfd_create("rv", MFD_CLOEXEC)};
  if (p[0] < 0) return absl::InternalError("memfd_create");
  std::string note = absl::StrCat("hello from ", rank);
  if (::write(p[0], note.data(), note.size()) != static_cast<ssize_t>(note.size())) {
    return absl::InternalError("write");
  }
  for (int round = 0; round < 3; ++round) {
    std::string mine = absl::StrCat("rank ", rank, " round ", round);
    absl::StatusOr<std::vector<PeerMessage>> all =
        (*rv)->AllGather(mine, round == 0 ? std::span<const int>(p, 1) : std::span<const int>());
    if (!all.ok()) return all.status();
    for (int q = 0; q < world; ++q) {
      if ((*all)[q].bytes != absl::StrCat("rank ", q, " round ", round)) {
        return absl::InternalError(absl::StrCat("rank ", rank, " got '", (*all)[q].bytes,
                                                "' from rank ", q));
      }
      if (q == rank || round > 0) continue;
      if ((*all)[q].fds.size() != 1) return absl::InternalError("fd missing");
      char buf[64] = {};
      ssize_t n = ::pread((*all)[q].fds[0].get(), buf, sizeof(buf), 0);
      if (std::string(buf, n > 0 ? n : 0) != absl::StrCat("hello from ", q)) {
        return absl::InternalError(absl::StrCat("fd from rank ", q, " reads '", buf, "'"));
      }
    }
  }
  ::close(p[0]);
  return (*rv)->Barrier();
}

TEST(NodeRendezvousTest, AbstractSocketsExchangeBytesAndFds) {
  for (int world : {1, 2, 3, 5}) {
    const std::string group = UniqueGroupId("rv");
    auto results = RunRanks(world, absl::Seconds(60),
                            [&](int r) { return ExchangeAndCheck(group, r, world, ""); });
    for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  }
}

TEST(NodeRendezvousTest, DirectorySocketsExchangeBytesAndFds) {
  char tmpl[] = "/tmp/syncopate-rv-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string group = UniqueGroupId("rvdir");
  auto results = RunRanks(3, absl::Seconds(60),
                          [&](int r) { return ExchangeAndCheck(group, r, 3, dir); });
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  ::rmdir(dir.c_str());
}

TEST(NodeRendezvousTest, MissingRankIsNamedWithinTheDeadline) {
  const std::string group = UniqueGroupId("rvmiss");
  const absl::Time start = absl::Now();
  // World 3, but rank 1 never starts.
  auto results = RunRanks(2, absl::Seconds(30), [&](int i) -> absl::Status {
    const int rank = i == 0 ? 0 : 2;
    return NodeRendezvous::Connect({group, rank, 3, "", absl::Milliseconds(500)}).status();
  });
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  for (const absl::Status& s : results) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_THAT(s.message(), HasSubstr("rank 1 ")) << s;
  }
}

TEST(NodeRendezvousTest, DeadPeerDuringExchangeIsNamed) {
  const std::string group = UniqueGroupId("rvdead");
  auto results = RunRanks(2, absl::Seconds(30), [&](int rank) -> absl::Status {
    auto rv = NodeRendezvous::Connect({group, rank, 2, "", absl::Seconds(5)});
    if (!rv.ok()) return rv.status();
    if (rank == 1) return absl::OkStatus();  // exits without exchanging (closes its socket)
    return (*rv)->AllGather("x").status();
  });
  EXPECT_EQ(results[0].code(), absl::StatusCode::kUnavailable) << results[0];
  EXPECT_THAT(results[0].message(), HasSubstr("rank 1")) << results[0];
}

TEST(NodeRendezvousTest, WorldSizeMismatchIsAnError) {
  const std::string group = UniqueGroupId("rvws");
  auto results = RunRanks(2, absl::Seconds(30), [&](int rank) -> absl::Status {
    return NodeRendezvous::Connect({group, rank, rank == 0 ? 2 : 3, "", absl::Seconds(2)})
        .status();
  });
  EXPECT_FALSE(results[0].ok());
  EXPECT_FALSE(results[1].ok());
}

TEST(NodeRendezvousTest, RejectsBadArguments) {
  EXPECT_EQ(NodeRendezvous::Connect({"g", 2, 2, "", absl::Seconds(1)}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NodeRendezvous::Connect({"bad/id", 0, 2, "", absl::Seconds(1)}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace syncopate::cuda
