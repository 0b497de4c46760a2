// See demo_daemon_step.h.
#include "client/cli/demo_daemon_step.h"

#include <chrono>
#include <cstdio>
#include <future>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/kernel_fetch.h"
#include "core/plan_io/plan_proto.h"
#include "jit/build/kernel_build.h"
#include "syncopate/client.h"
#include "syncopate/status_absl.h"

namespace syncopate::cli {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

absl::Status RunThroughDaemon(const plan::Plan& plan, const jit::KernelSpec& spec,
                              std::string_view kernel_source, const std::string& arch,
                              const std::string& cache_dir) {
  EmbeddedOptions embedded;
  embedded.cache_dir = cache_dir;
  embedded.log_level = "error";  // its groups are live when it stops at the end of the step
  Result<Client> client = Client::Embedded(embedded);
  if (!client.ok()) return ToAbsl(client.status(), "starting the embedded daemon");

  Proposal proposal;
  proposal.kernel_hash = absl::StrCat("demo:", spec.name);
  if (!plan_io::ToProto(plan).SerializeToString(&proposal.plan)) {
    return absl::InternalError("serializing the plan");
  }
  const Clock::time_point start = Clock::now();
  const int world = plan.world_size;
  std::vector<std::future<Result<AgreedPlan>>> ranks;
  for (int rank = 0; rank < world; ++rank) {
    ranks.push_back(std::async(std::launch::async, [&, rank]() -> Result<AgreedPlan> {
      JoinOptions join;
      join.job_id = "demo";
      join.world_size = world;
      join.rank = rank;
      join.gpu_arch = arch;
      join.timeout = std::chrono::seconds(60);
      Result<Group> group = client->Join(join);
      if (!group.ok()) return group.status();
      return client->Agree(*group, proposal, std::chrono::seconds(60));
    }));
  }
  std::string agreed_hash;
  for (int rank = 0; rank < world; ++rank) {
    Result<AgreedPlan> agreed = ranks[rank].get();
    if (!agreed.ok()) return ToAbsl(agreed.status(), absl::StrCat("rank ", rank));
    if (rank == 0) agreed_hash = agreed->plan_hash;
    if (agreed->plan_hash != agreed_hash) {
      return absl::InternalError(absl::StrCat("rank ", rank, " agreed on ", agreed->plan_hash,
                                              ", rank 0 on ", agreed_hash));
    }
  }
  if (agreed_hash != plan::PlanHash(plan)) {
    return absl::InternalError(absl::StrCat("the daemon agreed on plan ", agreed_hash,
                                            ", the demo built ", plan::PlanHash(plan)));
  }
  std::printf("  %d rank threads joined and agreed on plan %.16s (step 1's hash) in %.1f ms\n",
              world, agreed_hash.c_str(), MsSince(start));

  // By hash: the daemon holds the plan it agreed on, so the request carries only the kernel.
  CompileRequest request;
  request.kernel.source = std::string(kernel_source);
  request.kernel.spec = jit::FormatKernelSpec(spec);
  request.plan_hash = agreed_hash;
  request.arch = arch;
  const Clock::time_point compile_start = Clock::now();
  Result<CompiledKernel> compiled = client->Compile(request);
  if (!compiled.ok()) return ToAbsl(compiled.status(), "the daemon's compile");
  std::printf("  daemon compile by plan hash: %zu-byte %s, key %.16s, %s, %.1f ms\n",
              compiled->binary.size(), compiled->is_ptx ? "PTX" : "cubin",
              compiled->cache_key.c_str(),
              compiled->cache_hit ? "cache hit (the kernel step 6 built: one key for every "
                                    "builder)"
                                  : "compiled",
              MsSince(compile_start));

  // What a rank's runtime does: generate the kernel itself, take the daemon's binary for it.
  jit::BuildOptions build;
  build.arch = arch;
  build.fetch = DaemonKernelFetcher(*client, request);
  absl::StatusOr<jit::BuiltKernel> built =
      jit::BuildFusedKernel(plan, spec, kernel_source, build);
  if (!built.ok()) return built.status();
  if (!built->fetched) {
    return absl::InternalError(
        absl::StrCat("the runtime's build did not take the daemon's binary: ",
                     built->fetch_error));
  }
  std::printf("  runtime build path: took the daemon's binary for its own key %.16s "
              "(no NVRTC run in the rank)\n",
              built->cache_key.c_str());
  return absl::OkStatus();
}

}  // namespace syncopate::cli
