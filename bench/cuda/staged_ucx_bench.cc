// staged_ucx_bench: device-to-device chunk throughput over Debian's host-only UCX through the
// staged path (StagedChannel + DeviceStaging): device -> host slot -> UCX put -> remote slot ->
// device, between two rank processes on GPU 0, over UCX tcp and shm, with the slots page-locked
// (the product path) and pageable (what the pinning buys), per chunk size. Per row: end-to-end
// GB/s and each side's time in its copy callback vs waiting, so one sees which stage bounds the
// pipeline (time per chunk should approach the slowest stage, not the sum). The received bytes are
// checked after the timed rounds, so a row never reports a broken transfer.
//
// The ranks are forked (syncopate::workloads::RunRanks) from a single-threaded parent: rank 0 runs
// the bootstrap hub and passes its address to rank 1 through a pipe (a hub thread in the parent
// at fork time can leave libucm's lock held in the children; runtime/ucx/forked_bootstrap.h).
//
// Usage: staged_ucx_bench [--tls tcp,shm] [--chunks 262144,1048576,4194304] [--total_mib 256]
//                         [--slots 4] [--reps 5]

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/base/flags.h"
#include "core/base/status_macros.h"
#include "runtime/cuda/staged_copies.h"
#include "runtime/cuda/workloads/multiprocess.h"
#include "runtime/ucx/forked_bootstrap.h"
#include "runtime/ucx/staged_channel.h"
#include "runtime/ucx/tcp_bootstrap.h"
#include "runtime/ucx/transport.h"

namespace syncopate::cuda {
namespace {

constexpr absl::Duration kSetupTimeout = absl::Seconds(60);

struct Config {
  std::vector<std::string> tls = {"tcp", "shm"};
  std::vector<size_t> chunks = {size_t{256} << 10, size_t{1} << 20, size_t{4} << 20};
  size_t total = size_t{256} << 20;
  int slots = 4;
  int reps = 5;
};

struct Row {
  std::string tls;
  bool pin;
  size_t chunk;
};

uint8_t Pattern(size_t i) { return static_cast<uint8_t>((i * 2654435761u) >> 13); }

// One row: rank 0 sends `total` bytes as chunks of `row.chunk`, `reps` timed rounds after one
// warm-up; rank 1 prints the row.
absl::Status BenchRank(int rank, const ucx::ForkedBootstrap& forked, const Config& cfg,
                       const Row& row) {
  const bool sender = rank == 0;
  const size_t n = std::max<size_t>(1, cfg.total / row.chunk);
  const size_t bytes = n * row.chunk;
  ucx::TransportOptions topts;
  topts.name = absl::StrCat("staged_bench", rank);
  topts.ucx_config = {{"TLS", row.tls}};
  if (row.tls == "shm") topts.error_handling = ucx::ErrorHandling::kNone;  // UCX 1.13 shm
  // Declaration order is teardown order in reverse (staged_copies.h): transport, staging, channel.
  ASSIGN_OR_RETURN(std::unique_ptr<ucx::UcxTransport> transport, ucx::UcxTransport::Create(topts));
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceStaging> staging, DeviceStaging::Create(0));
  const DriverApi& api = staging->context().api();
  ASSIGN_OR_RETURN(DeviceBuffer device, DeviceBuffer::Allocate(api, bytes));
  ucx::StagingOptions sopts;
  sopts.slots = cfg.slots;
  sopts.slot_bytes = row.chunk;
  staging->Install(sopts);
  ASSIGN_OR_RETURN(std::unique_ptr<ucx::StagedChannel> channel,
                   ucx::StagedChannel::Create(transport.get(), "bench", 1 - rank, sender, sopts));
  std::string pin_note = row.pin ? "pinned" : "pageable";
  if (row.pin) {
    absl::Status pinned = staging->PinRegion(*transport, channel->slots_region());
    if (!pinned.ok()) pin_note = "pin FAILED, pageable";
  }
  std::unique_ptr<ucx::TcpBootstrapHub> hub;
  ASSIGN_OR_RETURN(std::unique_ptr<ucx::TcpBootstrap> bootstrap,
                   forked.Join(rank, 2, absl::Now() + kSetupTimeout, hub));
  RETURN_IF_ERROR(transport->Connect(*bootstrap, absl::Now() + kSetupTimeout));

  std::vector<uint8_t> host(bytes);
  for (size_t i = 0; i < bytes; ++i) host[i] = sender ? Pattern(i) : 0;
  CU_RETURN_IF_ERROR(api.cuMemcpyHtoD(device.get(), host.data(), bytes));
  CU_RETURN_IF_ERROR(api.cuCtxSynchronize());  // the copy streams do not wait for this one
  std::vector<ucx::StagedChunk> chunks;
  for (size_t i = 0; i < n; ++i) {
    chunks.push_back({reinterpret_cast<void*>(device.get() + i * row.chunk), row.chunk});
  }

  absl::Duration elapsed, copy, wait;
  for (int round = -1; round < cfg.reps; ++round) {  // round -1 warms up
    RETURN_IF_ERROR(bootstrap->Barrier(absl::Now() + kSetupTimeout));
    const absl::Time t0 = absl::Now();
    RETURN_IF_ERROR(sender ? channel->Send(chunks) : channel->Receive(chunks, nullptr));
    if (round < 0) continue;
    elapsed += absl::Now() - t0;
    copy += channel->last_times().copy;
    wait += channel->last_times().wait;
  }
  // Rank 1 prints both sides' stage times: rank 0's come over the bootstrap.
  ASSIGN_OR_RETURN(std::vector<std::string> times,
                   bootstrap->AllGather(absl::StrCat(absl::ToDoubleSeconds(copy), " ",
                                                     absl::ToDoubleSeconds(wait)),
                                        absl::Now() + kSetupTimeout));
  if (!sender) {
    CU_RETURN_IF_ERROR(api.cuMemcpyDtoH(host.data(), device.get(), bytes));
    for (size_t i = 0; i < bytes; ++i) {
      if (host[i] != Pattern(i)) {
        return absl::DataLossError(absl::StrCat(row.tls, " chunk ", row.chunk, ": byte ", i,
                                                " is ", int{host[i]}, ", expected ",
                                                int{Pattern(i)}));
      }
    }
    std::vector<std::string> sent = absl::StrSplit(times[0], ' ');
    double send_copy = 0, send_wait = 0;
    (void)absl::SimpleAtod(sent[0], &send_copy);
    (void)absl::SimpleAtod(sent[1], &send_wait);
    const double moved = static_cast<double>(bytes) * cfg.reps;
    const double per_chunk_us = absl::ToDoubleMicroseconds(elapsed) / (n * cfg.reps);
    std::printf("%-4s %-22s %8zu KiB %8.2f GB/s %9.1f us/chunk | out: copy %6.1f us wait %6.1f us"
                " | in: copy %6.1f us wait %6.1f us\n",
                row.tls.c_str(), pin_note.c_str(), row.chunk >> 10,
                moved / absl::ToDoubleSeconds(elapsed) / 1e9, per_chunk_us,
                send_copy * 1e6 / (n * cfg.reps), send_wait * 1e6 / (n * cfg.reps),
                absl::ToDoubleMicroseconds(copy) / (n * cfg.reps),
                absl::ToDoubleMicroseconds(wait) / (n * cfg.reps));
    std::fflush(stdout);
  }
  RETURN_IF_ERROR(bootstrap->Barrier(absl::Now() + kSetupTimeout));
  channel.reset();
  device = DeviceBuffer();
  staging.reset();
  absl::Status down = transport->Shutdown();
  // Nobody exits while the other still closes its endpoints (logged as a peer failure there).
  absl::Status both_down = bootstrap->Barrier(absl::Now() + kSetupTimeout);
  return down.ok() ? both_down : down;
}

Config ParseFlags(int argc, char** argv) {
  Config c;
  int64_t total_mib = static_cast<int64_t>(c.total >> 20);
  FlagSet flags("staged_ucx_bench",
                "Device-to-device chunk throughput over host-only UCX through the staged path, two "
                "rank processes\non GPU 0, pinned and pageable slots.");
  flags.StringList("tls", &c.tls, "UCX transports");
  flags.IntList("chunks", &c.chunks, "chunk sizes in bytes", 1);
  flags.Int("total_mib", &total_mib, "MiB moved per round", 1, int64_t{1} << 30);
  flags.Int("slots", &c.slots, "staging slots", 1);
  flags.Int("reps", &c.reps, "timed rounds", 1);
  flags.ParseOrExit(argc, argv);
  c.total = static_cast<size_t>(total_mib) << 20;
  return c;
}

int Main(int argc, char** argv) {
  const Config cfg = ParseFlags(argc, argv);
  std::string why;
  if (!workloads::ProbeGpu(&why)) {  // in a child: this process stays free of CUDA for the forks
    std::fprintf(stderr, "staged_ucx_bench needs a GPU: %s\n", why.c_str());
    return 1;
  }
  std::printf(
      "## staged UCX path, GPU 0 -> GPU 0 across two processes, %d slots, %zu MiB per "
      "round, rounds: %d (per-chunk times are means)\n",
      cfg.slots, cfg.total >> 20, cfg.reps);
  std::fflush(stdout);  // before forking: a child would otherwise print the buffer again
  int failures = 0;
  for (const std::string& tls : cfg.tls) {
    for (bool pin : {true, false}) {
      for (size_t chunk : cfg.chunks) {
        absl::StatusOr<ucx::ForkedBootstrap> forked = ucx::ForkedBootstrap::Create();
        if (!forked.ok()) return 1;
        const Row row{tls, pin, chunk};
        std::vector<absl::Status> s = workloads::RunRanks(
            2, absl::Seconds(300), [&](int r) { return BenchRank(r, *forked, cfg, row); });
        for (size_t r = 0; r < s.size(); ++r) {
          if (s[r].ok()) continue;
          ++failures;
          std::printf("%-4s %s %zu KiB: rank %zu: %s\n", tls.c_str(),
                      pin ? "pinned" : "pageable", chunk >> 10, r, s[r].ToString().c_str());
        }
        std::fflush(stdout);
      }
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace syncopate::cuda

int main(int argc, char** argv) { return syncopate::cuda::Main(argc, argv); }
