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
#include "tests/server/subprocess.h"
#include "tests/server/test_kernels.h"

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

}  // namespace

int main(int argc, char** argv) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as syncopated does
  int rounds = 2000;
  double seconds = 5;
  std::string syncopated = SYNCOPATED_PATH;
  std::vector<int> client_counts = {16};
  bool compile_only = false;
  syncopate::FlagSet flags("control_plane_bench",
                           "Control-plane benchmark on loopback with real daemons: agreement "
                           "latency, cached Compile\nthroughput, daemon RSS.");
  flags.Int("rounds", &rounds, "agreement rounds (the first 10 warm up)", 1);
  flags.Double("seconds", &seconds, "per Compile throughput measurement", 0);
  flags.String("syncopated", &syncopated, "the daemon binary to measure").Metavar("PATH");
  flags.IntList("clients", &client_counts, "concurrent Compile clients, one row each", 1, 1024);
  flags.Bool("compile_only", &compile_only,
             "one daemon, Compile throughput only (e.g. for an older syncopated)");
  flags.ParseOrExit(argc, argv);
  if (compile_only) rounds = 1;
  if (!compile_only && rounds <= 10) {
    std::fprintf(stderr, "--rounds must be over 10 (the first 10 warm up)\n");
    return 2;
  }
  testing::TempDir dir;
  std::vector<std::unique_ptr<testing::DaemonProcess>> daemons;
  for (int d = 0; d < (compile_only ? 1 : 3); ++d) {
    daemons.push_back(std::make_unique<testing::DaemonProcess>(
        syncopated, dir, "bench" + std::to_string(d),
        std::vector<std::string>{"--log_level=warn", "--cache_dir=" + dir.Path("cache")}));
    if (!daemons.back()->ok()) {
      std::fprintf(stderr, "daemon %d did not start:\n%s\n", d, daemons.back()->Log().c_str());
      return 1;
    }
  }
  const std::string leader = daemons[0]->address();

  // --- 1. Agreement latency -------------------------------------------------------------------
  constexpr int kWorld = 8;
  std::vector<std::vector<Clock::time_point>> sent(kWorld, std::vector<Clock::time_point>(rounds));
  std::vector<std::vector<Clock::time_point>> got(kWorld, std::vector<Clock::time_point>(rounds));
  std::atomic<int> failures{0};
  v1::AgreeResponse sample;
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < kWorld; ++r) {
      threads.emplace_back([&, r] {
        const int d = compile_only ? 0 : r < 3 ? 0 : r < 6 ? 1 : 2;
        auto stub = v1::Rendezvous::NewStub(Channel(daemons[d]->socket()));
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
          failures++;
          return;
        }
        v1::AgreeRequest agree;
        agree.set_group_id(group.group_id());
        agree.set_rank(r);
        agree.set_leader_address(leader);
        *agree.mutable_proposal() = AllGatherProposal(kWorld);
        agree.set_timeout_ms(30000);
        for (int i = 0; i < rounds; ++i) {
          v1::AgreeResponse response;
          grpc::ClientContext actx;
          actx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(40));
          sent[r][i] = Clock::now();
          grpc::Status s = stub->Agree(&actx, agree, &response);
          got[r][i] = Clock::now();
          if (!s.ok()) {
            failures++;
            std::fprintf(stderr, "rank %d round %d: %s\n", r, i, s.error_message().c_str());
            return;
          }
          if (r == 0 && i == 0) sample = response;
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  if (failures > 0) {
    for (auto& d : daemons) {
      const std::string log = d->Log();
      std::fprintf(stderr, "--- daemon log tail:\n%s\n",
                   log.substr(log.size() > 3000 ? log.size() - 3000 : 0).c_str());
    }
    return 1;
  }
  std::printf("syncopated: %s\n", syncopated.c_str());
  std::vector<double> latency;
  for (int i = 10; i < rounds; ++i) {  // the first rounds warm up channels
    Clock::time_point last_sent = sent[0][i], last_got = got[0][i];
    for (int r = 1; r < kWorld; ++r) {
      last_sent = std::max(last_sent, sent[r][i]);
      last_got = std::max(last_got, got[r][i]);
    }
    latency.push_back(Ms(last_got - last_sent));
  }
  std::sort(latency.begin(), latency.end());
  auto pct = [&](double p) { return latency[static_cast<size_t>(p * (latency.size() - 1))]; };

  // --- 2. Cached compile throughput -----------------------------------------------------------
  v1::CompileRequest compile;
  compile.mutable_kernel()->set_source(testing::kTestKernelSource);
  compile.mutable_kernel()->set_spec(testing::kTestKernelSpec);
  *compile.mutable_plan() = sample.plan();
  compile.set_rank(0);
  compile.set_arch("sm_90");
  compile.set_timeout_ms(60000);
  std::string warm_key;
  std::string warm_plan_hash;
  size_t binary_bytes = 0;
  {
    auto stub = v1::Compiler::NewStub(Channel(daemons[0]->socket()));
    v1::CompileResponse response;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    grpc::Status s = stub->Compile(&ctx, compile, &response);
    if (!s.ok()) {
      std::fprintf(stderr, "warm-up compile: %s\n", s.error_message().c_str());
      return 1;
    }
    warm_key = response.cache_key();
    warm_plan_hash = response.kernel().plan_hash();
    binary_bytes = response.kernel().binary().size();
  }
  int clients = client_counts.front();
  // `make_worker(c)` gives client c's call, returning false on failure.
  auto run = [&](const std::function<std::function<bool()>(int)>& make_worker) {
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
            failures++;
            return;
          }
          done.fetch_add(1, std::memory_order_relaxed);
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop = true;
    for (auto& t : threads) t.join();
    return done.load() / std::chrono::duration<double>(Clock::now() - start).count();
  };
  auto rpc_worker = [&](const v1::CompileRequest& request) {
    return [&](int c) -> std::function<bool()> {
      std::shared_ptr<v1::Compiler::Stub> stub =
          v1::Compiler::NewStub(Channel(daemons[0]->socket()));
      return [&, stub] {
        v1::CompileResponse response;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        grpc::Status s = stub->Compile(&ctx, request, &response);
        return s.ok() && response.cache_hit();
      };
    };
  };
  v1::CompileRequest revalidate = compile;
  revalidate.set_known_cache_key(warm_key);
  // The plan named by hash (the daemon kept it from the warm-up request): what a rank sends on
  // every step after the first.
  v1::CompileRequest by_hash = compile;
  by_hash.clear_plan();
  by_hash.set_plan_hash(warm_plan_hash);
  v1::CompileRequest by_hash_revalidate = by_hash;
  by_hash_revalidate.set_known_cache_key(warm_key);
  // The empty RPC: health Check with an empty request (service ""), sent as raw bytes so the
  // bench needs no health stubs. The generic stub is asynchronous: one completion queue per
  // client, waited on at once, which is what the sync stub does inside; the two client paths
  // are close, not identical, so the ratio is a guide to gRPC's share, not an exact one.
  auto health_worker = [&](int c) -> std::function<bool()> {
    auto stub = std::make_shared<grpc::GenericStub>(Channel(daemons[0]->socket()));
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
  struct Rates {
    int clients = 0;
    double rpc = 0, revalidate = 0, by_hash = 0, by_hash_revalidate = 0, empty = 0;
    double local = 0, local_by_hash = 0;  // in-process, as many threads as clients
  };
  std::vector<Rates> rates;
  for (int n : client_counts) {
    clients = n;
    Rates r;
    r.clients = n;
    r.rpc = run(rpc_worker(compile));
    r.revalidate = run(rpc_worker(revalidate));
    r.by_hash = run(rpc_worker(by_hash));
    r.by_hash_revalidate = run(rpc_worker(by_hash_revalidate));
    r.empty = run(health_worker);
    rates.push_back(r);
  }
  const std::string rss = ProcStatus(daemons[0]->process().pid(), "VmRSS");
  const std::string hwm = ProcStatus(daemons[0]->process().pid(), "VmHWM");

  if (!compile_only) {
    server::PlanStore local_plans;
    server::CompileBackend::Options options;
    options.cache_dir = dir.Path("cache");
    options.plans = &local_plans;
    auto backend = server::CompileBackend::Create(options);
    if (!backend.ok()) return 1;
    auto local_worker = [&](const v1::CompileRequest& request) {
      return [&](int c) -> std::function<bool()> {
        return [&] {
          auto outcome = (*backend)->Compile(request, absl::Now() + absl::Seconds(30));
          return outcome.ok() && outcome->cache_hit;
        };
      };
    };
    for (Rates& r : rates) {
      clients = r.clients;
      r.local = run(local_worker(compile));
      r.local_by_hash = run(local_worker(by_hash));  // the line above stored the plan
    }
  }

  std::printf("| metric | value |\n|---|---|\n");
  if (!compile_only) {
    std::printf("| agreement latency, 8 ranks / 3 daemons, p50 | %.3f ms |\n", pct(0.50));
    std::printf("| agreement latency, 8 ranks / 3 daemons, p99 | %.3f ms |\n", pct(0.99));
    std::printf("| agreement rounds measured | %zu |\n", latency.size());
  }
  // Ratios: the RPC against the same request served in-process by the daemon's CompileBackend.
  auto ratio = [&](double rate, double local, const char* of = "") {
    if (compile_only) return std::string();
    char text[64];
    std::snprintf(text, sizeof(text), " (%.3f%s)", rate / local, of);
    return std::string(text);
  };
  for (const Rates& r : rates) {
    std::printf("| cached Compile RPC, %d clients, full plan, cubin in every response (%zu B) | %.0f req/s%s |\n",
                r.clients, binary_bytes, r.rpc, ratio(r.rpc, r.local, " of in-process").c_str());
    std::printf("| cached Compile RPC, %d clients, full plan, known_cache_key (no cubin) | %.0f req/s%s |\n",
                r.clients, r.revalidate, ratio(r.revalidate, r.local).c_str());
    std::printf("| cached Compile RPC, %d clients, plan_hash, cubin in every response | %.0f req/s%s |\n",
                r.clients, r.by_hash, ratio(r.by_hash, r.local_by_hash).c_str());
    std::printf("| cached Compile RPC, %d clients, plan_hash, known_cache_key (no cubin) | %.0f req/s%s |\n",
                r.clients, r.by_hash_revalidate, ratio(r.by_hash_revalidate, r.local_by_hash).c_str());
    std::printf("| empty RPC (grpc.health.v1 Check), %d clients: this machine's gRPC floor | %.0f req/s |\n",
                r.clients, r.empty);
    std::printf("| plan_hash + known_cache_key Compile RPC / empty RPC, %d clients | %.2f |\n",
                r.clients, r.by_hash_revalidate / r.empty);
    if (!compile_only) {
      std::printf("| cached compile in-process (CompileBackend), %d threads, full plan | %.0f req/s |\n",
                  r.clients, r.local);
      std::printf("| cached compile in-process (CompileBackend), %d threads, plan_hash | %.0f req/s |\n",
                  r.clients, r.local_by_hash);
    }
  }
  std::printf("| leader daemon RSS after load (VmRSS / VmHWM) | %s / %s |\n", rss.c_str(),
              hwm.c_str());
  for (size_t d = 1; d < daemons.size(); ++d) {
    std::printf("| daemon %zu RSS (VmRSS) | %s |\n", d,
                ProcStatus(daemons[d]->process().pid(), "VmRSS").c_str());
  }
  return failures > 0 ? 1 : 0;
}
