// Tests of UcxTransport, over tcp and over shared memory. Mostly two transports (one per
// "rank") in one process: put+signal ordering, gets, bounds errors, a peer that goes away, and
// the staged (device-through-host) pipeline with memcpy copy callbacks. One test puts rank 1 in
// a second process (this binary, re-executed) and kills it: the same-host liveness check.
#include "runtime/ucx/transport.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/ucx/staged_channel.h"
#include "runtime/ucx/tcp_bootstrap.h"
#include "tests/ucx/local_bootstrap.h"

extern char** environ;

namespace syncopate::ucx {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr size_t kRegionBytes = 1 << 20;

TransportOptions TestOptions(int rank, const std::string& tls,
                             SignalOrdering ordering = SignalOrdering::kFlush) {
  TransportOptions opts;
  opts.name = "test" + std::to_string(rank);
  opts.ucx_config = {{"TLS", tls}};
  opts.ordering = ordering;
  // UCX 1.13's posix/sysv have no peer failure handler (see ErrorHandling).
  if (tls == "shm") opts.error_handling = ErrorHandling::kNone;
  opts.teardown_timeout = absl::Seconds(2);
  return opts;
}

class TransportTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Creates `world` transports (two by default); `setup(rank, transport)` registers regions
  // before Connect.
  void Start(const std::function<void(int, UcxTransport&)>& setup,
             SignalOrdering ordering = SignalOrdering::kFlush, int world = 2) {
    group_ = std::make_unique<testing::LocalBootstrapGroup>(world);
    t_.resize(world);
    for (int r = 0; r < world; ++r) {
      auto t = UcxTransport::Create(TestOptions(r, GetParam(), ordering));
      ASSERT_TRUE(t.ok()) << t.status();
      t_[r] = *std::move(t);
      setup(r, *t_[r]);
    }
    std::vector<absl::Status> status(world);
    std::vector<std::thread> others;
    for (int r = 1; r < world; ++r) {
      others.emplace_back([&, r] {
        testing::LocalBootstrap b(group_.get(), r);
        status[r] = t_[r]->Connect(b, absl::Now() + absl::Seconds(20));
      });
    }
    testing::LocalBootstrap b(group_.get(), 0);
    status[0] = t_[0]->Connect(b, absl::Now() + absl::Seconds(20));
    for (std::thread& th : others) th.join();
    for (int r = 0; r < world; ++r) ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
  }

  static void RegisterDataAndSignals(int, UcxTransport& t) {
    ASSERT_EQ(t.AllocateMemory("data", kRegionBytes).value(), 0);
    ASSERT_EQ(t.AllocateMemory("signals", 64).value(), 1);
  }

  static uint64_t LoadWord(UcxTransport& t, int region, int index) {
    auto* w = static_cast<uint64_t*>(t.region_address(region));
    return std::atomic_ref<uint64_t>(w[index]).load(std::memory_order_acquire);
  }

  std::unique_ptr<testing::LocalBootstrapGroup> group_;
  std::vector<std::unique_ptr<UcxTransport>> t_;
};

TEST_P(TransportTest, ReportsHostMemoryAndRefusesCudaWithoutSupport) {
  Start([](int, UcxTransport& t) {});
  EXPECT_TRUE(t_[0]->SupportsMemoryKind(MemoryKind::kHost));
  if (!t_[0]->SupportsMemoryKind(MemoryKind::kCuda)) {
    std::vector<char> fake(64);
    EXPECT_THAT(t_[0]->RegisterMemory("gpu", fake.data(), fake.size(), MemoryKind::kCuda).status(),
                ::testing::Property(&absl::Status::message, HasSubstr("StagedPipeline")));
  }
}

void CheckPutWithSignal(UcxTransport& sender, UcxTransport& receiver) {
  auto* src = static_cast<uint32_t*>(sender.region_address(0));
  auto* dst = static_cast<uint32_t*>(receiver.region_address(0));
  const size_t words = kRegionBytes / 4;
  for (uint64_t epoch = 1; epoch <= 5; ++epoch) {
    for (size_t i = 0; i < words; ++i) src[i] = static_cast<uint32_t>(i * 7 + epoch);
    // Three segments, scattered: [0,4K) -> [512K, +4K), [8K, 264K) -> [0, 256K), last 1K -> 1K.
    std::vector<Segment> segs = {{0, 512 << 10, 4096}, {8192, 0, 256 << 10},
                                 {kRegionBytes - 1024, 1024 * 300, 1024}};
    Completion c = sender.PutWithSignal(1, 0, 0, segs, {1, 8}, epoch);
    // The receiver sees the signal only after the data.
    while (std::atomic_ref<uint64_t>(static_cast<uint64_t*>(receiver.region_address(1))[1])
               .load(std::memory_order_acquire) < epoch) {
      std::this_thread::yield();
    }
    for (const Segment& s : segs) {
      ASSERT_EQ(std::memcmp(reinterpret_cast<char*>(dst) + s.remote_offset,
                            reinterpret_cast<char*>(src) + s.local_offset, s.length),
                0)
          << "epoch " << epoch << " segment at " << s.local_offset;
    }
    ASSERT_TRUE(sender.Wait(c, absl::Now() + absl::Seconds(10), "put").ok());
  }
}

TEST_P(TransportTest, PutWithSignalLandsDataBeforeSignal) {
  Start(&RegisterDataAndSignals);
  CheckPutWithSignal(*t_[0], *t_[1]);
  EXPECT_EQ(t_[0]->in_flight(), 0);
}

TEST_P(TransportTest, PutWithSignalFenceOrdering) {
  Start(&RegisterDataAndSignals, SignalOrdering::kFence);
  CheckPutWithSignal(*t_[0], *t_[1]);
}

TEST_P(TransportTest, GetReadsRemoteBytesAndWords) {
  Start(&RegisterDataAndSignals);
  auto* remote = static_cast<char*>(t_[1]->region_address(0));
  for (size_t i = 0; i < kRegionBytes; ++i) remote[i] = static_cast<char>(i % 251);
  static_cast<uint64_t*>(t_[1]->region_address(1))[3] = 0xfeedbeef;
  Completion c = t_[0]->Get(1, 0, 0, {{100, 5000, 70000}});
  ASSERT_TRUE(t_[0]->Wait(c, absl::Now() + absl::Seconds(10), "get").ok());
  auto* local = static_cast<char*>(t_[0]->region_address(0));
  EXPECT_EQ(std::memcmp(local + 100, remote + 5000, 70000), 0);
  Completion w = t_[0]->GetWord(1, {1, 24});
  ASSERT_TRUE(t_[0]->Wait(w, absl::Now() + absl::Seconds(10), "get word").ok());
  EXPECT_EQ(UcxTransport::WordResult(w), 0xfeedbeefu);
}

TEST_P(TransportTest, OutOfRangeSegmentIsAnError) {
  Start(&RegisterDataAndSignals);
  Completion c = t_[0]->PutWithSignal(1, 0, 0, {{0, kRegionBytes - 8, 16}}, {1, 0}, 1);
  absl::Status s = t_[0]->Wait(c, absl::Now() + absl::Seconds(10), "bad put");
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  EXPECT_THAT(s.message(), HasSubstr("remote region 'data'"));
  Completion bad_peer = t_[0]->Flush(7);
  EXPECT_EQ(t_[0]->Wait(bad_peer, absl::Now() + absl::Seconds(1), "flush").code(),
            absl::StatusCode::kInvalidArgument);
}

// Puts to `peer` (a chunk, then a flush) until one fails, at most 50 times, each bounded: how a
// survivor finds out that a peer went. Returns the failure (OK if every operation succeeded).
absl::Status UseUntilFailure(UcxTransport& t, int peer) {
  absl::Status s;
  for (int i = 0; i < 50 && s.ok(); ++i) {
    s = t.Wait(t.PutWithSignal(peer, 0, 0, {{0, 0, 4096}}, {1, 0}, i + 1),
               absl::Now() + absl::Seconds(3), "put to a peer that went");
    if (s.ok()) s = t.Wait(t.Flush(peer), absl::Now() + absl::Seconds(3), "flush");
  }
  return s;
}

TEST_P(TransportTest, PeerThatGoesAwayFailsOperationsNamingIt) {
  if (GetParam() == "shm") {
    // The peer here is a thread of this process, so the pidfd liveness check (which catches a
    // same-host peer *process* exiting, over shm too) does not apply; see
    // PeerProcessThatIsKilledFailsOperationsAsExited for that.
    GTEST_SKIP() << "no peer error handling over UCX 1.13 shm: puts into a gone peer's segment "
                    "succeed; a peer in the same process can only be caught by deadlines";
  }
  Start(&RegisterDataAndSignals);
  t_[1]->DropConnections();
  ASSERT_TRUE(t_[1]->Shutdown().ok() || true);  // its own teardown may report a late close
  // Over tcp the endpoint error names rank 1 at once: an error naming the peer, never a hang.
  absl::Status s = UseUntilFailure(*t_[0], 1);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("rank 1 ("));
  EXPECT_TRUE(t_[0]->PeerStatus(1).code() != absl::StatusCode::kOk);
  EXPECT_TRUE(t_[0]->Shutdown().ok());
  EXPECT_EQ(t_[0]->in_flight(), 0);
}

// A peer that shuts down cleanly says so before it closes: the survivor's later operations fail
// naming it as shut down (not as an endpoint timeout, and without a warning), and a dropped
// connection (above) still reads as a failure.
TEST_P(TransportTest, PeerThatShutsDownIsNamedAsShutDown) {
  if (GetParam() == "shm") {
    GTEST_SKIP() << "no endpoint errors over UCX 1.13 shm (error handling NONE): a closed peer "
                    "is not reported at all, so there is nothing to name";
  }
  Start(&RegisterDataAndSignals);
  ASSERT_TRUE(t_[1]->Shutdown().ok());
  absl::Status s = UseUntilFailure(*t_[0], 1);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("rank 1 ("));
  EXPECT_THAT(t_[0]->PeerStatus(1).message(), HasSubstr("shut down its transport"))
      << t_[0]->PeerStatus(1);
  EXPECT_THAT(t_[0]->PeerStatus(1).message(), Not(HasSubstr("failed")));
  EXPECT_TRUE(t_[0]->Shutdown().ok());
  EXPECT_EQ(t_[0]->in_flight(), 0);
}

// Ranks that finish one after another: each one's goodbye reaches those still running, also after
// they themselves saw an earlier peer leave (a peer's shutdown is not a failure that would stop
// them saying goodbye or force their closes).
TEST_P(TransportTest, RanksShuttingDownInTurnAreEachNamedAsShutDown) {
  if (GetParam() == "shm") GTEST_SKIP() << "no endpoint errors over UCX 1.13 shm (see above)";
  Start(&RegisterDataAndSignals, SignalOrdering::kFlush, /*world=*/3);
  ASSERT_TRUE(t_[0]->Shutdown().ok());
  ASSERT_FALSE(UseUntilFailure(*t_[1], 0).ok());
  ASSERT_FALSE(UseUntilFailure(*t_[2], 0).ok());
  ASSERT_TRUE(t_[1]->Shutdown().ok());
  ASSERT_FALSE(UseUntilFailure(*t_[2], 1).ok());
  for (auto [who, peer] : {std::pair{1, 0}, {2, 0}, {2, 1}}) {
    EXPECT_THAT(t_[who]->PeerStatus(peer).message(), HasSubstr("shut down its transport"))
        << "rank " << who << " on rank " << peer << ": " << t_[who]->PeerStatus(peer);
  }
  EXPECT_TRUE(t_[2]->Shutdown().ok());
  EXPECT_EQ(t_[2]->in_flight(), 0);
}

TEST_P(TransportTest, StagedChannelPipelinesChunksThroughHostSlots) {
  std::unique_ptr<StagedChannel> ch[2];
  std::atomic<int> copies_out{0}, copies_in{0};
  Start([&](int r, UcxTransport& t) {
    StagingOptions o;
    o.slots = 3;
    o.slot_bytes = 64 << 10;
    o.device_to_host = [&](void* d, const void* s, size_t n) {
      std::memcpy(d, s, n);
      ++copies_out;
      return absl::OkStatus();
    };
    o.host_to_device = [&](void* d, const void* s, size_t n) {
      std::memcpy(d, s, n);
      ++copies_in;
      return absl::OkStatus();
    };
    auto c = StagedChannel::Create(&t, "stage01", 1 - r, /*sender=*/r == 0, o);
    ASSERT_TRUE(c.ok()) << c.status();
    ch[r] = *std::move(c);
  });
  const int kChunks = 40;
  std::vector<std::vector<char>> src(kChunks), dst(kChunks);
  std::vector<StagedChunk> send, recv;
  for (int i = 0; i < kChunks; ++i) {
    size_t n = (i % 5 == 4) ? 1000 : (64 << 10);  // some short chunks
    src[i].resize(n);
    dst[i].assign(n, 0);
    for (size_t k = 0; k < n; ++k) src[i][k] = static_cast<char>(i * 31 + k);
    send.push_back({src[i].data(), n});
    recv.push_back({dst[i].data(), n});
  }
  for (int round = 0; round < 2; ++round) {  // sequence numbers continue across calls
    std::vector<int> arrivals;
    absl::Status recv_status;
    std::thread receiver([&] {
      recv_status = ch[1]->Receive(recv, [&](int i) { arrivals.push_back(i); });
    });
    absl::Status send_status = ch[0]->Send(send);
    receiver.join();
    ASSERT_TRUE(send_status.ok()) << send_status;
    ASSERT_TRUE(recv_status.ok()) << recv_status;
    std::vector<int> expected(kChunks);
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(arrivals, expected);
    for (int i = 0; i < kChunks; ++i) ASSERT_EQ(src[i], dst[i]) << "chunk " << i;
    for (auto& d : dst) std::fill(d.begin(), d.end(), 0);
  }
  EXPECT_EQ(copies_out.load(), 2 * kChunks);
  EXPECT_EQ(copies_in.load(), 2 * kChunks);
}

// ---- A peer in another process ----

// Set for the re-executed binary that plays rank 1: "<hub address> <tls>".
constexpr char kPeerEnv[] = "SYNCOPATE_UCX_TEST_PEER";

// Rank 1 of PeerProcessThatIsKilledFailsOperationsAsExited, run only by that test in a process of
// its own (this binary re-executed with kPeerEnv set): a helper, not a test, hence disabled.
TEST(PeerProcess, DISABLED_RankOne) {
  const char* env = std::getenv(kPeerEnv);
  ASSERT_NE(env, nullptr) << "only PeerProcessThatIsKilledFailsOperationsAsExited runs this";
  std::vector<std::string> args = absl::StrSplit(env, ' ');
  ASSERT_EQ(args.size(), 2u) << env;
  auto t = UcxTransport::Create(TestOptions(1, args[1]));
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE((*t)->AllocateMemory("data", kRegionBytes).ok());
  ASSERT_TRUE((*t)->AllocateMemory("signals", 64).ok());
  auto b = TcpBootstrap::Connect(args[0], 1, 2, absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(b.ok()) << b.status();
  absl::Status s = (*t)->Connect(**b, absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(s.ok()) << s;
  // Serve rank 0's puts until it kills us; if it never does, its guard or this sleep ends us.
  absl::SleepFor(absl::Seconds(120));
}

// A child process, killed and reaped however the test ends; its output goes to a file.
struct Child {
  pid_t pid = -1;
  std::string log;
  ~Child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  std::string Output() const {
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

// Starts this test binary again as rank 1 (PeerProcess.DISABLED_RankOne).
absl::Status SpawnRankOne(const std::string& hub, const std::string& tls, Child& child) {
  char exe[4096] = {};
  if (::readlink("/proc/self/exe", exe, sizeof exe - 1) <= 0) {
    return absl::InternalError(absl::StrCat("readlink /proc/self/exe: ", std::strerror(errno)));
  }
  // GTEST_* (sharding, output files) belong to this run, not to the child's.
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "GTEST_", 6) != 0) env.push_back(*e);
  }
  env.push_back(absl::StrCat(kPeerEnv, "=", hub, " ", tls));
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string filter = "--gtest_filter=PeerProcess.DISABLED_RankOne";
  std::string disabled = "--gtest_also_run_disabled_tests";
  std::vector<char*> argv = {exe, filter.data(), disabled.data(), nullptr};
  child.log = absl::StrCat(::testing::TempDir(), "ucx_peer_process_", ::getpid(), "_", tls, ".log");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, child.log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  int rc = posix_spawn(&child.pid, exe, &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    child.pid = -1;
    return absl::InternalError(absl::StrCat("posix_spawn ", exe, ": ", std::strerror(rc)));
  }
  return absl::OkStatus();
}

// A peer process on this host that is killed (SIGKILL) fails operations to it with an error
// naming it and saying that it exited, over shared memory too, where UCX reports nothing (puts
// into the dead peer's orphaned segment succeed): the transport's pidfd watch must notice.
// Every wait has a 60 s deadline, so a deadline ("stalled") cannot produce the expected error;
// without the watch the shm case runs into the hang guard and fails. Nothing asserts on timing.
TEST_P(TransportTest, PeerProcessThatIsKilledFailsOperationsAsExited) {
  const int probe = static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0));
  if (probe < 0 && (errno == ENOSYS || errno == EPERM)) {
    GTEST_SKIP() << "no pidfd_open here (" << std::strerror(errno) << "): no liveness watch";
  }
  if (probe >= 0) ::close(probe);
  auto hub = TcpBootstrapHub::Start(2);
  ASSERT_TRUE(hub.ok()) << hub.status();
  Child child;
  ASSERT_TRUE(SpawnRankOne((*hub)->address(), GetParam(), child).ok());
  auto t = UcxTransport::Create(TestOptions(0, GetParam()));
  ASSERT_TRUE(t.ok()) << t.status();
  UcxTransport& rank0 = **t;
  RegisterDataAndSignals(0, rank0);
  {
    auto b = TcpBootstrap::Connect((*hub)->address(), 0, 2, absl::Now() + absl::Seconds(30));
    ASSERT_TRUE(b.ok()) << b.status();
    absl::Status s = rank0.Connect(**b, absl::Now() + absl::Seconds(30));
    ASSERT_TRUE(s.ok()) << s << "\nrank 1:\n" << child.Output();
  }
  // The peer is there and takes puts.
  ASSERT_TRUE(rank0
                  .Wait(rank0.PutWithSignal(1, 0, 0, {{0, 0, 4096}}, {1, 0}, 1),
                        absl::Now() + absl::Seconds(60), "put to a live peer")
                  .ok());
  ASSERT_EQ(::kill(child.pid, SIGKILL), 0);  // not reaped yet: a zombie must count as exited
  const absl::Time guard = absl::Now() + absl::Seconds(60);  // hang guard
  absl::Status s;
  for (uint64_t i = 2; s.ok() && absl::Now() < guard; ++i) {
    s = rank0.Wait(rank0.PutWithSignal(1, 0, 0, {{0, 0, 4096}}, {1, 0}, i),
                   absl::Now() + absl::Seconds(60), "put to a killed peer");
    if (s.ok()) {
      s = rank0.Wait(rank0.Flush(1), absl::Now() + absl::Seconds(60), "flush to a killed peer");
    }
  }
  ASSERT_FALSE(s.ok()) << "operations to the killed peer still succeed after 60 s";
  EXPECT_THAT(s.message(), HasSubstr("rank 1 (")) << s;
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat(" pid ", child.pid, ")"))) << s;
  // Over tcp the operation may fail by a UCX request error before the peer is marked failed;
  // then the mark follows (the watch polls every millisecond).
  while (rank0.PeerStatus(1).ok() && absl::Now() < guard) absl::SleepFor(absl::Milliseconds(1));
  const absl::Status why = rank0.PeerStatus(1);
  if (GetParam() == "shm") {
    // Only the watch can have failed it: UCX over shm reports nothing.
    EXPECT_THAT(s.message(), HasSubstr("failed: process exited")) << s;
    EXPECT_THAT(why.message(), HasSubstr("failed: process exited")) << why;
  } else {
    // Over tcp, UCX's endpoint error races the watch: the kernel closes a dead process's
    // sockets just before it reports the exit. The endpoint error says "process exited" when
    // the pidfd already does, so either way the peer is failed naming a cause.
    EXPECT_THAT(why.message(), ::testing::AnyOf(HasSubstr("failed: process exited"),
                                                HasSubstr("failed: endpoint error")))
        << why;
  }
  EXPECT_TRUE(rank0.Shutdown().ok());
  EXPECT_EQ(rank0.in_flight(), 0);
  if (HasFailure()) std::cout << "rank 1 output:\n" << child.Output() << std::endl;
}

INSTANTIATE_TEST_SUITE_P(Tls, TransportTest, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace syncopate::ucx
