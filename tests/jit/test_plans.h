// Plans and specs shared by the overlap-compiler tests: template plans for AllGather + GEMM and
// GEMM + ReduceScatter, and a tiny hand-made kernel source for golden files.
#pragma once

#include <string>

#include "core/plan/plan.h"
#include "core/plan/templates.h"
#include "gtest/gtest.h"
#include "jit/compiler/kernel_spec.h"

namespace syncopate::jit::testing {

// The template `name` over a [rows, cols] tensor split along rows: what both plans below share.
inline plan::Plan RowSplitPlan(const std::string& name, int world, int64_t rows, int64_t cols,
                               int chunks, plan::DType dtype) {
  plan::TemplateParams p;
  p.world_size = world;
  p.shape = {rows, cols};
  p.dtype = dtype;
  p.axis = 0;
  p.chunks_per_shard = chunks;
  auto plan = plan::BuildTemplate(name, p);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : plan::Plan{};
}

inline plan::Plan AllGatherPlan(const std::string& algo, int world, int64_t m, int64_t k,
                                int chunks, plan::DType dtype = plan::DType::kBF16) {
  return RowSplitPlan("allgather." + algo, world, m, k, chunks, dtype);
}

inline plan::Plan ReduceScatterPlan(const std::string& algo, int world, int64_t m, int64_t n,
                                    int chunks, plan::DType dtype = plan::DType::kBF16) {
  return RowSplitPlan("reducescatter." + algo, world, m, n, chunks, dtype);
}

// A hand-made plan's frame: `world` ranks of one empty channel each and one f32 buffer "data" of
// `shape`; tests add the transfers.
inline plan::Plan OneBufferPlan(const std::string& name, int world, const plan::Shape& shape) {
  plan::Plan p;
  p.name = name;
  p.world_size = world;
  p.buffers = {plan::MakeBuffer("data", plan::DType::kF32, shape)};
  p.ranks.resize(world);
  for (plan::RankPlan& rp : p.ranks) rp.channels.resize(1);
  return p;
}

// A minimal local kernel for golden files: copies its consumed operand's tile into its output.
inline constexpr char kTinyKernel[] = R"(// tiny_copy.cuh: Y[tile rows] = X[tile rows].
template <class Schedule, class T, int ROWS>
__device__ void tiny_copy(Schedule& s, const T* X, T* Y, int rows, int cols) {
  for (int i = s.first(); i < s.num_tiles(); i += s.stride()) {
    const syncopate::Tile t = s.tile(i);
    if (!s.wait(t)) return;
    for (int e = threadIdx.x; e < ROWS * cols; e += blockDim.x) {
      const int r = t.m * ROWS + e / cols;
      if (r < rows) Y[r * cols + e % cols] = X[r * cols + e % cols];
    }
    s.done(t);
  }
}
)";

inline KernelSpec TinyCopySpec(int64_t rows, int64_t cols, int64_t tile_rows,
                               const std::string& in_buffer, const std::string& out_buffer) {
  KernelSpec s;
  s.name = "tiny_copy";
  s.entry = "tiny_copy";
  s.template_args = {"float", std::to_string(tile_rows)};
  s.problem_m = rows;
  s.problem_n = 1;
  s.tile_m = tile_rows;
  s.tile_n = 1;
  s.block_threads = 128;
  OperandSpec x;
  x.name = "X";
  x.dtype = plan::DType::kF32;
  x.role = in_buffer.empty() ? OperandRole::kLocal : OperandRole::kConsumed;
  x.buffer = in_buffer;
  x.shape = {rows, cols};
  x.footprint = {AxisFootprint{AffineExpr{tile_rows, 0, 0}, tile_rows}, AxisFootprint{}};
  OperandSpec y = x;
  y.name = "Y";
  y.role = out_buffer.empty() ? OperandRole::kLocal : OperandRole::kProduced;
  y.buffer = out_buffer;
  s.params = {x, y, ScalarSpec{"rows", ScalarType::kI32, std::to_string(rows)},
              ScalarSpec{"cols", ScalarType::kI32, std::to_string(cols)}};
  return s;
}

}  // namespace syncopate::jit::testing
