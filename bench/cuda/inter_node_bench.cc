// inter_node_bench: what carrying a fused kernel's inter-node chunks through the host proxy costs.
// Fused AllGather+GEMM with the two-level AllGather plan over 4 rank processes on this GPU, run
// twice in the same invocation: (a) all 4 ranks on one node (every chunk a CUDA IPC copy-engine
// copy), (b) 2 "nodes" x 2 ranks (the chunks between nodes staged device -> host -> UCX tcp ->
// host -> device by InterNodeKernel). Prints ms per launch (launches back to back, the result
// checked after the last) and the ratio b / a. Ranks share one GPU, so these are not NVLink or
// network figures: the ratio shows the proxy's added latency per launch.
//   inter_node_bench [--m 2048 --n 1024 --k 1024 --chunks 2 --launches 200]
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/base/flags.h"
#include "runtime/cuda/workloads/multiprocess.h"
#include "runtime/cuda/workloads/proxy_launcher.h"
#include "runtime/cuda/workloads/workloads.h"

namespace syncopate::workloads {
namespace {

// Times a launcher from its first Launch to the end of a Sync; rank 0 prints the figure.
class TimedLauncher : public Launcher {
 public:
  TimedLauncher(std::unique_ptr<Launcher> inner, cuda::OverlapRuntime* rt, std::string label,
                int launches)
      : inner_(std::move(inner)), rt_(rt), label_(std::move(label)), launches_(launches) {}
  absl::Status Launch(CUstream stream, const cuda::LaunchOptions& options) override {
    if (count_++ == 0) start_ = absl::Now();
    return inner_ ? inner_->Launch(stream, options) : rt_->Launch(*bound_, stream, options);
  }
  absl::Status Sync(CUstream stream) override {
    absl::Status s = inner_ ? inner_->Sync(stream) : rt_->Sync(stream);
    if (s.ok() && count_ == launches_ && rt_->rank() == 0) {
      const double ms = absl::ToDoubleMilliseconds(absl::Now() - start_) / launches_;
      std::printf("%-34s %9.3f ms/launch\n", label_.c_str(), ms);
      std::fflush(stdout);
      std::FILE* f = std::fopen(result_path().c_str(), "a");
      if (f != nullptr) {
        std::fprintf(f, "%.6f\n", ms);
        std::fclose(f);
      }
    }
    return s;
  }
  void set_bound(cuda::BoundKernel* b) { bound_ = b; }
  static std::string result_path() { return "/tmp/syncopate_inter_node_bench.txt"; }

 private:
  std::unique_ptr<Launcher> inner_;
  cuda::OverlapRuntime* rt_;
  cuda::BoundKernel* bound_ = nullptr;
  std::string label_;
  int launches_;
  int count_ = 0;
  absl::Time start_;
};

absl::Status RunCase(bool span_nodes, int64_t m, int64_t n, int64_t k, int chunks, int launches) {
  absl::StatusOr<ucx::ForkedBootstrap> forked = ucx::ForkedBootstrap::Create();
  if (!forked.ok()) return forked.status();
  WorkloadConfig base;
  base.group_id = UniqueGroupId("inb");
  base.world = 4;
  base.ranks_per_node = 2;
  base.span_nodes = span_nodes;
  base.plan_template = "allgather.two_level";
  base.backend = cuda::Backend::kCopyEngine;
  base.chunks = chunks;
  base.m = m, base.n = n, base.k = k;
  base.launches = launches;
  base.check_every = launches;
  base.timeout = absl::Seconds(30);
  const std::string label = span_nodes ? "2 nodes x 2 ranks (UCX proxy)" : "1 node x 4 ranks (IPC)";
  std::vector<absl::Status> results = RunRanks(4, absl::Seconds(400), [&](int r) {
    WorkloadConfig c = base;
    c.rank = r;
    c.launcher = [&](cuda::OverlapRuntime& rt,
                     cuda::BoundKernel& bound) -> absl::StatusOr<std::unique_ptr<Launcher>> {
      std::unique_ptr<Launcher> inner;
      if (span_nodes) {
        ProxyLauncherOptions o;
        o.transfer_timeout = absl::Seconds(30);
        absl::StatusOr<std::unique_ptr<ProxyLauncher>> p =
            ProxyLauncher::Create(rt, bound, *forked, o);
        if (!p.ok()) return p.status();
        inner = *std::move(p);
      }
      auto t = std::make_unique<TimedLauncher>(std::move(inner), &rt, label, launches);
      t->set_bound(&bound);
      return t;
    };
    return RunAllGatherGemm(c);
  });
  for (int r = 0; r < 4; ++r) {
    if (!results[r].ok()) return absl::Status(results[r].code(), absl::StrCat(label, " rank ", r, ": ", results[r].message()));
  }
  return absl::OkStatus();
}

double ReadLast() {
  std::FILE* f = std::fopen(TimedLauncher::result_path().c_str(), "r");
  double v = 0, last = 0;
  if (f == nullptr) return 0;
  while (std::fscanf(f, "%lf", &v) == 1) last = v;
  std::fclose(f);
  return last;
}

int Main(int argc, char** argv) {
  int64_t m = 2048, n = 1024, k = 1024;
  int chunks = 2, launches = 200;
  FlagSet flags("inter_node_bench",
                "Fused AllGather+GEMM over 4 rank processes on one GPU: 1 node vs 2 nodes through "
                "the host proxy.");
  flags.Int("m", &m, "GEMM M", 1);
  flags.Int("n", &n, "GEMM N", 1);
  flags.Int("k", &k, "GEMM K", 1);
  flags.Int("chunks", &chunks, "chunks per shard", 1);
  flags.Int("launches", &launches, "launches back to back per case", 1);
  flags.ParseOrExit(argc, argv);
  std::remove(TimedLauncher::result_path().c_str());
  std::printf("fused AllGather+GEMM, allgather.two_level, bf16 M=%lld N=%lld K=%lld, %d chunks/shard, "
              "%d launches, copy-engine backend, 4 rank processes on one GPU\n",
              static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
              chunks, launches);
  std::fflush(stdout);  // before the rank processes fork, or each prints it again
  absl::Status one = RunCase(false, m, n, k, chunks, launches);
  if (!one.ok()) {
    std::fprintf(stderr, "%s\n", one.ToString().c_str());
    return 1;
  }
  const double a = ReadLast();
  absl::Status two = RunCase(true, m, n, k, chunks, launches);
  if (!two.ok()) {
    std::fprintf(stderr, "%s\n", two.ToString().c_str());
    return 1;
  }
  const double b = ReadLast();
  std::printf("ratio (2 nodes / 1 node): %.2f\n", a > 0 ? b / a : 0.0);
  return 0;
}

}  // namespace
}  // namespace syncopate::workloads

int main(int argc, char** argv) { return syncopate::workloads::Main(argc, argv); }
