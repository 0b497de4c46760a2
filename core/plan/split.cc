// SplitPlan: re-chunks any plan by cutting every transfer into n pieces of near-equal element count
// (Region::SplitElements on source and destination, which cut by element order, so piece i of the
// source maps onto piece i of the destination).
//
// Conventions of the result:
// - Piece i of transfer t (empty pieces dropped; a transfer with no elements keeps one empty piece
//   so that dependencies through it survive) keeps t's kind, ranks, channel (pieces consecutive,
//   in piece order, where t was), step, reduce op and after_compute; chunk = t.chunk * n + i.
// - Dependencies: when dependency d wrote exactly the region t reads (same rank, buffer and
//   region: a ring forward, an AllGather gated on its ReduceScatter), piece i of t depends on
//   piece i of d only — they cover the same elements. Otherwise piece i depends on every piece of
//   d. Either way the waiting rank observes the same transfers as before.
// - Ids are dense in (old id, piece) order; signals are renumbered per destination rank in new id
//   order; name gets ".split<n>". Buffers, initial regions and the postcondition are unchanged.
// Stateless; safe to call from any thread.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/plan/templates.h"

namespace syncopate::plan {
namespace {

struct Pieces {
  std::vector<Region> src;
  std::vector<Region> dst;
  std::vector<int> new_id;  // per piece index 0..n-1; -1 when dropped
};

// True when piece i of `dep`'s destination is element for element piece i of `t`'s source.
bool Aligned(const Transfer& dep, const Transfer& t) {
  return dep.dst_rank() == t.src_rank() && dep.dst_buffer == t.src_buffer &&
         dep.dst_region == t.src_region;
}

absl::StatusOr<std::vector<Pieces>> CutTransfers(const std::vector<const Transfer*>& by_id, int n) {
  std::vector<Pieces> pieces(by_id.size());
  int next_id = 0;
  for (size_t id = 0; id < by_id.size(); ++id) {
    const Transfer& t = *by_id[id];
    if (t.src_region.NumElements() != t.dst_region.NumElements()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "transfer %d (rank %d, chunk %d): source has %d elements, destination %d", t.id, t.rank,
          t.chunk, t.src_region.NumElements(), t.dst_region.NumElements()));
    }
    Pieces& p = pieces[id];
    p.src = t.src_region.SplitElements(n);
    p.dst = t.dst_region.SplitElements(n);
    p.new_id.assign(n, -1);
    for (int i = 0; i < n; ++i) {
      if (!p.src[i].empty() || (i == 0 && t.src_region.empty())) p.new_id[i] = next_id++;
    }
  }
  return pieces;
}

}  // namespace

absl::StatusOr<Plan> SplitPlan(const Plan& plan, int n) {
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("split n ", n, " must be >= 1"));
  const std::vector<const Transfer*> by_id = plan.TransfersById();
  for (size_t id = 0; id < by_id.size(); ++id) {
    if (by_id[id] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("transfer ids are not dense: id ", id, " missing"));
    }
    for (int dep : by_id[id]->deps) {
      if (dep < 0 || dep >= static_cast<int>(by_id.size())) {
        return absl::InvalidArgumentError(
            absl::StrFormat("transfer %d depends on unknown transfer %d", id, dep));
      }
    }
  }
  absl::StatusOr<std::vector<Pieces>> cut = CutTransfers(by_id, n);
  if (!cut.ok()) return cut.status();
  const std::vector<Pieces>& pieces = *cut;

  // Pieces in new-id order, with deps remapped and signals renumbered.
  std::vector<Transfer> made;
  std::vector<int> next_signal(plan.world_size, 0);
  for (size_t id = 0; id < by_id.size(); ++id) {
    const Transfer& t = *by_id[id];
    for (int i = 0; i < n; ++i) {
      const int new_id = pieces[id].new_id[i];
      if (new_id < 0) continue;
      Transfer piece = t;
      piece.id = new_id;
      piece.src_region = pieces[id].src[i];
      piece.dst_region = pieces[id].dst[i];
      piece.chunk = t.chunk * n + i;
      piece.signal = next_signal[t.dst_rank()]++;
      piece.deps.clear();
      for (int dep : t.deps) {
        const std::vector<int>& dep_ids = pieces[dep].new_id;
        if (Aligned(*by_id[dep], t) && dep_ids[i] >= 0) {
          piece.deps.push_back(dep_ids[i]);
          continue;
        }
        for (int d : dep_ids) {
          if (d >= 0) piece.deps.push_back(d);
        }
      }
      made.push_back(std::move(piece));
    }
  }

  // Same channels, each original transfer replaced in place by its pieces.
  Plan out = plan;
  out.name = absl::StrCat(plan.name, ".split", n);
  for (RankPlan& rp : out.ranks) {
    for (std::vector<Transfer>& channel : rp.channels) {
      std::vector<Transfer> split_channel;
      for (const Transfer& t : channel) {
        for (int new_id : pieces[t.id].new_id) {
          if (new_id >= 0) split_channel.push_back(made[new_id]);
        }
      }
      channel = std::move(split_channel);
    }
  }
  return out;
}

}  // namespace syncopate::plan
