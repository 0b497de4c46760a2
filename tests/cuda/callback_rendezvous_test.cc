// CallbackRendezvous across forked processes: bytes travel through the caller's allgather (here a
// socket rendezvous of its own, bytes only), fds through pidfd_getfd, and every peer reads what
// the sender wrote. A rank calling the collectives in another order, a failing callback and a
// callback with the wrong number of messages are errors naming them. No GPU needed (LABEL unit).
#include "runtime/cuda/callback_rendezvous.h"

#include <sys/mman.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/node_rendezvous.h"
#include "runtime/cuda/workloads/multiprocess.h"

namespace syncopate::cuda {
namespace {

using ::syncopate::workloads::RunRanks;
using ::syncopate::workloads::UniqueGroupId;
using ::testing::HasSubstr;

// The caller's allgather of the test: another group's sockets, bytes only.
BootstrapAllGather OverSockets(NodeRendezvous& sockets) {
  return [&sockets](std::string_view mine) -> absl::StatusOr<std::vector<std::string>> {
    absl::StatusOr<std::vector<PeerMessage>> all = sockets.AllGather(mine);
    if (!all.ok()) return all.status();
    std::vector<std::string> bytes;
    for (PeerMessage& m : *all) bytes.push_back(std::move(m.bytes));
    return bytes;
  };
}

absl::StatusOr<std::unique_ptr<NodeRendezvous>> Sockets(const std::string& group, int rank,
                                                        int world) {
  return NodeRendezvous::Connect({group + "_bytes", rank, world, "", absl::Seconds(20)});
}

TEST(CallbackRendezvousTest, BytesAndFdsReachEveryRank) {
  const std::string group = UniqueGroupId("cbrv");
  constexpr int kWorld = 3;
  std::vector<absl::Status> results = RunRanks(kWorld, absl::Seconds(60), [&](int rank) {
    absl::StatusOr<std::unique_ptr<NodeRendezvous>> sockets = Sockets(group, rank, kWorld);
    if (!sockets.ok()) return sockets.status();
    absl::StatusOr<std::unique_ptr<CallbackRendezvous>> rv =
        CallbackRendezvous::Create(group, rank, kWorld, OverSockets(**sockets));
    if (!rv.ok()) return rv.status();
    int fd[1] = {::memfd_create("cbrv", MFD_CLOEXEC)};
    const std::string note = absl::StrCat("written by ", rank);
    if (fd[0] < 0 ||
        ::write(fd[0], note.data(), note.size()) != static_cast<ssize_t>(note.size())) {
      return absl::InternalError("memfd");
    }
    absl::StatusOr<std::vector<PeerMessage>> all =
        (*rv)->AllGather(absl::StrCat("hello ", rank), std::span<const int>(fd, 1));
    ::close(fd[0]);  // the peers hold their own copies by now
    if (!all.ok()) return all.status();
    for (int q = 0; q < kWorld; ++q) {
      const PeerMessage& m = (*all)[q];
      if (m.bytes != absl::StrCat("hello ", q)) {
        return absl::InternalError(absl::StrCat("from rank ", q, ": '", m.bytes, "'"));
      }
      if (q == rank) {
        if (!m.fds.empty()) return absl::InternalError("own slot has fds");
        continue;
      }
      if (m.fds.size() != 1) return absl::InternalError(absl::StrCat("rank ", q, ": no fd"));
      char buf[32] = {};
      const ssize_t n = ::pread(m.fds[0].get(), buf, sizeof(buf), 0);
      if (std::string(buf, n > 0 ? n : 0) != absl::StrCat("written by ", q)) {
        return absl::InternalError(absl::StrCat("rank ", q, "'s fd reads '", buf, "'"));
      }
    }
    return (*rv)->Barrier();
  });
  for (int r = 0; r < kWorld; ++r)
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
}

TEST(CallbackRendezvousTest, ARankCallingInAnotherOrderIsNamed) {
  const std::string group = UniqueGroupId("cbrv_order");
  std::vector<absl::Status> results = RunRanks(2, absl::Seconds(60), [&](int rank) {
    absl::StatusOr<std::unique_ptr<NodeRendezvous>> sockets = Sockets(group, rank, 2);
    if (!sockets.ok()) return sockets.status();
    absl::StatusOr<std::unique_ptr<CallbackRendezvous>> rv =
        CallbackRendezvous::Create(group, rank, 2, OverSockets(**sockets));
    if (!rv.ok()) return rv.status();
    return rank == 0 ? (*rv)->Barrier() : (*rv)->AllGather("x", {}).status();
  });
  EXPECT_EQ(results[0].code(), absl::StatusCode::kFailedPrecondition) << results[0];
  EXPECT_THAT(std::string(results[0].message()), HasSubstr("rank 1 sent"));
  EXPECT_THAT(std::string(results[1].message()), HasSubstr("rank 0 sent"));
}

// Rank 1's message names an fd it does not have: ranks 0 and 2 cannot copy it, say so in the
// closing round, and every rank (rank 1 too) fails naming who failed; nobody waits for anyone.
TEST(CallbackRendezvousTest, AnFdThatCannotBeCopiedFailsEveryRankNamingIt) {
  const std::string group = UniqueGroupId("cbrv_badfd");
  constexpr int kWorld = 3;
  std::vector<absl::Status> results = RunRanks(kWorld, absl::Seconds(60), [&](int rank) {
    absl::StatusOr<std::unique_ptr<NodeRendezvous>> sockets = Sockets(group, rank, kWorld);
    if (!sockets.ok()) return sockets.status();
    BootstrapAllGather honest = OverSockets(**sockets);
    BootstrapAllGather lying = [&](std::string_view mine) {
      std::string m(mine);
      const size_t fds = m.find(' ', m.find('\n') + 1) + 1;  // after "<pid> " in the body
      if (rank == 1 && fds != 0 && m.compare(fds, 1, "\n") != 0) {
        m.replace(fds, m.find('\n', fds) - fds, "987654");
      }
      return honest(m);
    };
    absl::StatusOr<std::unique_ptr<CallbackRendezvous>> rv =
        CallbackRendezvous::Create(group, rank, kWorld, lying);
    if (!rv.ok()) return rv.status();
    int fd[1] = {::memfd_create("cbrv", MFD_CLOEXEC)};
    absl::Status s = (*rv)->AllGather("x", std::span<const int>(fd, 1)).status();
    ::close(fd[0]);
    return s;
  });
  EXPECT_THAT(std::string(results[0].message()), HasSubstr("bootstrap: rank 1's fd: pidfd_getfd"));
  EXPECT_THAT(std::string(results[1].message()), HasSubstr("bootstrap: rank 0 failed"));
  EXPECT_THAT(std::string(results[2].message()), HasSubstr("bootstrap: rank 1's fd"));
}

TEST(CallbackRendezvousTest, CallbackFailuresAreNamed) {
  absl::StatusOr<std::unique_ptr<CallbackRendezvous>> failing = CallbackRendezvous::Create(
      "g", 0, 1, [](std::string_view) -> absl::StatusOr<std::vector<std::string>> {
        return absl::UnavailableError("peer gone");
      });
  ASSERT_TRUE(failing.ok());
  absl::Status s = (*failing)->Barrier();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("bootstrap call 0 (barrier): the allgather callback failed: peer gone"));
  absl::StatusOr<std::unique_ptr<CallbackRendezvous>> too_many = CallbackRendezvous::Create(
      "g", 0, 1, [](std::string_view mine) -> absl::StatusOr<std::vector<std::string>> {
        return std::vector<std::string>{std::string(mine), std::string(mine)};
      });
  ASSERT_TRUE(too_many.ok());
  EXPECT_THAT(std::string((*too_many)->Barrier().message()),
              HasSubstr("returned 2 messages for 1 ranks"));
  const BootstrapAllGather nothing = [](std::string_view) {
    return absl::StatusOr<std::vector<std::string>>(std::vector<std::string>{});
  };
  EXPECT_THAT(std::string(CallbackRendezvous::Create("g", 2, 2, nothing).status().message()),
              HasSubstr("rank 2 of world size 2"));
  EXPECT_THAT(std::string(CallbackRendezvous::Create("g", 0, 1, {}).status().message()),
              HasSubstr("no allgather callback"));
}

}  // namespace
}  // namespace syncopate::cuda
