// The data the multi-process plan tests push through a chunk plan: each rank's initial regions
// hold values derived from (rank, buffer, offset, iteration), everything else garbage; after an
// epoch every element of the rank's postcondition is checked. f32 buffers; values stay exact
// when summed over 64 ranks. Shared by ucx_rank_helper (host buffers) and the GPU test of
// device buffers staged through the executor (tests/cuda/staged_plan_gpu_test.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/plan/plan.h"
#include "core/plan/templates.h"

namespace syncopate::ucx::testing {

// The template parameters of the plans these tests run, so their data fits: f32 buffers of
// [rows, cols] split along rows, summed where the template reduces, `ranks_per_node` a node.
inline plan::TemplateParams PlanParams(int world, int ranks_per_node, int64_t rows, int64_t cols,
                                       int chunks_per_shard) {
  plan::TemplateParams p;
  p.world_size = world;
  p.shape = {rows, cols};
  p.dtype = plan::DType::kF32;
  p.axis = 0;
  p.chunks_per_shard = chunks_per_shard;
  p.op = plan::ReduceOp::kSum;
  p.ranks_per_node = ranks_per_node;
  return p;
}

// A plan buffer's elements on this rank, by name.
using BufferData = std::function<float*(const std::string& buffer)>;

inline float Initial(int rank, const std::string& buffer, int64_t offset, int iter) {
  return static_cast<float>((rank + 1) * 1000 + (offset % 499) + 3 * iter + (buffer.size() % 7));
}
inline float Garbage(int rank, int iter) { return -1.0e6f - static_cast<float>(rank * 100 + iter); }

// Every buffer garbage, then the rank's initial regions.
inline void FillRank(const plan::Plan& p, int rank, int iter, const BufferData& data) {
  for (const plan::BufferSpec& b : p.buffers) {
    float* d = data(b.name);
    std::fill(d, d + b.NumElements(), Garbage(rank, iter));
  }
  for (const auto& [name, region] : p.ranks[rank].initial) {
    float* d = data(name);
    for (int64_t off : region.Offsets(p.FindBuffer(name)->strides)) {
      d[off] = Initial(rank, name, off, iter);
    }
  }
}

// The rank's postcondition, element by element; DataLoss names the first wrong element.
inline absl::Status CheckRank(const plan::Plan& p, int rank, int iter, const BufferData& data) {
  for (const plan::Expectation& e : p.postcondition) {
    if (e.rank != rank) continue;
    const plan::BufferSpec* spec = p.FindBuffer(e.buffer);
    const float* d = data(e.buffer);
    std::vector<int64_t> dst = e.region.Offsets(spec->strides);
    std::vector<std::vector<int64_t>> srcs;
    for (const plan::Contribution& c : e.sources) {
      srcs.push_back(c.region.Offsets(p.FindBuffer(c.buffer)->strides));
    }
    for (size_t k = 0; k < dst.size(); ++k) {
      float expected = 0;
      for (size_t s = 0; s < e.sources.size(); ++s) {
        float v = Initial(e.sources[s].rank, e.sources[s].buffer, srcs[s][k], iter);
        if (s == 0 || e.op == plan::ReduceOp::kNone) {
          expected = v;
        } else if (e.op == plan::ReduceOp::kSum) {
          expected += v;
        } else {
          expected = std::max(expected, v);
        }
      }
      if (d[dst[k]] != expected) {
        return absl::DataLossError(
            absl::StrCat("iteration ", iter, ": rank ", rank, " buffer '", e.buffer, "' element ",
                         dst[k], " is ", d[dst[k]], ", expected ", expected, " (",
                         plan::ReduceOpName(e.op), " over ", e.sources.size(), " source(s))"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace syncopate::ucx::testing
