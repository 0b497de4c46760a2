// See kernel_fetch.h.
#include "client/kernel_fetch.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace syncopate {

jit::KernelFetcher DaemonKernelFetcher(Client client, CompileRequest base) {
  return [client = std::move(client),
          base = std::move(base)](const jit::FetchQuery& query) -> absl::StatusOr<jit::FetchedKernel> {
    CompileRequest request = base;
    request.arch = query.arch;
    request.known_cache_key.clear();  // the binary is what is wanted
    // A wedged daemon must not hold a rank's build for the client's general RPC timeout (2
    // minutes): past this, NVRTC compiles here.
    if (request.timeout.count() <= 0) request.timeout = kDefaultFetchTimeout;
    if (query.plan_hash.empty()) {
      request.plan.clear();
      request.plan_hash.clear();
    }
    Result<CompiledKernel> compiled = client.Compile(request);
    if (!compiled.ok()) {
      // The client's codes are gRPC's, as absl's are.
      return absl::Status(static_cast<absl::StatusCode>(compiled.status().code()),
                          absl::StrCat("daemon compile: ", compiled.status().message()));
    }
    jit::FetchedKernel fetched;
    fetched.cache_key = compiled->cache_key;
    fetched.kernel.binary = std::move(compiled->binary);
    fetched.kernel.is_ptx = compiled->is_ptx;
    fetched.kernel.target = std::move(compiled->target);
    fetched.kernel.log = std::move(compiled->log);
    fetched.kernel.nvrtc_version = std::move(compiled->nvrtc_version);
    return fetched;
  };
}

}  // namespace syncopate
