// GPU tests against a real syncopated: the WorkloadConfig::fetcher that makes each rank load the
// daemon's binary (client/kernel_fetch.h). Made in each rank process, after the fork, so gRPC is
// never started before it; a client that cannot connect becomes a fetcher that says why (and the
// run then fails naming it, since the workload requires a fetched binary).
#pragma once

#if SYNCOPATE_GPU_TEST_WITH_DAEMON
#include <string>
#include <string_view>
#include <vector>

#include "client/kernel_fetch.h"
#include "runtime/cuda/workloads/workloads.h"

namespace syncopate::testing {

// A fetcher that answers every query with `why`: the build then compiles itself and records it.
inline jit::KernelFetcher FailingFetcher(absl::Status why) {
  return [why = std::move(why)](const jit::FetchQuery&) -> absl::StatusOr<jit::FetchedKernel> {
    return why;
  };
}

inline auto DaemonFetcherAt(std::string socket) {
  return [socket = std::move(socket)](const plan::Plan& plan, const jit::KernelSpec& spec,
                                      std::string_view source,
                                      const std::vector<int>& nodes) -> jit::KernelFetcher {
    Result<Client> client = Client::Connect(socket);
    if (!client.ok()) return FailingFetcher(absl::UnavailableError(client.status().ToString()));
    // The group's node map: a rank of a multi-node group needs the kernel for its map.
    absl::StatusOr<CompileRequest> base = CompileRequestFor(&plan, spec, source, nodes);
    if (!base.ok()) return FailingFetcher(base.status());
    return DaemonKernelFetcher(*client, *std::move(base));
  };
}

}  // namespace syncopate::testing
#endif
