// Single-process tests of UcxTransport: two transports (one per "rank") in one process, over
// tcp and over shared memory. Put+signal ordering, gets, bounds errors, a peer that goes away,
// and the staged (device-through-host) pipeline with memcpy copy callbacks.
#include "runtime/ucx/transport.h"

#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/ucx/staged_channel.h"
#include "tests/ucx/local_bootstrap.h"

namespace syncopate::ucx {
namespace {

using ::testing::HasSubstr;

constexpr size_t kRegionBytes = 1 << 20;

class TransportTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Creates two transports; `setup(rank, transport)` registers regions before Connect.
  void Start(const std::function<void(int, UcxTransport&)>& setup,
             SignalOrdering ordering = SignalOrdering::kFlush) {
    group_ = std::make_unique<testing::LocalBootstrapGroup>(2);
    for (int r = 0; r < 2; ++r) {
      TransportOptions opts;
      opts.name = "test" + std::to_string(r);
      opts.ucx_config = {{"TLS", GetParam()}};
      opts.ordering = ordering;
      // UCX 1.13's posix/sysv have no peer failure handler (see ErrorHandling).
      if (GetParam() == "shm") opts.error_handling = ErrorHandling::kNone;
      opts.teardown_timeout = absl::Seconds(2);
      auto t = UcxTransport::Create(opts);
      ASSERT_TRUE(t.ok()) << t.status();
      t_[r] = *std::move(t);
      setup(r, *t_[r]);
    }
    absl::Status status[2];
    std::thread th([&] {
      testing::LocalBootstrap b(group_.get(), 1);
      status[1] = t_[1]->Connect(b, absl::Now() + absl::Seconds(20));
    });
    testing::LocalBootstrap b(group_.get(), 0);
    status[0] = t_[0]->Connect(b, absl::Now() + absl::Seconds(20));
    th.join();
    ASSERT_TRUE(status[0].ok()) << status[0];
    ASSERT_TRUE(status[1].ok()) << status[1];
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
  std::unique_ptr<UcxTransport> t_[2];
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

TEST_P(TransportTest, PeerThatGoesAwayFailsOperationsNamingIt) {
  if (GetParam() == "shm") {
    GTEST_SKIP() << "no peer error handling over UCX 1.13 shm: puts into a gone peer's segment "
                    "succeed; faults there surface as signal deadlines (integration tests)";
  }
  Start(&RegisterDataAndSignals);
  t_[1]->DropConnections();
  ASSERT_TRUE(t_[1]->Shutdown().ok() || true);  // its own teardown may report a late close
  // Over tcp the endpoint error names rank 1 at once; over shared memory nothing tells us, so
  // the deadline does. Either way: an error naming the peer, never a hang.
  absl::Status s;
  for (int i = 0; i < 50 && s.ok(); ++i) {
    Completion c = t_[0]->PutWithSignal(1, 0, 0, {{0, 0, 4096}}, {1, 0}, i + 1);
    s = t_[0]->Wait(c, absl::Now() + absl::Seconds(3), "put to a gone peer");
    if (s.ok()) {
      s = t_[0]->Wait(t_[0]->Flush(1), absl::Now() + absl::Seconds(3), "flush to a gone peer");
    }
  }
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("rank 1 ("));
  EXPECT_TRUE(t_[0]->PeerStatus(1).code() != absl::StatusCode::kOk);
  EXPECT_TRUE(t_[0]->Shutdown().ok());
  EXPECT_EQ(t_[0]->in_flight(), 0);
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

INSTANTIATE_TEST_SUITE_P(Tls, TransportTest, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace syncopate::ucx
