// Random template parameters for the property tests of templates and SplitPlan: from a seed, a
// valid TemplateParams for a template name and world size, and a printable description so a
// failing case can be rebuilt. Header-only; used by templates_test.cc and split_test.cc.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/plan/plan.h"
#include "core/plan/templates.h"

namespace syncopate::plan::testing {

inline constexpr int kWorldSizes[] = {1, 2, 3, 4, 7, 8, 16, 64};

struct Case {
  std::string name;
  TemplateParams params;
  uint64_t seed = 0;
};

inline std::string Describe(const Case& c) {
  const TemplateParams& p = c.params;
  std::string splits;
  for (const auto& row : p.splits) absl::StrAppend(&splits, "[", absl::StrJoin(row, ","), "]");
  return absl::StrCat(c.name, " seed=", c.seed, " world=", p.world_size, " shape=[",
                      absl::StrJoin(p.shape, ","), "] dtype=", DTypeName(p.dtype), " axis=", p.axis,
                      " chunks_per_shard=", p.chunks_per_shard, " op=", ReduceOpName(p.op),
                      " ranks_per_node=", p.ranks_per_node, " sub_collectives=", p.sub_collectives,
                      " produced_by_compute=", p.produced_by_compute, " splits=", splits);
}

// A valid parameter set for `name` at `world`, drawn from `seed`. Extents along the axis are
// deliberately not multiples of world * chunks (except where alltoall.uniform needs one), and
// everything stays small so that world 64 simulates quickly.
inline Case RandomCase(const std::string& name, int world, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uniform = [&rng](int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  Case c{name, {}, seed};
  TemplateParams& p = c.params;
  p.world_size = world;
  const bool big = world >= 16;
  const int rank = static_cast<int>(uniform(1, 3));
  p.axis = static_cast<int>(uniform(0, rank - 1));
  p.chunks_per_shard = static_cast<int>(uniform(1, big ? 2 : 8));
  constexpr DType kDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64,
                               DType::kI32, DType::kI64, DType::kI8,   DType::kU8};
  p.dtype = kDTypes[uniform(0, 7)];
  p.op = uniform(0, 1) == 0 ? ReduceOp::kSum : ReduceOp::kMax;
  p.produced_by_compute = name != "allgather.pull" && uniform(0, 1) == 1;
  // ranks_per_node: a random divisor of world.
  std::vector<int> divisors;
  for (int d = 1; d <= world; ++d) {
    if (world % d == 0) divisors.push_back(d);
  }
  p.ranks_per_node = divisors[uniform(0, divisors.size() - 1)];
  p.sub_collectives = name == "allreduce.split" ? static_cast<int>(uniform(1, 3)) : 1;

  p.shape.assign(rank, 0);
  for (int i = 0; i < rank; ++i) p.shape[i] = uniform(1, big ? 2 : 3);
  const int64_t per = static_cast<int64_t>(world) * p.chunks_per_shard;
  if (name == "alltoall.uniform") {
    p.shape[p.axis] = per * uniform(1, 2);
  } else if (name == "alltoall.variable") {
    p.splits.assign(world, std::vector<int64_t>(world, 0));
    int64_t max_row = 1;
    for (auto& row : p.splits) {
      int64_t sum = 0;
      for (int64_t& x : row) {
        x = uniform(0, 3) == 0 ? 0 : uniform(1, 2 * p.chunks_per_shard + 1);
        sum += x;
      }
      max_row = std::max(max_row, sum);
    }
    p.shape[p.axis] = max_row + uniform(0, 2);  // send capacity may exceed every row
  } else {
    // Every shard (of every sub-collective) at least chunks_per_shard long, plus a remainder.
    p.shape[p.axis] = p.sub_collectives * (per * uniform(1, 2) + uniform(0, world - 1)) +
                      uniform(0, p.sub_collectives - 1);
  }
  return c;
}

// Executes the plan sequentially (any channel head whose deps completed), independent of the
// simulator's threads: "" when every transfer runs, else the first stuck channel head.
inline std::string DrainError(const Plan& plan) {
  const std::vector<const Transfer*> by_id = plan.TransfersById();
  std::vector<char> done(by_id.size(), 0);
  std::vector<std::vector<size_t>> cursor(plan.ranks.size());
  for (size_t r = 0; r < plan.ranks.size(); ++r) cursor[r].assign(plan.ranks[r].channels.size(), 0);
  size_t executed = 0;
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t r = 0; r < plan.ranks.size(); ++r) {
      for (size_t c = 0; c < plan.ranks[r].channels.size(); ++c) {
        const std::vector<Transfer>& channel = plan.ranks[r].channels[c];
        while (cursor[r][c] < channel.size()) {
          const Transfer& t = channel[cursor[r][c]];
          bool ready = true;
          for (int dep : t.deps) ready = ready && done[dep];
          if (!ready) break;
          done[t.id] = 1;
          ++cursor[r][c];
          ++executed;
          progress = true;
        }
      }
    }
  }
  if (executed == by_id.size()) return "";
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    for (size_t c = 0; c < plan.ranks[r].channels.size(); ++c) {
      if (cursor[r][c] < plan.ranks[r].channels[c].size()) {
        return absl::StrCat("stuck: rank ", r, " channel ", c, " transfer ",
                            plan.ranks[r].channels[c][cursor[r][c]].id);
      }
    }
  }
  return "stuck";
}

// Small f32 template parameters for the hand-written cases.
inline TemplateParams Params(int world, Shape shape, int chunks = 1) {
  TemplateParams p;
  p.world_size = world;
  p.shape = std::move(shape);
  p.chunks_per_shard = chunks;
  p.dtype = DType::kF32;
  return p;
}

// gtest name for a template-name parameter: "allgather.ring" -> "allgather_ring".
struct TemplateTestName {
  template <class ParamInfo>
  std::string operator()(const ParamInfo& info) const {
    std::string name = info.param;
    for (char& ch : name) {
      if (ch == '.') ch = '_';
    }
    return name;
  }
};

}  // namespace syncopate::plan::testing
