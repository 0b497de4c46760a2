// Every plan template as a two-level plan over 2 "nodes" x 2 ranks (4 rank processes on the one
// GPU), with the plan's buffers in device memory: the UCX plan executor runs on their pinned host
// copies over Debian's host-only UCX (tcp) and DevicePlanBuffers stages them (StageIn: device ->
// host for each rank's initial data before the epoch; host -> device per chunk as it lands). Each iteration fills the
// device buffers (initial data and garbage) and poisons the host copies, so data that is not
// staged shows up; after Execute every element of the rank's postcondition is read back from the
// device and checked. LABEL gpu; skips without a GPU. The ranks are forked (RunRanks) and join a
// TCP bootstrap hub rank 0 runs (runtime/ucx/forked_bootstrap.h).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/plan/templates.h"
#include "gtest/gtest.h"
#include "runtime/cuda/device_plan_buffers.h"
#include "runtime/cuda/workloads/multiprocess.h"
#include "runtime/ucx/forked_bootstrap.h"
#include "runtime/ucx/plan_executor.h"
#include "runtime/ucx/tcp_bootstrap.h"
#include "runtime/ucx/transport.h"
#include "tests/cuda/gpu_test_env.h"
#include "tests/testing/plan_data.h"

namespace syncopate::cuda {
namespace {

constexpr int kWorld = 4;
constexpr int kRanksPerNode = 2;
constexpr int kIterations = 3;
constexpr absl::Duration kTimeout = absl::Seconds(60);

// Host images of every plan buffer of `rank` for one iteration (ucx::testing's data), copied to
// the device; the host copies the executor runs on get a different garbage.
absl::Status FillDevice(const plan::Plan& plan, int rank, int iter, DevicePlanBuffers& buffers,
                        const DriverApi& api) {
  std::map<std::string, std::vector<float>> images;
  for (const plan::BufferSpec& b : plan.buffers) images[b.name].resize(b.NumElements());
  ucx::testing::FillRank(plan, rank, iter,
                         [&](const std::string& name) { return images.at(name).data(); });
  const std::map<std::string, void*> hosts = buffers.host_buffers();
  for (const auto& [name, image] : images) {
    CU_RETURN_IF_ERROR(api.cuMemcpyHtoD(buffers.device(name), image.data(), image.size() * 4));
    auto* host = static_cast<float*>(hosts.at(name));
    std::fill(host, host + image.size(), -7.0e6f);
  }
  return absl::OkStatus();
}

absl::Status CheckDevice(const plan::Plan& plan, int rank, int iter, DevicePlanBuffers& buffers,
                         const DriverApi& api) {
  std::map<std::string, std::vector<float>> images;
  for (const plan::BufferSpec& b : plan.buffers) {
    std::vector<float>& image = images[b.name];
    image.resize(b.NumElements());
    CU_RETURN_IF_ERROR(api.cuMemcpyDtoH(image.data(), buffers.device(b.name), image.size() * 4));
  }
  return ucx::testing::CheckRank(plan, rank, iter,
                                 [&](const std::string& name) { return images.at(name).data(); });
}

absl::Status Rank(int rank, const std::string& templ, const ucx::ForkedBootstrap& forked) {
  ucx::TransportOptions topts;
  topts.name = absl::StrCat("staged_plan", rank);
  topts.ucx_config = {{"TLS", "tcp"}};
  ASSIGN_OR_RETURN(std::unique_ptr<ucx::UcxTransport> transport,
                   ucx::UcxTransport::Create(topts));
  ASSIGN_OR_RETURN(Context ctx, Context::Retain(0));
  ASSIGN_OR_RETURN(
      plan::Plan plan,
      plan::BuildTemplate(templ, ucx::testing::PlanParams(kWorld, kRanksPerNode, 48, 96, 2)));
  ASSIGN_OR_RETURN(std::unique_ptr<DevicePlanBuffers> buffers,
                   DevicePlanBuffers::Create(ctx, plan));
  ucx::ExecutorOptions eopts;
  eopts.run_intra_node = true;  // no CUDA IPC backend here: intra-node chunks go over UCX too
  eopts.transfer_timeout = kTimeout;
  eopts.staging = buffers.get();
  ASSIGN_OR_RETURN(
      std::unique_ptr<ucx::PlanExecutor> executor,
      ucx::PlanExecutor::Create(plan, rank, ucx::NodesFromRanksPerNode(kWorld, kRanksPerNode),
                                transport.get(), eopts, buffers->host_buffers()));
  std::unique_ptr<ucx::TcpBootstrapHub> hub;  // rank 0 only; outlives the bootstrap
  ASSIGN_OR_RETURN(std::unique_ptr<ucx::TcpBootstrap> bootstrap,
                   forked.Join(rank, kWorld, absl::Now() + kTimeout, hub));
  RETURN_IF_ERROR(transport->Connect(*bootstrap, absl::Now() + kTimeout));
  absl::Status status = [&]() -> absl::Status {
    for (int iter = 1; iter <= kIterations; ++iter) {
      RETURN_IF_ERROR(FillDevice(plan, rank, iter, *buffers, ctx.api()));
      RETURN_IF_ERROR(executor->StageIn());  // before the barrier: peers may pull at once
      RETURN_IF_ERROR(bootstrap->Barrier(absl::Now() + kTimeout));
      RETURN_IF_ERROR(executor->Execute(static_cast<uint64_t>(iter)));
      RETURN_IF_ERROR(CheckDevice(plan, rank, iter, *buffers, ctx.api()));
      // Nobody refills for the next epoch while a peer may still pull this one's data.
      RETURN_IF_ERROR(bootstrap->Barrier(absl::Now() + kTimeout));
    }
    return absl::OkStatus();
  }();
  executor.reset();
  absl::Status down = transport->Shutdown();
  // Nobody exits while another still closes its endpoints.
  absl::Status all_down = bootstrap->Barrier(absl::Now() + kTimeout);
  if (!status.ok()) return status;
  return down.ok() ? all_down : down;
}

class StagedPlanGpuTest : public ::testing::TestWithParam<std::string> {};

TEST_P(StagedPlanGpuTest, DeviceBuffersHoldThePostconditionEveryIteration) {
  SYNCOPATE_REQUIRE_GPU();
  absl::StatusOr<ucx::ForkedBootstrap> forked = ucx::ForkedBootstrap::Create();
  ASSERT_TRUE(forked.ok()) << forked.status();
  const std::string templ = GetParam();
  std::vector<absl::Status> results = workloads::RunRanks(
      kWorld, absl::Seconds(240), [&](int r) { return Rank(r, templ, *forked); });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(results[r].ok()) << templ << " rank " << r << ": " << results[r];
  }
}

INSTANTIATE_TEST_SUITE_P(Templates, StagedPlanGpuTest, ::testing::ValuesIn(plan::TemplateNames()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '.') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace syncopate::cuda
