// CompileBackend for builds without the overlap compiler (jit/compiler): every compile is
// Unimplemented, while rendezvous and agreement work as usual. See compile_backend.h.
#include "server/compile_backend.h"

namespace syncopate::server {

absl::StatusOr<std::unique_ptr<CompileBackend>> CompileBackend::Create(const Options& options) {
  return absl::UnimplementedError("this build has no overlap compiler (jit/compiler)");
}

absl::StatusOr<CompileOutcome> CompileBackend::Compile(const v1::CompileRequest& request,
                                                       absl::Time deadline) {
  return absl::UnimplementedError("this build has no overlap compiler (jit/compiler)");
}

std::optional<CompileOutcome> CompileBackend::CompileIfServedBefore(
    const v1::CompileRequest& request) {
  return std::nullopt;
}

}  // namespace syncopate::server
