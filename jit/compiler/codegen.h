// Codegen: a lowered schedule + kernel spec + the local kernel's source -> one CUDA translation
// unit for NVRTC. Deterministic (same inputs, byte-identical output) and meant to be read: a
// header comment says what it was generated from; the tables carry per-rank comments.
//
// Output shape (fused):
//   // header comment: plan name + hash, world size, tile grid, spec, operand slots
//   #include <syncopate/device.cuh>
//   #include <cuda_bf16.h> / <cuda_fp16.h>       (when an operand needs them)
//   <the local kernel's source, verbatim>
//   namespace syncopate_generated { __device__ const tables...; struct Tables {...}; }
//   extern "C" __global__ void __launch_bounds__(<block>) <entry>(syncopate::FusedLaunchArgs args)
//     comm CTAs (blockIdx.x < args.num_comm_ctas) run the transfer program; compute CTAs build
//     FusedSchedule<Tables>(args) and call entry<Schedule, template_args...>(schedule, params...)
// The local variant has no tables and instantiates syncopate::LocalSchedule with the same ABI.
// Pure functions; thread-compatible.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/plan.h"
#include "jit/compiler/kernel_spec.h"
#include "jit/compiler/lowering.h"

namespace syncopate::jit {

// What the runtime needs to launch the kernel.
//   grid  = num_comm_ctas + compute CTAs (any count >= 1; a persistent grid of
//           min(num_tiles, resident CTAs) is best; all CTAs must be co-resident in SM mode)
//   block = block_dim threads (1D); dynamic shared memory = dynamic_smem_bytes (set
//           CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES when above 48 KiB)
//   args  = one syncopate::FusedLaunchArgs by value: operands[slot] per `operands`;
//           signals >= num_signals words, chunk_counters / chunk_ready >= num_outgoing_chunks
//           words (counters zeroed once at allocation); num_comm_ctas = 0 selects copy-engine
//           mode (the host moves every chunk, waiting on chunk_ready for outgoing ones), > 0 SM
//           mode (the kernel moves every chunk; needs peer_signals and peer_operands).
struct LaunchMetadata {
  bool fused = true;
  int block_dim = 0;
  int dynamic_smem_bytes = 0;
  int tiles_m = 0;
  int tiles_n = 0;
  int num_tiles = 0;
  int world_size = 1;
  int num_signals = 0;          // signal words per rank (max over ranks)
  int num_outgoing_chunks = 0;  // chunk_counters / chunk_ready words per rank (max over ranks)
  int num_plan_signals = 0;     // signal words [0, this) are the plan's; guards follow
  // [rank][local chunk] -> plan transfer id (what chunk_ready[c] announces); -1 for a landing
  // guard's counter.
  std::vector<std::vector<int>> outgoing_transfers;
  // [rank] -> guards: plan transfer `transfer` (a reduction into data this rank computes) must
  // not land on this rank before this rank's signal word `signal` reaches the epoch (the kernel
  // sets it when the overlapping tiles are done). Copy-engine mode: the host waits on it too.
  struct Guard {
    int transfer = 0;
    int signal = 0;
  };
  std::vector<std::vector<Guard>> landing_guards;
  // SM mode: comm CTAs so that every non-empty channel has its own CTA (0: nothing to move).
  int suggested_comm_ctas = 0;
  std::vector<OperandSlot> operands;  // by slot
  std::vector<ScalarSpec> scalars;    // compiled in; for display
  std::string plan_hash;              // empty for local kernels
};

struct GeneratedKernel {
  std::string source;
  std::string entry_symbol;
  // NVRTC headers (include name -> content): the device headers. The local kernel's source is
  // pasted into `source`, so nothing else is needed but -I<cuda>/include for cuda_bf16.h.
  std::map<std::string, std::string> headers;
  LaunchMetadata metadata;
};

struct CodegenOptions {
  // Shown in the generated source where the local kernel's text begins.
  std::string kernel_source_name = "kernel.cuh";
  // Rank -> node id, for Lower (see lowering.h): inter-node chunks leave the kernel's tables to
  // the host proxy. Empty (or one node for every rank) keeps the source byte-identical to a
  // build without a map; a map with several nodes is named in the source's header comment and
  // hashed into the entry symbol, so kernels (and cache keys) for different maps never collide.
  // The overload taking a lowered schedule uses the schedule's map; a non-empty `nodes` must
  // equal it.
  std::vector<int> nodes;
};

absl::StatusOr<GeneratedKernel> GenerateFusedKernel(const plan::Plan& plan, const KernelSpec& spec,
                                                    std::string_view kernel_source,
                                                    const CodegenOptions& options = {});
// Same, from an already lowered schedule (Lower(plan, spec, nodes)).
absl::StatusOr<GeneratedKernel> GenerateFusedKernel(const LoweredSchedule& lowered,
                                                    const KernelSpec& spec,
                                                    std::string_view kernel_source,
                                                    const CodegenOptions& options = {});

// The identity-schedule variant: an ordinary local kernel over the spec's tile grid. Operands are
// the spec's (no plan slots); same FusedLaunchArgs ABI with num_comm_ctas = 0.
absl::StatusOr<GeneratedKernel> GenerateLocalKernel(const KernelSpec& spec,
                                                    std::string_view kernel_source,
                                                    const CodegenOptions& options = {});

// The C++ type the generated code uses for a dtype ("__nv_bfloat16", "__half", "float", ...).
const char* DeviceTypeName(plan::DType dtype);

}  // namespace syncopate::jit
