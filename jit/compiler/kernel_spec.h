// Kernel specs: what the overlap compiler needs to know about a local kernel — its entry
// template, tile grid, and each parameter in call order (operands with the plan buffer they are
// bound to and their per-tile footprint, and scalars). Value types; a text format (key = value
// lines) for spec files; checks against a plan; factories for the example kernels.
// Pure functions; thread-compatible.
//
// Text format (one item per line; '#' starts a comment; blank lines ignored):
//   name = gemm_ag                       informative
//   entry = syncopate_examples::gemm_mma the __device__ template, instantiated as
//                                        entry<Schedule, template_args...>(schedule, params...)
//   template_args = __nv_bfloat16, 128, 128
//   problem_m = 4096                     tiles_m = ceil(problem_m / tile_m), same for n
//   problem_n = 4096
//   tile_m = 128
//   tile_n = 128
//   group_m = 8                          1: row-major tile order; >1: grouped-M swizzle
//   block_threads = 256
//   dynamic_smem_bytes = 61440
//   push_tiles = true                    optional (default false): see KernelSpec::push_tiles
//   operand = A bf16 consumed data 4096x4096 128*m:128 *
//   operand = B bf16 local - 4096x4096 128*n:128 *
//   scalar = M i32 4096
// An operand line is: name dtype role buffer shape footprint-per-axis. role is consumed |
// produced | local; buffer is a plan buffer name or "-"; shape is dims joined by 'x'; each axis's
// footprint is "begin:extent" with begin an affine expression in m and n (e.g. 128*m+64, 0) and
// extent a positive integer, or "*" for the whole axis. Footprints are clipped to the shape, so
// shapes need not be multiples of the tiles.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/plan/plan.h"
#include "core/plan/region.h"

namespace syncopate::jit {

enum class OperandRole : uint8_t {
  kConsumed,  // read by tiles; filled by the plan's incoming transfers (tiles wait for them)
  kProduced,  // written by tiles; the plan's after_compute transfers send it out
  kLocal,     // neither waited for nor published
};
const char* OperandRoleName(OperandRole role);  // "consumed", "produced", "local"

// begin = cm * m + cn * n + c0, for tile coordinates (m, n).
struct AffineExpr {
  int64_t cm = 0;
  int64_t cn = 0;
  int64_t c0 = 0;
  int64_t Eval(int64_t m, int64_t n) const { return cm * m + cn * n + c0; }
  std::string ToString() const;  // "128*m+64", "0"
  friend bool operator==(const AffineExpr&, const AffineExpr&) = default;
};

struct AxisFootprint {
  AffineExpr begin;
  int64_t extent = -1;  // -1: the whole axis (begin ignored)
  bool whole() const { return extent < 0; }
  std::string ToString() const;  // "128*m:128" or "*"
  friend bool operator==(const AxisFootprint&, const AxisFootprint&) = default;
};

struct OperandSpec {
  std::string name;
  plan::DType dtype = plan::DType::kBF16;
  OperandRole role = OperandRole::kLocal;
  std::string buffer;  // plan buffer; empty for an unbound local operand
  plan::Shape shape;
  std::vector<AxisFootprint> footprint;  // one per axis of `shape`

  // The elements tile (m, n) touches, clipped to `shape` (empty box when clipped away).
  plan::Region Footprint(int64_t m, int64_t n) const;
  friend bool operator==(const OperandSpec&, const OperandSpec&) = default;
};

enum class ScalarType : uint8_t { kI32, kI64, kF32 };
const char* ScalarTypeName(ScalarType type);  // "i32", "i64", "f32"

// Scalars are compiled into the generated call as literals.
struct ScalarSpec {
  std::string name;
  ScalarType type = ScalarType::kI32;
  std::string value;  // decimal literal, validated
  friend bool operator==(const ScalarSpec&, const ScalarSpec&) = default;
};

using KernelParam = std::variant<OperandSpec, ScalarSpec>;

struct KernelSpec {
  std::string name;
  std::string entry;
  std::vector<std::string> template_args;
  int64_t problem_m = 0;
  int64_t problem_n = 0;
  int64_t tile_m = 0;
  int64_t tile_n = 0;
  int group_m = 1;
  int block_threads = 256;
  int dynamic_smem_bytes = 0;
  // A schedule choice, not the kernel's: each tile moves its own part of an outgoing chunk as
  // soon as it is written (its reduction or copy into the destination), instead of the chunk
  // leaving whole once its last tile is done. Only where that is exact (lowering.h: "tile
  // parts"); other chunks move as before. The kernel need not know: done()/done_by_group() move
  // the part, after the tile's stores (a kernel that stores asynchronously already completes them
  // where publishes() says so). Off: the generated source is what it was without the field.
  bool push_tiles = false;
  std::vector<KernelParam> params;  // call order

  int64_t tiles_m() const { return tile_m > 0 ? (problem_m + tile_m - 1) / tile_m : 0; }
  int64_t tiles_n() const { return tile_n > 0 ? (problem_n + tile_n - 1) / tile_n : 0; }
  int64_t num_tiles() const { return tiles_m() * tiles_n(); }
  // Operands in call order; an operand's position here is its slot in FusedLaunchArgs::operands.
  std::vector<const OperandSpec*> Operands() const;
  friend bool operator==(const KernelSpec&, const KernelSpec&) = default;
};

// Self-consistency: entry and names are identifiers, sizes positive, footprints match shapes,
// consumed/produced operands are bound to a buffer, at most kMaxOperands operands. Errors name
// the field or the operand.
absl::Status ValidateKernelSpec(const KernelSpec& spec);

// Bound operands against the plan's buffers: the buffer exists, dtype, rank and every dimension
// agree, strides are row-major. E.g. `operand A (consumed, plan buffer "data"): dim 1 is 4096 in
// the spec but 4000 in the plan`.
absl::Status CheckSpecAgainstPlan(const KernelSpec& spec, const plan::Plan& plan);

absl::StatusOr<KernelSpec> ParseKernelSpec(std::string_view text);
std::string FormatKernelSpec(const KernelSpec& spec);  // ParseKernelSpec reads it back

// Example-kernel specs (examples/kernels/gemm_mma.cuh: C[M,N] = A[M,K] * B[N,K]^T).
// AllGather + GEMM: A is the all-gathered plan buffer "data" [M, K] (consumed), B local, C local.
KernelSpec GemmSpecForAllGather(int64_t m, int64_t n, int64_t k, plan::DType dtype,
                                int64_t tile_m = 128, int64_t tile_n = 128);
// GEMM + ReduceScatter: C is the plan buffer "input" [M, N] (produced), A and B local.
KernelSpec GemmSpecForReduceScatter(int64_t m, int64_t n, int64_t k, plan::DType dtype,
                                    int64_t tile_m = 128, int64_t tile_n = 128);
// The Hopper variants (examples/kernels/gemm_wgmma.cuh, sm_90a only): same operands and
// footprints, tile_m x tile_n tiles (tile_m 128; tile_n 128 or 256), `stages` shared-memory
// stages of 64 k each, 384 threads (producer + two consumer warpgroups), one CTA per SM. Three
// stages by default: with four, 128 x 256 tiles leave no room for the epilogue's staging tile.
KernelSpec GemmWgmmaSpecForAllGather(int64_t m, int64_t n, int64_t k, plan::DType dtype,
                                     int64_t tile_m = 128, int64_t tile_n = 256, int stages = 3);
KernelSpec GemmWgmmaSpecForReduceScatter(int64_t m, int64_t n, int64_t k, plan::DType dtype,
                                         int64_t tile_m = 128, int64_t tile_n = 256,
                                         int stages = 3);
// Dynamic shared memory gemm_wgmma needs: stages of (tile_m + tile_n) rows of 128 bytes, 1024
// bytes of alignment slack, 1024 for the mbarriers and tensor-map scratch, plus the epilogue's
// tile_m x tile_n staging tile (16-bit) when the total stays within kHopperMaxDynamicSmem (else
// the kernel stores from registers and needs no staging).
int GemmWgmmaSmemBytes(int64_t tile_m, int64_t tile_n, int stages);
// Hopper's largest shared memory per block (227 KB), static and dynamic together.
inline constexpr int kHopperMaxSmemPerBlock = 232448;
// Static shared memory a fused kernel of gemm_wgmma may use: the kernel's own 1024-aligned
// arrays and the comm CTAs' cursors (impl/comm.cuh) come to 2048 bytes with alignment (a test
// reads the compiled cubin). Before this reserve the 128 x 128 x 6-stage configuration asked for
// 231,424 dynamic bytes: its fused launches would have needed 1,024 more than a block may have.
inline constexpr int kFusedStaticSmemReserve = 2048;
// The dynamic shared memory gemm_wgmma may size itself to: the kernel's kMaxDynamicSmem.
inline constexpr int kHopperMaxDynamicSmem = kHopperMaxSmemPerBlock - kFusedStaticSmemReserve;
// The most stages gemm_wgmma's shared-memory tail holds mbarriers for (its static_assert).
inline constexpr int kWgmmaMaxStages = 31;

// examples/kernels/rowwise.cuh (RMS norm over rows of X [rows, cols] into Y): X consumed from
// the AllGather buffer "data", Y local.
KernelSpec RmsNormSpecForAllGather(int64_t rows, int64_t cols, plan::DType dtype,
                                   int64_t tile_rows = 16);

}  // namespace syncopate::jit
