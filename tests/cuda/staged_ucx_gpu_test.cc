// Device chunks between two rank processes over Debian's host-only UCX, through StagedChannel
// with DeviceStaging's copies: device -> pinned host slot -> UCX put (tcp, shm) -> remote slot ->
// device, checked byte by byte; plus the copy callbacks' error messages and the fallback when
// the slots cannot be pinned. LABEL gpu; skips without a GPU.
//
// The ranks are forked processes (RunRanks), each with its own CUDA context on GPU 0 and its own
// UcxTransport, joined by a TCP bootstrap hub that rank 0 runs (see runtime/ucx/forked_bootstrap.h for why not the
// test process). The test process itself never touches CUDA, so the other GPU tests in this
// binary can still fork ranks after this one.
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <ostream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/staged_copies.h"
#include "runtime/cuda/workloads/multiprocess.h"
#include "runtime/ucx/forked_bootstrap.h"
#include "runtime/ucx/staged_channel.h"
#include "runtime/ucx/tcp_bootstrap.h"
#include "runtime/ucx/transport.h"
#include "tests/cuda/gpu_test_env.h"

namespace syncopate::cuda {
namespace {

using ::syncopate::workloads::RunRanks;
using ::testing::HasSubstr;

constexpr int kSlots = 3;  // fewer than the chunks: slots are reused and credits are exercised
constexpr size_t kSlotBytes = size_t{1} << 20;
constexpr int kRounds = 2;  // sequence numbers continue across Send/Receive calls
constexpr absl::Duration kSetupTimeout = absl::Seconds(60);

// Eight full slots, then sizes that are not: odd, a single byte, and one short of a slot.
std::vector<size_t> ChunkSizes() {
  std::vector<size_t> sizes(8, kSlotBytes);
  sizes.push_back(333331);
  sizes.push_back(1);
  sizes.push_back(kSlotBytes - 3);
  return sizes;
}

// A byte of (round, chunk, offset) through a 64-bit mixer: no period a misplaced slot, a shifted
// offset or a stale round could line up with.
uint8_t Pattern(int round, size_t chunk, size_t offset) {
  uint64_t x = (uint64_t(round) << 56) ^ (uint64_t(chunk) << 40) ^ offset;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint8_t>(x);
}
constexpr uint8_t kPoison = 0xEE;

struct Param {
  std::string tls;  // UCX_TLS: "tcp" or "shm"
  bool pin;         // page-lock the slots (the product path) or leave them pageable
};

void PrintTo(const Param& p, std::ostream* os) {
  *os << "tls " << p.tls << (p.pin ? ", pinned slots" : ", pageable slots");
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  return absl::StrCat(info.param.tls, info.param.pin ? "_pinned" : "_pageable");
}

ucx::TransportOptions TransportOptionsFor(int rank, const std::string& tls) {
  ucx::TransportOptions o;
  o.name = absl::StrCat("staged_gpu", rank);
  o.ucx_config = {{"TLS", tls}};
  // UCX 1.13's posix/sysv have no peer failure handler (see ucx::ErrorHandling).
  if (tls == "shm") o.error_handling = ucx::ErrorHandling::kNone;
  return o;
}

// Runs `fn` on a new thread, which has no CUDA context current: that is how StagedChannel's
// callers look (a communication thread), and the callbacks must cope and leave it that way.
absl::Status OnFreshThread(const DriverApi& api, const std::function<absl::Status()>& fn) {
  absl::Status status;
  std::thread t([&] {
    status = fn();
    CUcontext current = nullptr;
    CUresult r = api.cuCtxGetCurrent(&current);
    if (status.ok() && (r != CUDA_SUCCESS || current != nullptr)) {
      status = absl::InternalError(
          "the staging callbacks left a CUDA context current on the calling thread");
    }
  });
  t.join();
  return status;
}

absl::Status FillDevice(const DriverApi& api, CUdeviceptr device,
                        const std::vector<uint8_t>& host) {
  CU_RETURN_IF_ERROR(api.cuMemcpyHtoD(device, host.data(), host.size()));
  // From pageable memory cuMemcpyHtoD may return before its DMA finished, and the staging copies
  // run on non-blocking streams that do not wait for the legacy stream: without this the fill
  // (the receiver's poison) could land after a chunk's copy-in.
  CU_RETURN_IF_ERROR(api.cuCtxSynchronize());
  return absl::OkStatus();
}

// Rank 0 sends, rank 1 receives, kRounds times the chunks of ChunkSizes().
absl::Status StagedRank(int rank, const ucx::ForkedBootstrap& forked, const Param& p) {
  const bool sender = rank == 0;
  const std::vector<size_t> sizes = ChunkSizes();
  std::vector<size_t> offsets(sizes.size());
  std::exclusive_scan(sizes.begin(), sizes.end(), offsets.begin(), size_t{0});
  const size_t total = offsets.back() + sizes.back();

  // Order matters for teardown (staged_copies.h): the transport owns the slots, the staging
  // pins them and its callbacks are held by the channel. Torn down explicitly below.
  ASSIGN_OR_RETURN(std::unique_ptr<ucx::UcxTransport> transport,
                   ucx::UcxTransport::Create(TransportOptionsFor(rank, p.tls)));
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceStaging> staging, DeviceStaging::Create(0));
  const DriverApi& api = staging->context().api();
  ASSIGN_OR_RETURN(DeviceBuffer device, DeviceBuffer::Allocate(api, total));

  ucx::StagingOptions options;
  options.slots = kSlots;
  options.slot_bytes = kSlotBytes;
  options.timeout = absl::Seconds(30);
  staging->Install(options);
  ASSIGN_OR_RETURN(std::unique_ptr<ucx::StagedChannel> channel,
                   ucx::StagedChannel::Create(transport.get(), "gpu_staged", 1 - rank, sender,
                                              options));
  if (p.pin) {
    const int slots_region = channel->slots_region();
    if (transport->region_size(slots_region) < kSlots * kSlotBytes) {
      return absl::InternalError(absl::StrCat("slots region ", slots_region, " has ",
                                              transport->region_size(slots_region),
                                              " bytes, fewer than the channel's slots"));
    }
    RETURN_IF_ERROR(staging->PinRegion(*transport, slots_region));
    if (!staging->fully_pinned()) {
      return absl::InternalError(absl::StrCat("slots not pinned: ",
                                              staging->pin_status().ToString()));
    }
  }
  std::unique_ptr<ucx::TcpBootstrapHub> hub;  // rank 0 only; outlives the bootstrap
  ASSIGN_OR_RETURN(std::unique_ptr<ucx::TcpBootstrap> bootstrap,
                   forked.Join(rank, 2, absl::Now() + kSetupTimeout, hub));
  RETURN_IF_ERROR(transport->Connect(*bootstrap, absl::Now() + kSetupTimeout));

  std::vector<ucx::StagedChunk> chunks;
  for (size_t i = 0; i < sizes.size(); ++i) {
    chunks.push_back({reinterpret_cast<void*>(device.get() + offsets[i]), sizes[i]});
  }
  std::vector<uint8_t> host(total);
  for (int round = 0; round < kRounds; ++round) {
    if (sender) {
      for (size_t i = 0; i < sizes.size(); ++i) {
        for (size_t k = 0; k < sizes[i]; ++k) host[offsets[i] + k] = Pattern(round, i, k);
      }
    } else {
      std::fill(host.begin(), host.end(), kPoison);  // what a chunk that never lands leaves
    }
    RETURN_IF_ERROR(FillDevice(api, device.get(), host));

    std::vector<int> arrivals;
    RETURN_IF_ERROR(OnFreshThread(api, [&] {
      return sender ? channel->Send(chunks)
                    : channel->Receive(chunks, [&](int i) { arrivals.push_back(i); });
    }));
    if (sender) continue;

    std::vector<int> expected(sizes.size());
    std::iota(expected.begin(), expected.end(), 0);
    if (arrivals != expected) {
      return absl::InternalError(absl::StrCat("round ", round, ": on_arrival called for chunks [",
                                              absl::StrJoin(arrivals, ","), "], expected [",
                                              absl::StrJoin(expected, ","), "]"));
    }
    std::fill(host.begin(), host.end(), 0);
    CU_RETURN_IF_ERROR(api.cuMemcpyDtoH(host.data(), device.get(), total));
    size_t wrong = 0;
    std::string first;
    for (size_t i = 0; i < sizes.size(); ++i) {
      for (size_t k = 0; k < sizes[i]; ++k) {
        const uint8_t want = Pattern(round, i, k);
        const uint8_t got = host[offsets[i] + k];
        if (got == want) continue;
        if (wrong++ == 0) {
          first = absl::StrCat("chunk ", i, " (", sizes[i], " bytes) byte ", k, " is ",
                               int{got}, ", expected ", int{want},
                               got == kPoison ? " (never written)" : "");
        }
      }
    }
    if (wrong > 0) {
      return absl::DataLossError(absl::StrCat("round ", round, " over ", p.tls, ": ", wrong,
                                              " of ", total, " bytes wrong; first: ", first));
    }
  }
  // Neither side tears down while the other may still flush to it.
  RETURN_IF_ERROR(bootstrap->Barrier(absl::Now() + kSetupTimeout));
  channel.reset();
  device = DeviceBuffer();  // while the staging still retains the context
  staging.reset();          // unpins the slots while UCX still has them mapped
  absl::Status down = transport->Shutdown();
  // Nobody exits while the other still closes its endpoints (the exit would be logged as a peer
  // failure there); the bootstrap does not depend on the transport.
  absl::Status both_down = bootstrap->Barrier(absl::Now() + kSetupTimeout);
  return down.ok() ? both_down : down;
}

class StagedUcxGpuTest : public ::testing::TestWithParam<Param> {};

TEST_P(StagedUcxGpuTest, DeviceChunksArriveIntactAndInOrder) {
  SYNCOPATE_REQUIRE_GPU();
  absl::StatusOr<ucx::ForkedBootstrap> forked = ucx::ForkedBootstrap::Create();
  ASSERT_TRUE(forked.ok()) << forked.status();
  const Param p = GetParam();
  std::vector<absl::Status> results =
      RunRanks(2, absl::Seconds(180), [&](int r) { return StagedRank(r, *forked, p); });
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_TRUE(results[r].ok()) << (r == 0 ? "sender" : "receiver") << " (rank " << r
                                 << "): " << results[r];
  }
}

INSTANTIATE_TEST_SUITE_P(Tls, StagedUcxGpuTest,
                         ::testing::Values(Param{"tcp", true}, Param{"shm", true},
                                           Param{"tcp", false}, Param{"shm", false}),
                         Name);

// An anonymous private mapping, unmapped on destruction; address is null when mmap failed.
struct Mapping {
  Mapping(size_t bytes, int prot) : bytes(bytes) {
    void* p = ::mmap(nullptr, bytes, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    address = p == MAP_FAILED ? nullptr : p;
  }
  ~Mapping() {
    if (address != nullptr) ::munmap(address, bytes);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  void* address = nullptr;
  size_t bytes;
};

// A copy the driver rejects comes back as a status naming the direction, the driver call and
// the CUDA error, and leaves the calling thread's context and the staging usable.
TEST(StagedCopiesGpuTest, CopyErrorsNameTheCopyAndTheCudaError) {
  SYNCOPATE_REQUIRE_GPU();
  std::vector<absl::Status> results = RunRanks(1, absl::Seconds(60), [](int) -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceStaging> staging, DeviceStaging::Create(0));
    const DriverApi& api = staging->context().api();
    ucx::CopyFn out = staging->DeviceToHost();
    ucx::CopyFn in = staging->HostToDevice();
    std::vector<uint8_t> host(4096, 7);
    absl::Status bad_out, bad_in;
    // Device address 0 is never an allocation.
    RETURN_IF_ERROR(OnFreshThread(api, [&] {
      bad_out = out(host.data(), nullptr, host.size());
      bad_in = in(nullptr, host.data(), host.size());
      return absl::OkStatus();
    }));
    for (const auto& [status, direction, call] :
         {std::tuple{bad_out, "device -> host", "cuMemcpyDtoHAsync"},
          std::tuple{bad_in, "host -> device", "cuMemcpyHtoDAsync"}}) {
      if (status.ok()) {
        return absl::InternalError(
            absl::StrCat(direction, " copy with device address 0 succeeded"));
      }
      for (const char* part : {direction, call, "CUDA_ERROR_", "4096 bytes"}) {
        if (!absl::StrContains(status.message(), part)) {
          return absl::InternalError(
              absl::StrCat("error lacks '", part, "': ", status.ToString()));
        }
      }
    }
    // The staging still works: a round trip through a real allocation.
    ASSIGN_OR_RETURN(DeviceBuffer device, DeviceBuffer::Allocate(api, host.size()));
    std::vector<uint8_t> back(host.size(), 0);
    std::iota(host.begin(), host.end(), uint8_t{1});
    void* d = reinterpret_cast<void*>(device.get());
    RETURN_IF_ERROR(OnFreshThread(api, [&]() -> absl::Status {
      RETURN_IF_ERROR(in(d, host.data(), host.size()));
      return out(back.data(), d, back.size());
    }));
    if (back != host) return absl::DataLossError("round trip after a failed copy lost data");
    return absl::OkStatus();
  });
  EXPECT_TRUE(results[0].ok()) << results[0];
}

// Pinning reports what it could not do, and the copies work either way: inaccessible memory
// (PROT_NONE) cannot be pinned (fully_pinned() turns false, pin_status() says why); a range
// pinned twice counts as pinned.
TEST(StagedCopiesGpuTest, PinningFailureIsReportedAndCopiesStillWork) {
  SYNCOPATE_REQUIRE_GPU();
  std::vector<absl::Status> results = RunRanks(1, absl::Seconds(60), [](int) -> absl::Status {
    constexpr size_t kBytes = size_t{1} << 20;
    // The mappings outlive the staging (declared first): it unpins before they are unmapped.
    Mapping slot(kBytes, PROT_READ | PROT_WRITE);
    // Reserved but inaccessible: the driver cannot fault its pages in to pin them (and, unlike
    // an unmapped range, no other mapping can appear there meanwhile).
    Mapping locked_out(kBytes, PROT_NONE);
    if (slot.address == nullptr || locked_out.address == nullptr) {
      return absl::InternalError("mmap failed");
    }
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceStaging> staging, DeviceStaging::Create(0));
    const DriverApi& api = staging->context().api();

    RETURN_IF_ERROR(staging->PinHostMemory(slot.address, kBytes));
    RETURN_IF_ERROR(staging->PinHostMemory(slot.address, kBytes));  // again: pinned, still OK
    if (!staging->fully_pinned()) return absl::InternalError("mapped memory was not pinned");
    absl::Status inaccessible = staging->PinHostMemory(locked_out.address, kBytes);
    if (inaccessible.ok()) return absl::InternalError("pinning PROT_NONE memory succeeded");
    if (staging->fully_pinned() || staging->pin_status().ok() ||
        !absl::StrContains(staging->pin_status().message(), "pageable") ||
        !absl::StrContains(staging->pin_status().message(), "cuMemHostRegister")) {
      return absl::InternalError(absl::StrCat("failed pin not reported as such: fully_pinned ",
                                              staging->fully_pinned(), ", pin_status ",
                                              staging->pin_status().ToString()));
    }
    // Copies from pageable memory and into the pinned slot both arrive.
    ASSIGN_OR_RETURN(DeviceBuffer device, DeviceBuffer::Allocate(api, kBytes));
    void* d = reinterpret_cast<void*>(device.get());
    std::vector<uint8_t> pageable(kBytes);
    for (size_t k = 0; k < kBytes; ++k) pageable[k] = Pattern(0, 0, k);
    std::memset(slot.address, 0, kBytes);
    RETURN_IF_ERROR(OnFreshThread(api, [&]() -> absl::Status {
      RETURN_IF_ERROR(staging->HostToDevice()(d, pageable.data(), kBytes));
      return staging->DeviceToHost()(slot.address, d, kBytes);
    }));
    if (std::memcmp(slot.address, pageable.data(), kBytes) != 0) {
      return absl::DataLossError("pageable -> device -> pinned slot copy lost data");
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(results[0].ok()) << results[0];
}

}  // namespace
}  // namespace syncopate::cuda
