// ucx_chunk_bench: chunk bandwidth and latency of UcxTransport (put + ordered signal) against
// ucx_perftest (ucp_put_bw / ucp_put_lat, same transport, same sizes, run as subprocesses in the
// same run), over UCX tcp and shared memory, plus the staged device path's overlap (time per
// chunk vs its slowest stage, with host memcpy standing in for the device copies).
//
// Two processes: this one (rank 0, the driver) and itself re-executed as rank 1 (--role=target),
// joined through an in-process TCP bootstrap hub. Prints one table with ratios.
//
// Usage: ucx_chunk_bench [--quick] [--trials=N] [--tls=tcp,shm] [--perftest=/usr/bin/ucx_perftest]
// Both sides are measured in N interleaved trials (default 5; 1 with --quick) and compared by
// medians: on a shared machine one perftest run moved 2-7x between runs, so single runs could not
// settle a 90% goal.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/base/flags.h"
#include "core/base/status_macros.h"
#include "runtime/ucx/backoff.h"
#include "runtime/ucx/staged_channel.h"
#include "runtime/ucx/tcp_bootstrap.h"
#include "runtime/ucx/transport.h"

namespace syncopate::ucx {
namespace {

constexpr size_t kMaxChunk = size_t{16} << 20;
constexpr int kWindow = 8;  // chunks in flight in the bandwidth test

struct Config {
  std::string tls;
  bool fence = false;
  bool quick = false;
};

std::vector<size_t> BwSizes(bool quick) {
  if (quick) return {size_t{64} << 10, size_t{1} << 20, size_t{4} << 20};
  return {size_t{64} << 10, size_t{256} << 10, size_t{1} << 20, size_t{4} << 20,
          size_t{16} << 20};
}
std::vector<size_t> LatSizes() { return {8, 4096, size_t{64} << 10, size_t{1} << 20}; }
int BwIters(size_t size, bool quick) {
  const size_t total = (quick ? size_t{64} : size_t{256}) << 20;
  return static_cast<int>(std::clamp<size_t>(total / size, 16, 2000));
}
int LatIters(size_t size) { return size >= (size_t{1} << 20) ? 50 : 300; }

TransportOptions Options(const Config& c, int rank) {
  TransportOptions o;
  o.name = absl::StrCat("bench", rank);
  o.ucx_config = {{"TLS", c.tls}};
  if (c.tls == "shm") o.error_handling = ErrorHandling::kNone;  // see ErrorHandling
  o.ordering = c.fence ? SignalOrdering::kFence : SignalOrdering::kFlush;
  return o;
}

uint64_t Load(UcxTransport& t, int region, int index) {
  return std::atomic_ref<uint64_t>(static_cast<uint64_t*>(t.region_address(region))[index])
      .load(std::memory_order_acquire);
}

absl::Status WaitLocal(UcxTransport& t, int region, int index, uint64_t at_least) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  Backoff b;
  while (Load(t, region, index) < at_least) {
    if (absl::Now() > deadline) return absl::DeadlineExceededError("bench: signal never came");
    b.Pause();
  }
  return absl::OkStatus();
}

struct Result {
  std::map<size_t, double> bw_mbps;   // MB/s (1e6 bytes)
  std::map<size_t, double> lat_us;    // one-way
};

// Both ranks run this; rank 0 measures.
absl::StatusOr<Result> RunRank(int rank, const std::string& hub, const Config& cfg) {
  ASSIGN_OR_RETURN(auto t, UcxTransport::Create(Options(cfg, rank)));
  ASSIGN_OR_RETURN(int data, t->AllocateMemory("data", kMaxChunk));
  ASSIGN_OR_RETURN(int sig, t->AllocateMemory("signals", 4096));
  ASSIGN_OR_RETURN(auto boot, TcpBootstrap::Connect(hub, rank, 2, absl::Now() + absl::Seconds(30)));
  RETURN_IF_ERROR(t->Connect(*boot, absl::Now() + absl::Seconds(30)));
  const absl::Time far = absl::InfiniteFuture();
  Result res;
  uint64_t seq = 0;
  // Bandwidth: rank 0 streams chunks (put + signal each), kWindow in flight.
  for (size_t size : BwSizes(cfg.quick)) {
    RETURN_IF_ERROR(boot->Barrier(absl::Now() + absl::Seconds(60)));
    if (rank == 0) {
      const int iters = BwIters(size, cfg.quick);
      std::vector<Completion> window(kWindow);
      absl::Time start;
      for (int i = -kWindow; i < iters; ++i) {  // the first kWindow chunks warm up
        if (i == 0) {
          for (auto& c : window) {
            if (c.state()) RETURN_IF_ERROR(t->Wait(c, far, "bw warmup"));
          }
          start = absl::Now();
        }
        Completion& slot = window[(i + kWindow) % kWindow];
        if (slot.state()) RETURN_IF_ERROR(t->Wait(slot, far, "bw"));
        slot = t->PutWithSignal(1, data, data, {{0, 0, size}},
                                {sig, uint64_t((i + kWindow) % kWindow) * 8}, ++seq);
      }
      for (auto& c : window) RETURN_IF_ERROR(t->Wait(c, far, "bw"));
      RETURN_IF_ERROR(t->Wait(t->Flush(1), far, "bw flush"));
      const double secs = absl::ToDoubleSeconds(absl::Now() - start);
      res.bw_mbps[size] = static_cast<double>(size) * iters / secs / 1e6;
    }
  }
  // Latency: ping-pong of chunk + signal; half the round trip.
  uint64_t ping = 0;
  for (size_t size : LatSizes()) {
    RETURN_IF_ERROR(boot->Barrier(absl::Now() + absl::Seconds(60)));
    const int iters = LatIters(size);
    absl::Time start;
    for (int i = -10; i < iters; ++i) {
      if (i == 0) start = absl::Now();
      ++ping;
      if (rank == 0) {
        RETURN_IF_ERROR(t->Wait(t->PutWithSignal(1, data, data, {{0, 0, size}}, {sig, 512}, ping),
                                far, "ping"));
        RETURN_IF_ERROR(WaitLocal(*t, sig, 65, ping));
      } else {
        RETURN_IF_ERROR(WaitLocal(*t, sig, 64, ping));
        RETURN_IF_ERROR(t->Wait(t->PutWithSignal(0, data, data, {{0, 0, size}}, {sig, 520}, ping),
                                far, "pong"));
      }
    }
    if (rank == 0) {
      res.lat_us[size] = absl::ToDoubleMicroseconds(absl::Now() - start) / iters / 2;
    }
  }
  RETURN_IF_ERROR(boot->Barrier(absl::Now() + absl::Seconds(60)));
  RETURN_IF_ERROR(t->Shutdown());
  return res;
}

// ---- ucx_perftest ----

// Runs a perftest client against a fresh server; returns the "Final:" line's overall bandwidth
// (MB/s, 2^20 bytes) and average latency (usec).
struct PerfResult {
  double bw_mib = 0;
  double lat_us = 0;
};
std::optional<PerfResult> RunPerftest(const std::string& perftest, const std::string& tls,
                                      const std::string& test, size_t size, int iters,
                                      int port, const std::string& extra = "") {
  std::string env = absl::StrCat("UCX_TLS=", tls);
  std::string server = absl::StrCat(env, " timeout 60 ", perftest, " -p ", port,
                                     " >/dev/null 2>&1 &");
  std::string client = absl::StrCat(env, " timeout 60 ", perftest, " 127.0.0.1 -p ", port,
                                     " -t ", test, " -s ", size, " -n ", iters,
                                     // perftest's default warm-up is 10,000 iterations
                                     " -w ", std::max(iters / 4, 8), " ", extra, " 2>&1");
  if (std::system(server.c_str()) != 0) return std::nullopt;
  absl::SleepFor(absl::Milliseconds(300));
  FILE* p = popen(client.c_str(), "r");
  if (p == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
  pclose(p);
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (!absl::StartsWith(line, "Final:")) continue;
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    // Final: iters p50 lat_avg lat_overall bw_avg bw_overall mr_avg mr_overall
    PerfResult r;
    if (f.size() >= 9 && absl::SimpleAtod(f[4], &r.lat_us) && absl::SimpleAtod(f[6], &r.bw_mib)) {
      return r;
    }
  }
  std::fprintf(stderr, "ucx_perftest %s %s -s %zu: no result:\n%s\n", tls.c_str(), test.c_str(),
               size, out.c_str());
  return std::nullopt;
}

// perftest's put_bw at its best outstanding-send limit here: unlimited (its default) collapses
// over tcp loopback (29 MB/s at 16 MiB) and trails over shm, so the reference is the better of
// one outstanding put and kWindow (ours), whichever this machine favours in this trial.
std::optional<PerfResult> BestPerftestBandwidth(const std::string& perftest,
                                                const std::string& tls, size_t size, int iters,
                                                int& port) {
  std::optional<PerfResult> best;
  for (const std::string& outstanding : {std::string("-O 1"), absl::StrCat("-O ", kWindow)}) {
    std::optional<PerfResult> r =
        RunPerftest(perftest, tls, "ucp_put_bw", size, iters, port++, outstanding);
    if (r && (!best || r->bw_mib > best->bw_mib)) best = r;
  }
  return best;
}

// ---- Staged overlap ----

struct OverlapResult {
  double d2h_us, net_us, h2d_us, pipelined_us;
};

absl::StatusOr<OverlapResult> RunOverlap(const Config& cfg, size_t chunk, int chunks,
                                         int slots) {
  ASSIGN_OR_RETURN(auto hub, TcpBootstrapHub::Start(2));
  std::vector<char> device_src(chunk * chunks, 7), device_dst(chunk * chunks, 0);
  auto memcpy_fn = [](void* d, const void* s, size_t n) {
    std::memcpy(d, s, n);
    return absl::OkStatus();
  };
  std::unique_ptr<UcxTransport> t[2];
  std::unique_ptr<StagedChannel> ch[2];
  int net_region = -1, net_sig = -1;
  for (int r = 0; r < 2; ++r) {
    ASSIGN_OR_RETURN(t[r], UcxTransport::Create(Options(cfg, r)));
    StagingOptions o;
    o.slots = slots;
    o.slot_bytes = chunk;
    o.device_to_host = memcpy_fn;
    o.host_to_device = memcpy_fn;
    ASSIGN_OR_RETURN(ch[r], StagedChannel::Create(t[r].get(), "overlap", 1 - r, r == 0, o));
    ASSIGN_OR_RETURN(net_region, t[r]->AllocateMemory("net", chunk * slots));
    ASSIGN_OR_RETURN(net_sig, t[r]->AllocateMemory("net_sig", 8 * slots));
  }
  absl::Status cs[2];
  std::thread th([&] {
    auto b = TcpBootstrap::Connect(hub->address(), 1, 2, absl::Now() + absl::Seconds(30));
    cs[1] = b.ok() ? t[1]->Connect(**b, absl::Now() + absl::Seconds(30)) : b.status();
  });
  {
    auto b = TcpBootstrap::Connect(hub->address(), 0, 2, absl::Now() + absl::Seconds(30));
    cs[0] = b.ok() ? t[0]->Connect(**b, absl::Now() + absl::Seconds(30)) : b.status();
  }
  th.join();
  RETURN_IF_ERROR(cs[0]);
  RETURN_IF_ERROR(cs[1]);
  // Network stage alone: the same chunks, host slot to host slot, `slots` in flight.
  const absl::Time far = absl::InfiniteFuture();
  std::vector<Completion> window(slots);
  absl::Time n0 = absl::Now();
  for (int i = 0; i < chunks; ++i) {
    Completion& c = window[i % slots];
    if (c.state()) RETURN_IF_ERROR(t[0]->Wait(c, far, "net"));
    uint64_t off = uint64_t(i % slots) * chunk;
    c = t[0]->PutWithSignal(1, net_region, net_region, {{off, off, chunk}},
                            {net_sig, uint64_t(i % slots) * 8}, i + 1);
  }
  for (auto& c : window) {
    if (c.state()) RETURN_IF_ERROR(t[0]->Wait(c, far, "net"));
  }
  const double net_us = absl::ToDoubleMicroseconds(absl::Now() - n0) / chunks;
  // Pipelined staged path.
  std::vector<StagedChunk> send, recv;
  for (int i = 0; i < chunks; ++i) {
    send.push_back({device_src.data() + i * chunk, chunk});
    recv.push_back({device_dst.data() + i * chunk, chunk});
  }
  absl::Status rs;
  absl::Time p0 = absl::Now();
  std::thread receiver([&] { rs = ch[1]->Receive(recv, nullptr); });
  absl::Status ss = ch[0]->Send(send);
  receiver.join();
  const double pipelined_us = absl::ToDoubleMicroseconds(absl::Now() - p0) / chunks;
  RETURN_IF_ERROR(ss);
  RETURN_IF_ERROR(rs);
  if (device_dst != device_src) return absl::DataLossError("staged overlap: data mismatch");
  OverlapResult r;
  r.d2h_us = absl::ToDoubleMicroseconds(ch[0]->last_times().copy) / chunks;
  r.h2d_us = absl::ToDoubleMicroseconds(ch[1]->last_times().copy) / chunks;
  r.net_us = net_us;
  r.pipelined_us = pipelined_us;
  return r;
}

std::string Size(size_t s) {
  if (s >= (size_t{1} << 20)) return absl::StrCat(s >> 20, "M");
  if (s >= 1024) return absl::StrCat(s >> 10, "K");
  return absl::StrCat(s);
}

// One trial's figures for one transport: perftest's and ours (flush and fence ordering), taken
// back to back so that each pair of figures saw the same machine load.
struct Trial {
  std::map<size_t, PerfResult> bw_ref, lat_ref;
  std::map<bool, Result> ours;  // by fence
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Our rank 0 here, rank 1 as a re-executed child: two processes, as perftest has.
absl::StatusOr<Result> RunOurs(const char* self, const Config& cfg) {
  ASSIGN_OR_RETURN(auto hub, TcpBootstrapHub::Start(2));
  pid_t pid = fork();
  if (pid == 0) {
    std::string h = "--hub=" + hub->address(), t = "--tls=" + cfg.tls;
    execl(self, self, "--role=target", h.c_str(), t.c_str(), cfg.fence ? "--fence" : "--flush",
          cfg.quick ? "--quick" : "--full", nullptr);
    _exit(127);
  }
  absl::StatusOr<Result> res = RunRank(0, hub->address(), cfg);
  int status = 0;
  waitpid(pid, &status, 0);
  return res;
}

// Prints one table: medians over trials of ours and perftest's, the ratio of the medians, and the
// spread of the per-trial ratios (each from figures taken back to back).
void PrintTable(const std::vector<Trial>& trials, bool fence, bool bandwidth) {
  std::printf("%-6s %12s %14s %8s %16s\n", "size", bandwidth ? "chunk MB/s" : "chunk us",
              bandwidth ? "perftest MB/s" : "perftest us", "ratio", "trial ratios");
  std::map<size_t, std::vector<double>> ours, ref, ratios;
  for (const Trial& t : trials) {
    auto it = t.ours.find(fence);
    if (it == t.ours.end()) continue;
    const std::map<size_t, double>& mine = bandwidth ? it->second.bw_mbps : it->second.lat_us;
    const std::map<size_t, PerfResult>& theirs = bandwidth ? t.bw_ref : t.lat_ref;
    for (const auto& [size, value] : mine) {
      ours[size].push_back(value);
      auto r = theirs.find(size);
      if (r == theirs.end()) continue;
      // perftest reports MiB/s; ours are MB/s.
      const double reference = bandwidth ? r->second.bw_mib * 1.048576 : r->second.lat_us;
      ref[size].push_back(reference);
      if (reference > 0) ratios[size].push_back(value / reference);
    }
  }
  for (const auto& [size, values] : ours) {
    const double mine = Median(values), theirs = Median(ref[size]);
    const std::vector<double>& rs = ratios[size];
    const std::string spread =
        rs.empty() ? "-"
                   : absl::StrFormat("%.2f-%.2f", *std::min_element(rs.begin(), rs.end()),
                                     *std::max_element(rs.begin(), rs.end()));
    std::printf("%-6s %12.*f %14.*f %8.2f %16s\n", Size(size).c_str(), bandwidth ? 1 : 2, mine,
                bandwidth ? 1 : 2, theirs, theirs > 0 ? mine / theirs : 0.0, spread.c_str());
  }
}

int Driver(const char* self, bool quick, int trials, const std::string& perftest,
           const std::vector<std::string>& transports) {
  char load[128] = {};
  if (FILE* f = fopen("/proc/loadavg", "r")) {
    if (fgets(load, sizeof load, f) == nullptr) load[0] = 0;
    fclose(f);
  }
  std::printf("# ucx_chunk_bench: %ld cores online, loadavg %s", sysconf(_SC_NPROCESSORS_ONLN),
              load);
  std::printf("# chunk = PutWithSignal (data put, then flush|fence, then 8-byte signal put); "
              "window %d for bandwidth\n", kWindow);
  std::printf("# perftest = ucx_perftest ucp_put_bw (overall MB/s, best of -O 1 and -O %d) / "
              "ucp_put_lat (avg usec); warm-up -w iters/4 (min 8) for both\n", kWindow);
  std::printf("# %d trials; each runs perftest, then ours (flush, fence) back to back; figures are "
              "medians over trials, ratio = median ours / median perftest, trial ratios = min-max "
              "of the per-trial ratios\n", trials);
  int port = 20000 + getpid() % 20000;
  for (const std::string& tls : transports) {
    std::vector<Trial> runs;
    for (int trial = 0; trial < trials; ++trial) {
      Trial t;
      for (size_t s : BwSizes(quick)) {
        if (auto r = BestPerftestBandwidth(perftest, tls, s, BwIters(s, quick), port)) {
          t.bw_ref[s] = *r;
        }
      }
      for (size_t s : LatSizes()) {
        if (auto r = RunPerftest(perftest, tls, "ucp_put_lat", s, LatIters(s), port++)) {
          t.lat_ref[s] = *r;
        }
      }
      for (bool fence : {false, true}) {
        absl::StatusOr<Result> res = RunOurs(self, Config{tls, fence, quick});
        if (!res.ok()) {
          std::printf("%s %s trial %d: %s\n", tls.c_str(), fence ? "fence" : "flush", trial,
                      res.status().ToString().c_str());
          continue;
        }
        t.ours[fence] = *std::move(res);
      }
      runs.push_back(std::move(t));
    }
    for (bool fence : {false, true}) {
      std::printf("\n## UCX_TLS=%s, signal ordering %s%s\n", tls.c_str(),
                  fence ? "fence" : "flush",
                  tls == "shm" ? " (error handling NONE: 1.13 shm lacks PEER support)" : "");
      PrintTable(runs, fence, /*bandwidth=*/true);
      PrintTable(runs, fence, /*bandwidth=*/false);
    }
    Config cfg{tls, false, quick};
    const size_t chunk = size_t{1} << 20;
    absl::StatusOr<OverlapResult> ov = RunOverlap(cfg, chunk, quick ? 32 : 96, 4);
    if (!ov.ok()) {
      std::printf("overlap %s: %s\n", tls.c_str(), ov.status().ToString().c_str());
      continue;
    }
    const double slowest = std::max({ov->d2h_us, ov->net_us, ov->h2d_us});
    const double sum = ov->d2h_us + ov->net_us + ov->h2d_us;
    std::printf("\n## staged path over %s, 1M chunks, 4 slots, memcpy as device copies\n",
                tls.c_str());
    std::printf("d2h %.1f us | net %.1f us | h2d %.1f us | pipelined %.1f us/chunk | "
                "slowest/pipelined %.2f | sum/pipelined %.2f\n",
                ov->d2h_us, ov->net_us, ov->h2d_us, ov->pipelined_us, slowest / ov->pipelined_us,
                sum / ov->pipelined_us);
  }
  return 0;
}

int Main(int argc, char** argv) {
  bool quick = false, fence = false, flush = false, full = false;
  int trials = 5;
  std::string tls = "tcp,shm", perftest = "ucx_perftest", role, hub;
  FlagSet flags("ucx_chunk_bench",
                "Chunk bandwidth and latency of UcxTransport against ucx_perftest, and the staged "
                "path's overlap.");
  flags.Bool("quick", &quick, "fewer sizes and iterations; 1 trial unless --trials");
  flags.Int("trials", &trials, "interleaved trials per side, compared by medians", 1)
      .DefaultText("5; 1 with --quick");
  flags.String("tls", &tls, "UCX transports, one table row group each (target: the one)")
      .Metavar("tcp,shm");
  flags.String("perftest", &perftest, "the ucx_perftest binary").Metavar("PATH");
  // The re-executed rank 1 (RunOurs): --role=target --hub=... --tls=... --fence|--flush
  // --quick|--full.
  flags.String("role", &role, "internal: 'target' runs rank 1").Metavar("target");
  flags.String("hub", &hub, "internal (--role=target): bootstrap hub").Metavar("HOST:PORT");
  flags.Bool("fence", &fence, "internal (--role=target): fence ordering");
  flags.Bool("flush", &flush, "internal (--role=target): flush ordering (the default)");
  flags.Bool("full", &full, "internal (--role=target): not --quick");
  flags.ParseOrExit(argc, argv);
  if (role == "target") {
    Config cfg{tls, fence, quick};
    absl::StatusOr<Result> r = RunRank(1, hub, cfg);
    if (!r.ok()) std::fprintf(stderr, "target: %s\n", r.status().ToString().c_str());
    return r.ok() ? 0 : 1;
  }
  if (quick && !flags.WasSet("trials")) trials = 1;
  std::vector<std::string> transports = absl::StrSplit(tls, ',', absl::SkipEmpty());
  return Driver("/proc/self/exe", quick, trials, perftest, transports);
}

}  // namespace
}  // namespace syncopate::ucx

int main(int argc, char** argv) { return syncopate::ucx::Main(argc, argv); }
