// ucx_rank_helper: one rank of a multi-process UCX test. The test driver (process_group.h)
// starts world_size of these with a TCP bootstrap hub address; ranks [n*rpn, (n+1)*rpn) play
// node n. Each builds the named plan template, registers its buffers with a UcxTransport,
// connects, and runs iterations: fill buffers (initial regions with values derived from rank,
// offset and iteration; everything else with garbage), barrier, Execute(epoch = iteration),
// check this rank's postcondition element by element, barrier.
//
// Output, one line each, for the driver: "READY", "ITER <k>" before each Execute, then
// "OK iters=<n>" or "ERROR <status>", then "TEARDOWN <status> in_flight=<n>". Exit code 0 on
// success, 1 on error. SIGUSR1 makes the rank drop its UCX connections (fault injection);
// "DROPPED" is printed when done.
//
// Flags: --hub=host:port --rank=R --world=W --rpn=P --template=NAME --iters=N (0: until error)
//        --tls=tcp|shm --timeout_ms=T --rows=R --cols=C --chunks=K --fence
//        --staged: the plan's buffers live in a second set of host arrays (standing in for GPU
//        memory) and the executor's buffers are staged copies (ExecutorOptions::staging), as
//        with DevicePlanBuffers on a GPU; the fill and the check use the stand-in arrays, the
//        executor's copies are poisoned each iteration.
//        --bootstrap=tcp|daemon: with daemon, instead of --hub the rank joins job --job through
//        the syncopated at --daemon=<socket> (leader --leader=host:port, "" = that daemon) and
//        bootstraps UCX over the daemon's Exchange (client/ucx_bootstrap.h); prints
//        "GROUP <group_id>" once joined. As a job would, it then agrees on the template through
//        the daemons *without* ranks_per_node (the leader derives it from the nodes the ranks
//        joined from: node<rank / rpn>) and takes the node map from the group; prints
//        "NODES <node of rank 0>,<node of rank 1>,...".
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/flags.h"
#include "core/base/status_macros.h"
#include "core/plan/templates.h"
#include "runtime/ucx/plan_executor.h"
#include "runtime/ucx/tcp_bootstrap.h"
#include "runtime/ucx/transport.h"
#include "tests/testing/plan_data.h"
#ifdef SYNCOPATE_HAVE_DAEMON_BOOTSTRAP
#include "absl/strings/str_join.h"
#include "client/ucx_bootstrap.h"
#include "core/plan_io/plan_proto.h"
#include "syncopate/v1/plan.pb.h"
#endif

namespace syncopate::ucx {
namespace {

std::atomic<bool> g_drop{false};
void OnUsr1(int) { g_drop.store(true); }

void Say(const std::string& line) {
  std::string l = line + "\n";
  // One write per line so lines from a dying process are never torn.
  ssize_t n = ::write(STDOUT_FILENO, l.data(), l.size());
  (void)n;
}

struct Flags {
  std::string hub, templ = "allgather.two_level", tls = "tcp";
  std::string bootstrap = "tcp", daemon, leader, job;
  int rank = 0, world = 4, rpn = 2, iters = 3, timeout_ms = 5000, rows = 32, cols = 256,
      chunks = 2;
  bool fence = false;
  bool staged = false;
};

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  FlagSet flags("ucx_rank_helper",
                "One rank of a multi-process UCX test (see the top of rank_helper.cc).");
  flags.String("hub", &f.hub, "TCP bootstrap hub (--bootstrap=tcp)").Metavar("HOST:PORT");
  flags.Int("rank", &f.rank, "this rank", 0);
  flags.Int("world", &f.world, "ranks in the group", 1);
  flags.Int("rpn", &f.rpn, "ranks per node", 1);
  flags.String("template", &f.templ, "plan template").Metavar("NAME");
  flags.Int("iters", &f.iters, "iterations (0: until error)", 0);
  flags.String("tls", &f.tls, "UCX_TLS of the transport").Metavar("tcp|shm");
  flags.Int("timeout_ms", &f.timeout_ms, "every wait's deadline", 1);
  flags.Int("rows", &f.rows, "buffer rows", 1);
  flags.Int("cols", &f.cols, "buffer columns", 1);
  flags.Int("chunks", &f.chunks, "chunks per shard", 1);
  flags.Bool("fence", &f.fence, "order signals with a fence (else a flush)");
  flags.Bool("staged", &f.staged, "the plan's buffers live in stand-in arrays, staged");
  flags.Choice("bootstrap", &f.bootstrap, {"tcp", "daemon"}, "how the ranks find each other");
  flags.String("daemon", &f.daemon, "--bootstrap=daemon: the syncopated's socket").Metavar("PATH");
  flags.String("leader", &f.leader, "--bootstrap=daemon: the leader (\"\": that daemon)")
      .Metavar("HOST:PORT");
  flags.String("job", &f.job, "--bootstrap=daemon: the job to join").Metavar("ID");
  RETURN_IF_ERROR(flags.Parse(argc, argv));
  if (flags.help()) {
    std::fputs(flags.Usage().c_str(), stdout);
    std::exit(0);
  }
  if (f.bootstrap == "daemon") {
    if (f.daemon.empty() || f.job.empty()) {
      return absl::InvalidArgumentError("--bootstrap=daemon needs --daemon and --job");
    }
  } else if (f.hub.empty()) {
    return absl::InvalidArgumentError("--hub is required");
  }
  return f;
}

testing::BufferData HostData(PlanExecutor& ex) {
  return [&ex](const std::string& name) { return static_cast<float*>(ex.buffer(name)); };
}

// --staged: where the plan's buffers "really" live, copied to and from the executor's buffers
// the way DevicePlanBuffers copies GPU memory; exercises the executor's staging on any machine.
class HostStaging : public BufferStaging {
 public:
  explicit HostStaging(const plan::Plan& plan) {
    for (const plan::BufferSpec& b : plan.buffers) real_[b.name].resize(b.NumElements());
  }
  void Attach(PlanExecutor* executor) { executor_ = executor; }
  testing::BufferData Real() {
    return [this](const std::string& name) { return real_.at(name).data(); };
  }
  absl::Status ToHost(const std::string& buffer, const std::vector<ByteRange>& ranges) override {
    return Copy(buffer, ranges, /*to_host=*/true);
  }
  absl::Status ToDevice(const std::string& buffer, const std::vector<ByteRange>& ranges) override {
    return Copy(buffer, ranges, /*to_host=*/false);
  }

 private:
  absl::Status Copy(const std::string& buffer, const std::vector<ByteRange>& ranges,
                    bool to_host) {
    auto it = real_.find(buffer);
    if (it == real_.end() || executor_ == nullptr) {
      return absl::NotFoundError(absl::StrCat("no staged buffer '", buffer, "'"));
    }
    auto* real = reinterpret_cast<char*>(it->second.data());
    auto* host = static_cast<char*>(executor_->buffer(buffer));
    for (const ByteRange& r : ranges) {
      if (r.offset + r.length > it->second.size() * sizeof(float)) {
        return absl::OutOfRangeError(absl::StrCat("range outside staged buffer '", buffer, "'"));
      }
      if (to_host) {
        std::memcpy(host + r.offset, real + r.offset, r.length);
      } else {
        std::memcpy(real + r.offset, host + r.offset, r.length);
      }
    }
    return absl::OkStatus();
  }
  std::map<std::string, std::vector<float>> real_;
  PlanExecutor* executor_ = nullptr;
};

absl::StatusOr<std::unique_ptr<Bootstrap>> MakeBootstrap(const Flags& f, absl::Duration timeout) {
  if (f.bootstrap == "tcp") {
    ASSIGN_OR_RETURN(std::unique_ptr<TcpBootstrap> tcp,
                     TcpBootstrap::Connect(f.hub, f.rank, f.world, absl::Now() + timeout));
    return std::unique_ptr<Bootstrap>(std::move(tcp));
  }
#ifdef SYNCOPATE_HAVE_DAEMON_BOOTSTRAP
  Result<Client> client = Client::Connect(f.daemon);
  if (!client.ok()) return ToAbsl(client.status());
  JoinOptions join;
  join.job_id = f.job;
  join.world_size = f.world;
  join.rank = f.rank;
  join.node_name = absl::StrCat("node", f.rank / f.rpn);
  join.leader_address = f.leader;
  join.timeout = std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout));
  Result<Group> group = client->Join(join);
  if (!group.ok()) return ToAbsl(group.status());
  Say("GROUP " + group->group_id);
  return std::unique_ptr<Bootstrap>(
      std::make_unique<DaemonBootstrap>(std::move(*client), std::move(*group)));
#else
  return absl::UnimplementedError("this helper was built without the daemon bootstrap");
#endif
}

#ifdef SYNCOPATE_HAVE_DAEMON_BOOTSTRAP
// The plan as a job gets it from syncopated: agreed by every rank, ranks_per_node left to the
// leader, which derives it from where the ranks joined.
absl::StatusOr<plan::Plan> AgreeThroughDaemons(const DaemonBootstrap& bootstrap, const Flags& f,
                                               absl::Duration timeout) {
  Proposal proposal;
  proposal.kernel_hash = "ucx-rank-helper";
  TemplateSpec spec;
  spec.name = f.templ;
  spec.shape = {f.rows, f.cols};
  spec.dtype = "f32";
  spec.chunks_per_shard = f.chunks;
  spec.reduce_op = "sum";
  spec.ranks_per_node = 0;
  proposal.template_spec = spec;
  Result<AgreedPlan> agreed = bootstrap.client().Agree(
      bootstrap.group(), proposal, std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
  if (!agreed.ok()) return ToAbsl(agreed.status());
  v1::Plan wire;
  if (!wire.ParseFromString(agreed->plan)) return absl::InternalError("agreed plan does not parse");
  return plan_io::FromProto(wire);
}
#endif

int Main(int argc, char** argv) {
  absl::StatusOr<Flags> flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    Say("ERROR " + flags.status().ToString());
    return 2;
  }
  const Flags& f = *flags;
  signal(SIGUSR1, &OnUsr1);
  const absl::Duration timeout = absl::Milliseconds(f.timeout_ms);

  TransportOptions topts;
  topts.name = absl::StrCat("rank", f.rank);
  topts.ucx_config = {{"TLS", f.tls}};
  if (f.tls == "shm") topts.error_handling = ErrorHandling::kNone;
  if (f.fence) topts.ordering = SignalOrdering::kFence;
  topts.teardown_timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<UcxTransport>> transport = UcxTransport::Create(topts);
  if (!transport.ok()) {
    Say("ERROR " + transport.status().ToString());
    return 1;
  }
  std::unique_ptr<HostStaging> staging;  // --staged; outlives the executor that uses it
  std::unique_ptr<PlanExecutor> executor;
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done.load()) {
      if (g_drop.exchange(false)) {
        (*transport)->DropConnections();
        Say("DROPPED");
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
  });

  int completed = 0;
  absl::Status status = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<Bootstrap> bootstrap, MakeBootstrap(f, timeout * 4));
    const plan::TemplateParams params =
        testing::PlanParams(f.world, f.rpn, f.rows, f.cols, f.chunks);
    plan::Plan plan;
    NodeMap nodes = NodesFromRanksPerNode(f.world, f.rpn);
    if (f.bootstrap == "tcp") {
      ASSIGN_OR_RETURN(plan, plan::BuildTemplate(f.templ, params));
    } else {
#ifdef SYNCOPATE_HAVE_DAEMON_BOOTSTRAP
      const auto& daemon = static_cast<const DaemonBootstrap&>(*bootstrap);
      ASSIGN_OR_RETURN(plan, AgreeThroughDaemons(daemon, f, timeout * 4));
      nodes = NodeMapOf(daemon.group());
      Say("NODES " + absl::StrJoin(nodes, ","));
#endif
    }
    ExecutorOptions eopts;
    eopts.run_intra_node = true;  // no CUDA IPC here: intra-node chunks go over UCX too
    eopts.transfer_timeout = timeout;
    if (f.staged) {
      staging = std::make_unique<HostStaging>(plan);
      eopts.staging = staging.get();
    }
    ASSIGN_OR_RETURN(executor, PlanExecutor::Create(plan, f.rank, nodes, transport->get(), eopts));
    if (staging) staging->Attach(executor.get());
    // What the fill and the check see: the staged buffers' real home, or the executor's own.
    const testing::BufferData data = staging ? staging->Real() : HostData(*executor);
    RETURN_IF_ERROR((*transport)->Connect(*bootstrap, absl::Now() + timeout * 4));
    Say("READY");
    for (int it = 1; f.iters == 0 || it <= f.iters; ++it) {
      testing::FillRank(plan, f.rank, it, data);
      if (staging) {
        // Poison the executor's copies: data that is never staged in or out shows up.
        for (const plan::BufferSpec& b : plan.buffers) {
          auto* host = static_cast<float*>(executor->buffer(b.name));
          std::fill(host, host + b.NumElements(), -7.0e6f);
        }
        RETURN_IF_ERROR(executor->StageIn());  // before the barrier: peers may pull at once
      }
      RETURN_IF_ERROR(bootstrap->Barrier(absl::Now() + timeout));
      Say(absl::StrCat("ITER ", it));
      RETURN_IF_ERROR(executor->Execute(static_cast<uint64_t>(it)));
      RETURN_IF_ERROR(testing::CheckRank(plan, f.rank, it, data));
      completed = it;
      // The executor's epoch contract: nobody refills its buffers for the next epoch (or tears
      // down) while a peer may still pull this epoch's data from them.
      RETURN_IF_ERROR(bootstrap->Barrier(absl::Now() + timeout));
    }
    return absl::OkStatus();
  }();
  if (status.ok()) {
    Say(absl::StrCat("OK iters=", completed));
  } else {
    Say("ERROR " + status.ToString());
  }
  done = true;
  watcher.join();
  executor.reset();
  absl::Status teardown = (*transport)->Shutdown();
  Say(absl::StrCat("TEARDOWN ", teardown.ok() ? "ok" : teardown.ToString(),
                   " in_flight=", (*transport)->in_flight()));
  return status.ok() ? 0 : 1;
}

}  // namespace
}  // namespace syncopate::ucx

int main(int argc, char** argv) { return syncopate::ucx::Main(argc, argv); }
