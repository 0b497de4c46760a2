// Flags that say which local kernel and kernel spec a command compiles: a built-in workload
// (--workload ag_gemm|gemm_rs|ag_rmsnorm with --m --n --k) over the example kernels, or a user's
// kernel (--kernel FILE --spec FILE). Shared by `syncopate compile` and `syncopate demo`.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "client/cli/flag_parser.h"
#include "client/cli/plan_flags.h"
#include "jit/compiler/kernel_spec.h"

namespace syncopate::cli {

struct WorkloadOptions {
  std::string workload = "ag_gemm";
  int64_t m = 1024;
  int64_t n = 1024;
  int64_t k = 1024;
  int64_t tile_m = 128;
  int64_t tile_n = 128;
  std::string kernel_file;  // with --spec: the user's local kernel source
  std::string spec_file;
};

struct Workload {
  jit::KernelSpec spec;
  std::string kernel_source;
  std::string kernel_name;       // for display
  std::string default_template;  // a plan template that fits the spec
  std::string default_shape;     // that template's --shape, e.g. "1024,1024"
};

// What every command that builds a fused kernel parses: the plan, the workload, the NVRTC target
// and the kernel cache. Each command registers --arch and --cache-dir itself: their help texts
// differ.
struct KernelBuildOptions {
  PlanSourceOptions source;
  WorkloadOptions workload;
  std::string arch = "sm_90";
  std::string cache_dir;
};

void AddWorkloadFlags(FlagParser& flags, WorkloadOptions* options);

// `dtype` is the plan's element type (--dtype), which built-in workloads use for their operands.
absl::StatusOr<Workload> WorkloadFromFlags(const WorkloadOptions& options, plan::DType dtype);

}  // namespace syncopate::cli
