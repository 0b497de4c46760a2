// The node's daemon as the source of a kernel's cubin for the runtime (jit::KernelFetcher):
// eight ranks on a node then share the daemon's one NVRTC compile and its cache instead of each
// compiling, and a rank loads exactly the binary the daemon built for the agreed plan. The
// runtime still generates the kernel itself (its launch metadata never crosses the wire) and uses
// the daemon's binary only when the daemon's cache key equals its own; otherwise it compiles.
//
//   CompileRequest base;  // as for Client::Compile: kernel source, spec, plan or plan_hash
//   jit::BuildOptions build;
//   build.fetch = DaemonKernelFetcher(client, base);
//   // or: runtime->Compile(plan, spec, source, DaemonKernelFetcher(client, base))
//
// Each query sets the arch the runtime builds for (sm_90a on Hopper), and a query without plan
// hash asks for the local (identity-schedule) variant: the same request without a plan.
// Thread-safety: as Client (safe); the fetcher copies `base`.
#pragma once

#include <chrono>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/plan.h"
#include "jit/build/kernel_build.h"
#include "syncopate/client.h"

namespace syncopate {

// How long a fetch waits for the daemon when `base.timeout` is 0: long enough for the daemon's
// own NVRTC compile of a large kernel (seconds), short of the client's 2-minute RPC default.
inline constexpr std::chrono::milliseconds kDefaultFetchTimeout{20000};

jit::KernelFetcher DaemonKernelFetcher(Client client, CompileRequest base);

// The request for the kernel a builder makes from (plan, spec, local kernel source), which is what
// OverlapRuntime::Compile and the CLI are given: the source, the spec as text, the plan in full,
// and the group's node map (rank -> node; empty for one node: OverlapRuntime::nodes()).
// `plan` nullptr: the local (identity-schedule) kernel, which has no node map.
absl::StatusOr<CompileRequest> CompileRequestFor(const plan::Plan* plan,
                                                 const jit::KernelSpec& spec,
                                                 std::string_view kernel_source,
                                                 std::vector<int> nodes = {});

}  // namespace syncopate
