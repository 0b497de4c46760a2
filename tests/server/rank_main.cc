// syncopate_test_rank: one rank of an integration test, as its own process so tests can kill it.
// Connects to a daemon's Unix socket and runs the steps given, printing one line per step:
//   JOIN OK group=<id> members=<n>      | JOIN ERROR code=<CODE> msg=<message>
//   AGREE OK round=<r> plan_hash=<hash> | AGREE ERROR code=<CODE> msg=<message>
//   COMPILE OK cache_hit=<0|1> key=<k>  | COMPILE ERROR code=<CODE> msg=<message>
// Exit 0 when every step succeeded, 1 otherwise, 2 on bad usage.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "syncopate/client.h"

namespace {

std::vector<int64_t> ParseShape(const std::string& text) {
  std::vector<int64_t> shape;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) shape.push_back(std::stoll(part));
  return shape;
}

void Report(const char* step, const syncopate::Status& status) {
  std::printf("%s ERROR code=%s msg=%s\n", step, syncopate::StatusCodeName(status.code()),
              status.message().c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags = {
      {"socket", ""}, {"job", "job"}, {"world", "1"}, {"rank", "0"}, {"leader", ""},
      {"node", ""}, {"timeout_ms", "60000"}, {"steps", "join,agree"},
      {"template", "allgather.ring"}, {"shape", "64,32"}, {"kernel_hash", "k1"},
      {"sleep_before_agree_ms", "0"}, {"rounds", "1"}, {"source", ""}, {"spec", ""},
      {"arch", "sm_90"}};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos ||
        !flags.contains(arg.substr(2, eq - 2))) {
      std::fprintf(stderr, "bad argument %s\n", arg.c_str());
      return 2;
    }
    flags[arg.substr(2, eq - 2)] = arg.substr(eq + 1);
  }
  auto client = syncopate::Client::Connect(flags["socket"]);
  if (!client.ok()) {
    Report("CONNECT", client.status());
    return 1;
  }
  const auto timeout = std::chrono::milliseconds(std::stoll(flags["timeout_ms"]));
  syncopate::JoinOptions join;
  join.job_id = flags["job"];
  join.world_size = std::stoi(flags["world"]);
  join.rank = std::stoi(flags["rank"]);
  join.node_name = flags["node"];
  join.gpu_arch = flags["arch"];
  join.leader_address = flags["leader"];
  join.timeout = timeout;
  auto group = client->Join(join);
  if (!group.ok()) {
    Report("JOIN", group.status());
    return 1;
  }
  std::printf("JOIN OK group=%s members=%zu\n", group->group_id.c_str(), group->members.size());
  std::fflush(stdout);
  if (flags["steps"].find("agree") == std::string::npos) return 0;

  const int64_t sleep_ms = std::stoll(flags["sleep_before_agree_ms"]);
  if (sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  syncopate::Proposal proposal;
  proposal.kernel_hash = flags["kernel_hash"];
  syncopate::TemplateSpec spec;
  spec.name = flags["template"];
  spec.shape = ParseShape(flags["shape"]);
  spec.dtype = "bf16";
  proposal.template_spec = spec;
  std::string plan;
  for (int round = 0; round < std::stoi(flags["rounds"]); ++round) {
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
  if (flags["steps"].find("compile") == std::string::npos) return 0;

  syncopate::CompileRequest compile;
  compile.kernel.source = flags["source"];
  compile.kernel.spec = flags["spec"];
  compile.plan = plan;
  compile.rank = join.rank;
  compile.arch = flags["arch"];
  auto kernel = client->Compile(compile);
  if (!kernel.ok()) {
    Report("COMPILE", kernel.status());
    return 1;
  }
  std::printf("COMPILE OK cache_hit=%d key=%s bytes=%zu\n", kernel->cache_hit ? 1 : 0,
              kernel->cache_key.c_str(), kernel->binary.size());
  return 0;
}
