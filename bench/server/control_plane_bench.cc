// Control-plane benchmark on loopback with real daemons:
//   1. plan-agreement latency, 8 ranks over 3 daemons (3 + 3 + 2; ranks on daemons 1 and 2 are
//      forwarded to the leader): per round, from the last rank's proposal to the last rank's
//      answer; p50 / p99 over many rounds.
//   2. cached Compile throughput, 16 concurrent clients (one channel each; --clients=16,64 for
//      several counts) on one daemon's Unix socket, against the same requests served by
//      CompileBackend in-process; each with the plan in full and with the plan named by hash
//      (CompileRequest.plan_hash).
//      The floor of this machine: grpc.health.v1 Check (an empty unary RPC) from the same
//      clients, so the Compile RPC's rate reads against what gRPC itself does here.
//   3. daemon RSS (VmRSS / VmHWM) after the load.
// --compile_only: one daemon, part 2 without the in-process rates (the plan comes from one
// agreement round of the 8 ranks on that daemon), so that the same client code measures any
// syncopated binary (--syncopated=PATH; e.g. an older build, for before/after figures).
// usage: control_plane_bench [--rounds=N] [--seconds=S] [--syncopated=PATH] [--clients=N,M,...]
//                            [--compile_only]
// Goals (DESIGN): agreement p99 < 5 ms; cached compile > 20,000 req/s.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/base/flags.h"
#include "server/compile_backend.h"
#include "server/plan_store.h"
#include "syncopate/v1/service.grpc.pb.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/test_kernels.h"

namespace {

using namespace syncopate;
using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

std::string ProcStatus(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::string value = line.substr(key.size() + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      return value;
    }
  }
  return "?";
}

std::shared_ptr<grpc::Channel> Channel(const std::string& socket) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  // A distinct argument per channel keeps gRPC from sharing one subchannel between "clients".
  static std::atomic<int> salt{0};
  args.SetInt("syncopate.bench_client", salt++);
  return grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), args);
}

v1::Proposal AllGatherProposal(int world) {
  v1::Proposal p;
  p.set_kernel_hash("bench-kernel");
  v1::TemplateRequest* t = p.mutable_template_request();
  t->set_template_name("allgather.ring");
  t->set_world_size(world);
  t->add_shape(64);
  t->add_shape(32);
  t->set_dtype(v1::DTYPE_BF16);
  return p;
}

// The command line; --compile_only sets rounds to 1 (one agreement round makes the plan).
struct Options {
  int rounds = 2000;
  double seconds = 5;
  std::string syncopated = SYNCOPATED_PATH;
  std::vector<int> client_counts = {16};
  bool compile_only = false;
};

// What the phases share: the options, the daemons (stopped before their directory goes) and the
// failure count every client thread adds to.
struct Bench {
  explicit Bench(Options options) : o(std::move(options)) {}
  const Options o;
  testing::TempDir dir;
  std::vector<std::unique_ptr<testing::DaemonProcess>> daemons;
  std::atomic<int> failures{0};
};

// Every rank's send and answer time of every agreement round, and the first answer (its plan is
// what the Compile phase requests).
struct Agreement {
  static constexpr int kWorld = 8;
  explicit Agreement(int rounds)
      : sent(kWorld, std::vector<Clock::time_point>(rounds)),
        got(kWorld, std::vector<Clock::time_point>(rounds)) {}
  std::vector<std::vector<Clock::time_point>> sent, got;
  v1::AgreeResponse sample;
};

// The Compile requests measured: the plan in full or named by hash, each with and without the
// warm-up's cache key.
struct CompileRequests {
  v1::CompileRequest compile, revalidate, by_hash, by_hash_revalidate;
  size_t binary_bytes = 0;  // the cubin in a full response
};

// Phase 2's rates for one client count (requests or calls per second).
struct Rates {
  int clients = 0;
  double rpc = 0, revalidate = 0, by_hash = 0, by_hash_revalidate = 0, empty = 0;
  double local = 0, local_by_hash = 0;  // in-process, as many threads as clients
};

// `make_worker(c)` gives client c's call, returning false on failure.
using WorkerFactory = std::function<std::function<bool()>(int)>;

// Parses the flags into `o`; false (after saying why) where they cannot be run.
bool ParseOptions(int argc, char** argv, Options& o) {
  syncopate::FlagSet flags("control_plane_bench",
                           "Control-plane benchmark on loopback with real daemons: agreement "
                           "latency, cached Compile\nthroughput, daemon RSS.");
  flags.Int("rounds", &o.rounds, "agreement rounds (the first 10 warm up)", 1);
  flags.Double("seconds", &o.seconds, "per Compile throughput measurement", 0);
  flags.String("syncopated", &o.syncopated, "the daemon binary to measure").Metavar("PATH");
  flags.IntList("clients", &o.client_counts, "concurrent Compile clients, one row each", 1, 1024);
  flags.Bool("compile_only", &o.compile_only,
             "one daemon, Compile throughput only (e.g. for an older syncopated)");
  flags.ParseOrExit(argc, argv);
  if (o.compile_only) o.rounds = 1;
  if (!o.compile_only && o.rounds <= 10) {
    std::fprintf(stderr, "--rounds must be over 10 (the first 10 warm up)\n");
    return false;
  }
  return true;
}

// Starts the daemons (3, or 1 under --compile_only); false (with the log) if one does not start.
bool StartDaemons(Bench& b) {
  for (int d = 0; d < (b.o.compile_only ? 1 : 3); ++d) {
    b.daemons.push_back(std::make_unique<testing::DaemonProcess>(
        b.o.syncopated, b.dir, "bench" + std::to_string(d),
        std::vector<std::string>{"--log_level=warn", "--cache_dir=" + b.dir.Path("cache")}));
    if (!b.daemons.back()->ok()) {
      std::fprintf(stderr, "daemon %d did not start:\n%s\n", d, b.daemons.back()->Log().c_str());
      return false;
    }
  }
  return true;
}

// One rank's thread of phase 1: joins the group through its daemon, then times every round.
void RunAgreementRank(Bench& b, int r, Agreement& a) {
  constexpr int kWorld = Agreement::kWorld;
  const std::string leader = b.daemons[0]->address();
  const int d = b.o.compile_only ? 0 : r < 3 ? 0 : r < 6 ? 1 : 2;
  auto stub = v1::Rendezvous::NewStub(Channel(b.daemons[d]->socket()));
  v1::JoinRequest join;
  join.set_job_id("bench");
  join.set_world_size(kWorld);
  join.set_rank(r);
  join.set_leader_address(leader);
  join.set_timeout_ms(30000);
  v1::JoinResponse group;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(40));
  if (!stub->Join(&ctx, join, &group).ok()) {
    b.failures++;
    return;
  }
  v1::AgreeRequest agree;
  agree.set_group_id(group.group_id());
  agree.set_rank(r);
  agree.set_leader_address(leader);
  *agree.mutable_proposal() = AllGatherProposal(kWorld);
  agree.set_timeout_ms(30000);
  for (int i = 0; i < b.o.rounds; ++i) {
    v1::AgreeResponse response;
    grpc::ClientContext actx;
    actx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(40));
    a.sent[r][i] = Clock::now();
    grpc::Status s = stub->Agree(&actx, agree, &response);
    a.got[r][i] = Clock::now();
    if (!s.ok()) {
      b.failures++;
      std::fprintf(stderr, "rank %d round %d: %s\n", r, i, s.error_message().c_str());
      return;
    }
    if (r == 0 && i == 0) a.sample = response;
  }
}

// Phase 1: the 8 ranks' agreement rounds, one thread each.
void RunAgreement(Bench& b, Agreement& a) {
  std::vector<std::thread> threads;
  for (int r = 0; r < Agreement::kWorld; ++r) {
    threads.emplace_back([&, r] { RunAgreementRank(b, r, a); });
  }
  for (auto& t : threads) t.join();
}

// After a failed phase 1: the end of every daemon's log, where the cause is.
void PrintDaemonLogTails(Bench& b) {
  for (auto& d : b.daemons) {
    const std::string log = d->Log();
    std::fprintf(stderr, "--- daemon log tail:\n%s\n",
                 log.substr(log.size() > 3000 ? log.size() - 3000 : 0).c_str());
  }
}

// Each measured round's latency, last proposal to last answer, sorted; warm-up rounds left out.
std::vector<double> SortedLatencies(const Agreement& a, int rounds) {
  std::vector<double> latency;
  for (int i = 10; i < rounds; ++i) {  // the first rounds warm up channels
    Clock::time_point last_sent = a.sent[0][i], last_got = a.got[0][i];
    for (int r = 1; r < Agreement::kWorld; ++r) {
      last_sent = std::max(last_sent, a.sent[r][i]);
      last_got = std::max(last_got, a.got[r][i]);
    }
    latency.push_back(Ms(last_got - last_sent));
  }
  std::sort(latency.begin(), latency.end());
  return latency;
}

// The p-quantile (0..1) of sorted, non-empty values.
double Percentile(const std::vector<double>& sorted, double p) {
  return sorted[static_cast<size_t>(p * (sorted.size() - 1))];
}

// Phase 2's requests, after one Compile that puts the kernel in the daemon's cache (and gives the
// cache key and plan hash the other requests name); false if that compile fails.
bool PrepareCompileRequests(Bench& b, const v1::Plan& plan, CompileRequests& q) {
  v1::CompileRequest& compile = q.compile;
  compile.mutable_kernel()->set_source(testing::kTestKernelSource);
  compile.mutable_kernel()->set_spec(testing::kTestKernelSpec);
  *compile.mutable_plan() = plan;
  compile.set_rank(0);
  compile.set_arch("sm_90");
  compile.set_timeout_ms(60000);
  std::string warm_key;
  std::string warm_plan_hash;
  {
    auto stub = v1::Compiler::NewStub(Channel(b.daemons[0]->socket()));
    v1::CompileResponse response;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    grpc::Status s = stub->Compile(&ctx, compile, &response);
    if (!s.ok()) {
      std::fprintf(stderr, "warm-up compile: %s\n", s.error_message().c_str());
      return false;
    }
    warm_key = response.cache_key();
    warm_plan_hash = response.kernel().plan_hash();
    q.binary_bytes = response.kernel().binary().size();
  }
  q.revalidate = compile;
  q.revalidate.set_known_cache_key(warm_key);
  // The plan named by hash (the daemon kept it from the warm-up request): what a rank sends on
  // every step after the first.
  q.by_hash = compile;
  q.by_hash.clear_plan();
  q.by_hash.set_plan_hash(warm_plan_hash);
  q.by_hash_revalidate = q.by_hash;
  q.by_hash_revalidate.set_known_cache_key(warm_key);
  return true;
}

// Calls per second of `clients` threads, each calling its worker in a loop for --seconds.
double RunClosedLoop(Bench& b, int clients, const WorkerFactory& make_worker) {
  std::atomic<uint64_t> done{0};
  std::atomic<bool> stop{false};
  std::vector<std::function<bool()>> workers;
  for (int c = 0; c < clients; ++c) workers.push_back(make_worker(c));
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      while (!stop.load(std::memory_order_relaxed)) {
        if (!workers[c]()) {
          b.failures++;
          return;
        }
        done.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(b.o.seconds));
  stop = true;
  for (auto& t : threads) t.join();
  return done.load() / std::chrono::duration<double>(Clock::now() - start).count();
}

// A client with its own channel to the leader daemon, sending `request` (a cache hit expected).
WorkerFactory CompileRpcWorker(Bench& b, const v1::CompileRequest& request) {
  return [&](int c) -> std::function<bool()> {
    std::shared_ptr<v1::Compiler::Stub> stub =
        v1::Compiler::NewStub(Channel(b.daemons[0]->socket()));
    return [&, stub] {
      v1::CompileResponse response;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      grpc::Status s = stub->Compile(&ctx, request, &response);
      return s.ok() && response.cache_hit();
    };
  };
}

// The empty RPC: health Check with an empty request (service ""), sent as raw bytes so the
// bench needs no health stubs. The generic stub is asynchronous: one completion queue per
// client, waited on at once, which is what the sync stub does inside; the two client paths
// are close, not identical, so the ratio is a guide to gRPC's share, not an exact one.
WorkerFactory HealthCheckWorker(Bench& b) {
  return [&](int c) -> std::function<bool()> {
    auto stub = std::make_shared<grpc::GenericStub>(Channel(b.daemons[0]->socket()));
    std::shared_ptr<grpc::CompletionQueue> cq(new grpc::CompletionQueue, [](grpc::CompletionQueue* q) {
      q->Shutdown();  // a queue is drained before it is destroyed
      void* tag;
      bool ok;
      while (q->Next(&tag, &ok)) {
      }
      delete q;
    });
    return [stub, cq] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      grpc::Slice empty("");
      grpc::ByteBuffer request(&empty, 1), response;  // a default ByteBuffer is not a valid message
      auto call = stub->PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request, cq.get());
      call->StartCall();
      grpc::Status status;
      call->Finish(&response, &status, reinterpret_cast<void*>(1));
      void* tag = nullptr;
      bool ok = false;
      const bool done = cq->Next(&tag, &ok) && ok && status.ok();
      if (!done) std::fprintf(stderr, "health Check: %s\n", status.error_message().c_str());
      return done;
    };
  };
}

// Phase 2 over the daemon: every request kind, then the empty RPC, per client count.
std::vector<Rates> MeasureRpcRates(Bench& b, const CompileRequests& q) {
  std::vector<Rates> rates;
  for (int n : b.o.client_counts) {
    Rates r;
    r.clients = n;
    r.rpc = RunClosedLoop(b, n, CompileRpcWorker(b, q.compile));
    r.revalidate = RunClosedLoop(b, n, CompileRpcWorker(b, q.revalidate));
    r.by_hash = RunClosedLoop(b, n, CompileRpcWorker(b, q.by_hash));
    r.by_hash_revalidate = RunClosedLoop(b, n, CompileRpcWorker(b, q.by_hash_revalidate));
    r.empty = RunClosedLoop(b, n, HealthCheckWorker(b));
    rates.push_back(r);
  }
  return rates;
}

// Phase 2 in-process: the same requests served by a CompileBackend of this process, the figures
// the RPC rates are read against; false if the backend cannot be created.
bool MeasureLocalRates(Bench& b, const CompileRequests& q, std::vector<Rates>& rates) {
  server::PlanStore local_plans;
  server::CompileBackend::Options options;
  options.cache_dir = b.dir.Path("cache");
  options.plans = &local_plans;
  auto backend = server::CompileBackend::Create(options);
  if (!backend.ok()) return false;
  auto local_worker = [&](const v1::CompileRequest& request) {
    return [&](int c) -> std::function<bool()> {
      return [&] {
        auto outcome = (*backend)->Compile(request, absl::Now() + absl::Seconds(30));
        return outcome.ok() && outcome->cache_hit;
      };
    };
  };
  for (Rates& r : rates) {
    r.local = RunClosedLoop(b, r.clients, local_worker(q.compile));
    // The full-plan requests just above stored the plan that by_hash names.
    r.local_by_hash = RunClosedLoop(b, r.clients, local_worker(q.by_hash));
  }
  return true;
}

// Phase 2's rows for one client count; under --compile_only without the in-process figures.
void PrintRateRows(const Rates& r, size_t binary_bytes, bool compile_only) {
  // Ratios: the RPC against the same request served in-process by the daemon's CompileBackend.
  auto ratio = [&](double rate, double local, const char* of = "") {
    if (compile_only) return std::string();
    char text[64];
    std::snprintf(text, sizeof(text), " (%.3f%s)", rate / local, of);
    return std::string(text);
  };
  std::printf(
      "| cached Compile RPC, %d clients, full plan, cubin in every response (%zu B) | "
      "%.0f req/s%s |\n",
      r.clients, binary_bytes, r.rpc, ratio(r.rpc, r.local, " of in-process").c_str());
  std::printf(
      "| cached Compile RPC, %d clients, full plan, known_cache_key (no cubin) | %.0f req/s%s |\n",
      r.clients, r.revalidate, ratio(r.revalidate, r.local).c_str());
  std::printf(
      "| cached Compile RPC, %d clients, plan_hash, cubin in every response | %.0f req/s%s |\n",
      r.clients, r.by_hash, ratio(r.by_hash, r.local_by_hash).c_str());
  std::printf(
      "| cached Compile RPC, %d clients, plan_hash, known_cache_key (no cubin) | %.0f req/s%s |\n",
      r.clients, r.by_hash_revalidate, ratio(r.by_hash_revalidate, r.local_by_hash).c_str());
  std::printf(
      "| empty RPC (grpc.health.v1 Check), %d clients: this machine's gRPC floor | %.0f req/s |\n",
      r.clients, r.empty);
  std::printf("| plan_hash + known_cache_key Compile RPC / empty RPC, %d clients | %.2f |\n",
              r.clients, r.by_hash_revalidate / r.empty);
  if (!compile_only) {
    std::printf(
        "| cached compile in-process (CompileBackend), %d threads, full plan | %.0f req/s |\n",
        r.clients, r.local);
    std::printf(
        "| cached compile in-process (CompileBackend), %d threads, plan_hash | %.0f req/s |\n",
        r.clients, r.local_by_hash);
  }
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as syncopated does
  Options options;
  if (!ParseOptions(argc, argv, options)) return 2;
  Bench b(std::move(options));
  if (!StartDaemons(b)) return 1;

  // --- 1. Agreement latency -------------------------------------------------------------------
  Agreement agreement(b.o.rounds);
  RunAgreement(b, agreement);
  if (b.failures > 0) {
    PrintDaemonLogTails(b);
    return 1;
  }
  std::printf("syncopated: %s\n", b.o.syncopated.c_str());
  const std::vector<double> latency = SortedLatencies(agreement, b.o.rounds);

  // --- 2. Cached compile throughput -----------------------------------------------------------
  CompileRequests requests;
  if (!PrepareCompileRequests(b, agreement.sample.plan(), requests)) return 1;
  std::vector<Rates> rates = MeasureRpcRates(b, requests);
  const std::string rss = ProcStatus(b.daemons[0]->process().pid(), "VmRSS");
  const std::string hwm = ProcStatus(b.daemons[0]->process().pid(), "VmHWM");
  if (!b.o.compile_only && !MeasureLocalRates(b, requests, rates)) return 1;

  // --- The table, with 3. the daemons' RSS ----------------------------------------------------
  std::printf("| metric | value |\n|---|---|\n");
  if (!b.o.compile_only) {
    std::printf("| agreement latency, 8 ranks / 3 daemons, p50 | %.3f ms |\n",
                Percentile(latency, 0.50));
    std::printf("| agreement latency, 8 ranks / 3 daemons, p99 | %.3f ms |\n",
                Percentile(latency, 0.99));
    std::printf("| agreement rounds measured | %zu |\n", latency.size());
  }
  for (const Rates& r : rates) PrintRateRows(r, requests.binary_bytes, b.o.compile_only);
  std::printf("| leader daemon RSS after load (VmRSS / VmHWM) | %s / %s |\n", rss.c_str(),
              hwm.c_str());
  for (size_t d = 1; d < b.daemons.size(); ++d) {
    std::printf("| daemon %zu RSS (VmRSS) | %s |\n", d,
                ProcStatus(b.daemons[d]->process().pid(), "VmRSS").c_str());
  }
  return b.failures > 0 ? 1 : 0;
}
