// ProxyLauncher: the workloads' Launcher (workloads.h) for a group spanning nodes. It runs the
// bound kernel through InterNodeKernel (runtime/cuda/inter_node_kernel.h) over a UCX transport
// that the rank processes bootstrap through a TCP hub rank 0 runs (ucx::ForkedBootstrap), and
// tears down in step with its peers. Shared by the inter-node GPU test and benchmark.
// Thread-safety: one rank process, one thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/cuda/inter_node_kernel.h"
#include "runtime/cuda/workloads/workloads.h"
#include "runtime/ucx/forked_bootstrap.h"
#include "runtime/ucx/tcp_bootstrap.h"

namespace syncopate::workloads {

struct ProxyLauncherOptions {
  absl::Duration transfer_timeout = absl::Seconds(10);
  absl::Duration bootstrap_timeout = absl::Seconds(60);
  std::vector<std::pair<std::string, std::string>> ucx_config = {{"TLS", "tcp"}};
  int die_at_launch = -1;  // fault injection: the process exits at this launch
};

class ProxyLauncher : public Launcher {
 public:
  // Collective over every rank of every node.
  static absl::StatusOr<std::unique_ptr<ProxyLauncher>> Create(
      cuda::OverlapRuntime& rt, cuda::BoundKernel& bound, const ucx::ForkedBootstrap& forked,
      const ProxyLauncherOptions& options);
  // After a clean run: a barrier (nobody closes endpoints while a peer may still run its last
  // epoch), shutdown, a barrier (nobody exits while a peer still closes its endpoints). After a
  // failed launch or sync only the shutdown: the peers are failing too.
  ~ProxyLauncher() override;

  absl::Status Launch(CUstream stream, const cuda::LaunchOptions& options) override;
  absl::Status Sync(CUstream stream) override;
  const cuda::InterNodeKernel& kernel() const { return *kernel_; }

 private:
  ProxyLauncher() = default;
  absl::Status Note(absl::Status s);

  ProxyLauncherOptions options_;
  std::unique_ptr<ucx::TcpBootstrapHub> hub_;  // rank 0 only; outlives the bootstrap
  std::unique_ptr<ucx::TcpBootstrap> bootstrap_;
  std::unique_ptr<cuda::InterNodeKernel> kernel_;
  int launches_ = 0;
  bool failed_ = false;
};

}  // namespace syncopate::workloads
