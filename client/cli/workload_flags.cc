#include "client/cli/workload_flags.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "jit/compiler/embedded_headers.h"

namespace syncopate::cli {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read '", path, "'"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void AddWorkloadFlags(FlagParser& flags, WorkloadOptions* o) {
  flags.AddString("workload", &o->workload,
                  "built-in workload: ag_gemm (AllGather+GEMM), gemm_rs (GEMM+ReduceScatter), "
                  "ag_rmsnorm (AllGather+RMSNorm)");
  flags.AddInt64("m", &o->m, "workload: rows of A and C (tokens)");
  flags.AddInt64("n", &o->n, "workload: columns of C");
  flags.AddInt64("k", &o->k, "workload: reduction dimension");
  flags.AddInt64("tile-m", &o->tile_m, "workload: tile rows");
  flags.AddInt64("tile-n", &o->tile_n, "workload: tile columns");
  flags.AddString("kernel", &o->kernel_file, "your local kernel source (with --spec)");
  flags.AddString("spec", &o->spec_file, "your kernel spec file (see examples/kernels/*.spec)");
}

absl::StatusOr<Workload> WorkloadFromFlags(const WorkloadOptions& o, plan::DType dtype) {
  Workload w;
  if (!o.spec_file.empty() || !o.kernel_file.empty()) {
    if (o.spec_file.empty() || o.kernel_file.empty()) {
      return absl::InvalidArgumentError("--kernel and --spec go together");
    }
    auto spec_text = ReadFile(o.spec_file, "--spec");
    if (!spec_text.ok()) return spec_text.status();
    auto spec = jit::ParseKernelSpec(*spec_text);
    if (!spec.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--spec ", o.spec_file, ": ", spec.status().message()));
    }
    auto source = ReadFile(o.kernel_file, "--kernel");
    if (!source.ok()) return source.status();
    w.spec = *std::move(spec);
    w.kernel_source = *std::move(source);
    w.kernel_name = o.kernel_file;
    return w;
  }
  if (o.m <= 0 || o.n <= 0 || o.k <= 0) {
    return absl::InvalidArgumentError("--m, --n and --k must be positive");
  }
  if (o.tile_m <= 0 || o.tile_n <= 0) {
    return absl::InvalidArgumentError("--tile-m and --tile-n must be positive");
  }
  std::string kernel;
  if (o.workload == "ag_gemm") {
    w.spec = jit::GemmSpecForAllGather(o.m, o.n, o.k, dtype, o.tile_m, o.tile_n);
    w.default_template = "allgather.push";
    w.default_shape = absl::StrCat(o.m, ",", o.k);
    kernel = "gemm_mma.cuh";
  } else if (o.workload == "gemm_rs") {
    w.spec = jit::GemmSpecForReduceScatter(o.m, o.n, o.k, dtype, o.tile_m, o.tile_n);
    w.default_template = "reducescatter.direct";
    w.default_shape = absl::StrCat(o.m, ",", o.n);
    kernel = "gemm_mma.cuh";
  } else if (o.workload == "ag_rmsnorm") {
    w.spec = jit::RmsNormSpecForAllGather(o.m, o.n, dtype);
    w.default_template = "allgather.push";
    w.default_shape = absl::StrCat(o.m, ",", o.n);
    kernel = "rowwise.cuh";
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--workload: '", o.workload, "' is not ag_gemm, gemm_rs or ag_rmsnorm"));
  }
  auto source = jit::ExampleKernelSource(kernel);
  if (!source.ok()) return source.status();
  w.kernel_source = std::string(*source);
  w.kernel_name = absl::StrCat("examples/kernels/", kernel);
  return w;
}

}  // namespace syncopate::cli
