// syncopate_test_rank: one rank of an integration test, as its own process so tests can kill it.
// Connects to a daemon's Unix socket and runs the steps given, printing one line per step:
//   JOIN OK group=<id> members=<n>      | JOIN ERROR code=<CODE> msg=<message>
//   AGREE OK round=<r> plan_hash=<hash> | AGREE ERROR code=<CODE> msg=<message>
//   COMPILE OK cache_hit=<0|1> key=<k>  | COMPILE ERROR code=<CODE> msg=<message>
// Exit 0 when every step succeeded, 1 otherwise, 2 on bad usage (flags: --help).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "core/base/flags.h"
#include "syncopate/client.h"

namespace {

void Report(const char* step, const syncopate::Status& status) {
  std::printf("%s ERROR code=%s msg=%s\n", step, syncopate::StatusCodeName(status.code()),
              status.message().c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  // No ranges: tests may hand the daemon values it has to refuse.
  std::string socket, job = "job", leader, node, steps = "join,agree", templ = "allgather.ring",
                      kernel_hash = "k1", source, spec_text, arch = "sm_90";
  int world = 1, rank = 0, rounds = 1;
  int64_t timeout_ms = 60000, sleep_ms = 0;
  std::vector<int64_t> shape = {64, 32};
  syncopate::FlagSet flags("syncopate_test_rank", "One rank of an integration test.");
  flags.String("socket", &socket, "the daemon's Unix socket").Metavar("PATH");
  flags.String("job", &job, "job id");
  flags.Int("world", &world, "world size");
  flags.Int("rank", &rank, "this rank");
  flags.String("leader", &leader, "leader daemon address").Metavar("HOST:PORT");
  flags.String("node", &node, "node name");
  flags.Int("timeout_ms", &timeout_ms, "Join / Agree deadline");
  flags.String("steps", &steps, "join[,agree[,compile]]");
  flags.String("template", &templ, "plan template").Metavar("NAME");
  flags.IntList("shape", &shape, "template shape");
  flags.String("kernel_hash", &kernel_hash, "the proposal's kernel hash");
  flags.Int("sleep_before_agree_ms", &sleep_ms, "pause between Join and Agree");
  flags.Int("rounds", &rounds, "Agree rounds");
  flags.String("source", &source, "compile: kernel source");
  flags.String("spec", &spec_text, "compile: kernel spec");
  flags.String("arch", &arch, "GPU arch (Join and Compile)");
  flags.ParseOrExit(argc, argv);
  auto client = syncopate::Client::Connect(socket);
  if (!client.ok()) {
    Report("CONNECT", client.status());
    return 1;
  }
  const auto timeout = std::chrono::milliseconds(timeout_ms);
  syncopate::JoinOptions join;
  join.job_id = job;
  join.world_size = world;
  join.rank = rank;
  join.node_name = node;
  join.gpu_arch = arch;
  join.leader_address = leader;
  join.timeout = timeout;
  auto group = client->Join(join);
  if (!group.ok()) {
    Report("JOIN", group.status());
    return 1;
  }
  std::printf("JOIN OK group=%s members=%zu\n", group->group_id.c_str(), group->members.size());
  std::fflush(stdout);
  if (steps.find("agree") == std::string::npos) return 0;

  if (sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  syncopate::Proposal proposal;
  proposal.kernel_hash = kernel_hash;
  syncopate::TemplateSpec spec;
  spec.name = templ;
  spec.shape = shape;
  spec.dtype = "bf16";
  proposal.template_spec = spec;
  std::string plan;
  for (int round = 0; round < rounds; ++round) {
    auto agreed = client->Agree(*group, proposal, timeout);
    if (!agreed.ok()) {
      Report("AGREE", agreed.status());
      return 1;
    }
    std::printf("AGREE OK round=%llu plan_hash=%s\n",
                static_cast<unsigned long long>(agreed->round), agreed->plan_hash.c_str());
    std::fflush(stdout);
    plan = agreed->plan;
  }
  if (steps.find("compile") == std::string::npos) return 0;

  syncopate::CompileRequest compile;
  compile.kernel.source = source;
  compile.kernel.spec = spec_text;
  compile.plan = plan;
  compile.rank = join.rank;
  compile.arch = arch;
  auto kernel = client->Compile(compile);
  if (!kernel.ok()) {
    Report("COMPILE", kernel.status());
    return 1;
  }
  std::printf("COMPILE OK cache_hit=%d key=%s bytes=%zu\n", kernel->cache_hit ? 1 : 0,
              kernel->cache_key.c_str(), kernel->binary.size());
  return 0;
}
