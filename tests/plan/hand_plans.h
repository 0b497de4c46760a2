// Small hand-written plans for the validator and simulator tests, independent of templates.cc,
// plus helpers to break them. Header-only; each test binary includes it.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "core/plan/plan.h"

namespace syncopate::plan::testing {

inline constexpr int64_t kRowsPerRank = 2;
inline constexpr int64_t kCols = 4;

// Appends `t` to rank t.rank's channel t.channel (creating channels as needed), giving it the next
// id; returns the id.
inline int Add(Plan& plan, Transfer t) {
  t.id = plan.NumTransfers();
  auto& channels = plan.ranks[t.rank].channels;
  if (static_cast<int>(channels.size()) <= t.channel) channels.resize(t.channel + 1);
  channels[t.channel].push_back(t);
  return t.id;
}

inline Region Shard(int world, int s) {
  return Region::Slab({world * kRowsPerRank, kCols}, 0, s * kRowsPerRank, (s + 1) * kRowsPerRank);
}

inline Plan AllGatherBase(int world, std::string name) {
  Plan plan;
  plan.name = std::move(name);
  plan.collective = CollectiveKind::kAllGather;
  plan.world_size = world;
  plan.buffers.push_back(MakeBuffer("data", DType::kF32, {world * kRowsPerRank, kCols}));
  plan.ranks.resize(world);
  for (int r = 0; r < world; ++r) {
    plan.ranks[r].initial["data"] = Shard(world, r);
    for (int s = 0; s < world; ++s) {
      plan.postcondition.push_back(
          {r, "data", Shard(world, s), ReduceOp::kNone, {{s, "data", Shard(world, s)}}});
    }
  }
  return plan;
}

// Direct push allgather: rank r pushes its shard to every peer on channel 0; signal = source rank.
inline Plan DirectAllGather(int world) {
  Plan plan = AllGatherBase(world, "allgather.hand_direct");
  for (int r = 0; r < world; ++r) {
    for (int k = 1; k < world; ++k) {
      const int p = (r + k) % world;
      Transfer t;
      t.kind = TransferKind::kPush;
      t.rank = r;
      t.peer = p;
      t.src_buffer = t.dst_buffer = "data";
      t.src_region = t.dst_region = Shard(world, r);
      t.chunk = r;
      t.step = k - 1;
      t.signal = r;
      Add(plan, t);
    }
  }
  return plan;
}

// Ring allgather: at step k rank r pushes shard (r - k) mod W to r + 1; from step 1 on that
// forwards what arrived at step k - 1 from rank r - 1 (a dependency). Signal = shard index.
inline Plan RingAllGather(int world) {
  Plan plan = AllGatherBase(world, "allgather.hand_ring");
  std::vector<std::vector<int>> id(world, std::vector<int>(world, -1));  // [step][rank]
  for (int k = 0; k + 1 < world; ++k) {
    for (int r = 0; r < world; ++r) {
      const int shard = ((r - k) % world + world) % world;
      Transfer t;
      t.kind = TransferKind::kPush;
      t.rank = r;
      t.peer = (r + 1) % world;
      t.src_buffer = t.dst_buffer = "data";
      t.src_region = t.dst_region = Shard(world, shard);
      t.chunk = shard;
      t.step = k;
      t.signal = shard;
      if (k > 0) t.deps.push_back(id[k - 1][(r - 1 + world) % world]);
      id[k][r] = Add(plan, t);
    }
  }
  return plan;
}

// Direct reduce-scatter: rank r reduces (sum) slab s of "input" into "output" on rank s; the
// pushes into one output race-free because they are all sum reductions into fresh data.
inline Plan DirectReduceScatter(int world) {
  Plan plan;
  plan.name = "reducescatter.hand_direct";
  plan.collective = CollectiveKind::kReduceScatter;
  plan.world_size = world;
  plan.buffers.push_back(MakeBuffer("input", DType::kF32, {world * kRowsPerRank, kCols}));
  plan.buffers.push_back(MakeBuffer("output", DType::kF32, {kRowsPerRank, kCols}));
  plan.ranks.resize(world);
  const Region out = Region::Whole({kRowsPerRank, kCols});
  for (int r = 0; r < world; ++r) {
    plan.ranks[r].initial["input"] = Region::Whole({world * kRowsPerRank, kCols});
    Expectation e{r, "output", out, ReduceOp::kSum, {}};
    for (int s = 0; s < world; ++s) e.sources.push_back({s, "input", Shard(world, r)});
    plan.postcondition.push_back(e);
  }
  for (int r = 0; r < world; ++r) {
    for (int k = 0; k < world; ++k) {
      const int s = (r + k) % world;
      Transfer t;
      t.kind = s == r ? TransferKind::kLocalCopy : TransferKind::kPush;
      t.rank = r;
      t.peer = s;
      t.src_buffer = "input";
      t.src_region = Shard(world, s);
      t.dst_buffer = "output";
      t.dst_region = out;
      t.chunk = s;
      t.reduce = ReduceOp::kSum;
      t.signal = r;
      Add(plan, t);
    }
  }
  return plan;
}

// Mutable access to the transfer with id `id`.
inline Transfer& Find(Plan& plan, int id) {
  for (RankPlan& rp : plan.ranks) {
    for (auto& ch : rp.channels) {
      for (Transfer& t : ch) {
        if (t.id == id) return t;
      }
    }
  }
  static Transfer none;
  return none;
}

// Removes transfer `id`, renumbering later ids and dropping dependencies on it.
inline void Remove(Plan& plan, int id) {
  for (RankPlan& rp : plan.ranks) {
    for (auto& ch : rp.channels) {
      ch.erase(std::remove_if(ch.begin(), ch.end(), [&](const Transfer& t) { return t.id == id; }),
               ch.end());
      for (Transfer& t : ch) {
        if (t.id > id) --t.id;
        t.deps.erase(std::remove(t.deps.begin(), t.deps.end(), id), t.deps.end());
        for (int& d : t.deps) {
          if (d > id) --d;
        }
      }
    }
  }
}

}  // namespace syncopate::plan::testing
