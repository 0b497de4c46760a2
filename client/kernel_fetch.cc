// See kernel_fetch.h.
#include "client/kernel_fetch.h"

#include <utility>

#include "absl/status/status.h"
#include "core/plan_io/plan_proto.h"
#include "syncopate/status_absl.h"

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
    if (query.plan_hash.empty()) {  // the local variant: no plan, so no node map either
      request.plan.clear();
      request.plan_hash.clear();
      request.nodes.clear();
    }
    Result<CompiledKernel> compiled = client.Compile(request);
    if (!compiled.ok()) return ToAbsl(compiled.status(), "daemon compile");
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

absl::StatusOr<CompileRequest> CompileRequestFor(const plan::Plan* plan,
                                                 const jit::KernelSpec& spec,
                                                 std::string_view kernel_source,
                                                 std::vector<int> nodes) {
  CompileRequest request;
  if (plan != nullptr) request.nodes = std::move(nodes);
  request.kernel.source = std::string(kernel_source);
  request.kernel.spec = jit::FormatKernelSpec(spec);
  if (plan != nullptr && !plan_io::ToProto(*plan).SerializeToString(&request.plan)) {
    return absl::InternalError("serializing the plan for the daemon");
  }
  return request;
}

}  // namespace syncopate
