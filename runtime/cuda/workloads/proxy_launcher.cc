// The workloads' launcher for groups spanning nodes; see proxy_launcher.h.
#include "runtime/cuda/workloads/proxy_launcher.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace syncopate::workloads {

absl::StatusOr<std::unique_ptr<ProxyLauncher>> ProxyLauncher::Create(
    cuda::OverlapRuntime& rt, cuda::BoundKernel& bound, const ucx::ForkedBootstrap& forked,
    const ProxyLauncherOptions& options) {
  auto l = std::unique_ptr<ProxyLauncher>(new ProxyLauncher);
  l->options_ = options;
  ASSIGN_OR_RETURN(l->bootstrap_, forked.Join(rt.rank(), rt.world_size(),
                                              absl::Now() + options.bootstrap_timeout, l->hub_));
  cuda::InterNodeOptions o;
  o.transport.name = absl::StrCat("internode", rt.rank());
  o.transport.ucx_config = options.ucx_config;
  o.transfer_timeout = options.transfer_timeout;
  ASSIGN_OR_RETURN(l->kernel_, cuda::InterNodeKernel::Create(rt, bound, *l->bootstrap_, o));
  return l;
}

ProxyLauncher::~ProxyLauncher() {
  if (kernel_ == nullptr) return;
  if (failed_) {
    (void)kernel_->Shutdown();
    return;
  }
  (void)bootstrap_->Barrier(absl::Now() + options_.bootstrap_timeout);
  (void)kernel_->Shutdown();
  (void)bootstrap_->Barrier(absl::Now() + options_.bootstrap_timeout);
}

absl::Status ProxyLauncher::Note(absl::Status s) {
  failed_ |= !s.ok();
  return s;
}

absl::Status ProxyLauncher::Launch(CUstream stream, const cuda::LaunchOptions& options) {
  if (launches_++ == options_.die_at_launch) _exit(3);
  return Note(kernel_->Launch(stream, options));
}

absl::Status ProxyLauncher::Sync(CUstream stream) { return Note(kernel_->Sync(stream)); }

}  // namespace syncopate::workloads
