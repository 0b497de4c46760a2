// Plan timeline rendering (see timeline.h). Pure function; thread-compatible.
#include "core/plan/timeline.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace syncopate::plan {
namespace {

constexpr size_t kMaxBoxesShown = 3;

std::string RegionText(const std::string& buffer, const Region& region) {
  if (region.boxes().size() <= kMaxBoxesShown) return absl::StrCat(buffer, region.ToString());
  return absl::StrCat(buffer, Region({region.boxes().front()}).ToString(), "+... (",
                      region.boxes().size(), " boxes, ", region.NumElements(), " elements)");
}

std::string TransferLine(const Transfer& t) {
  std::string line = absl::StrCat("t", t.id, " r", t.rank, " ch", t.channel, " ",
                                  TransferKindName(t.kind), " chunk ", t.chunk, " ");
  const std::string src = RegionText(t.src_buffer, t.src_region);
  const std::string dst = RegionText(t.dst_buffer, t.dst_region);
  switch (t.kind) {
    case TransferKind::kPush:
      absl::StrAppend(&line, src, " -> r", t.peer, " ", dst);
      break;
    case TransferKind::kPull:
      absl::StrAppend(&line, "r", t.peer, " ", src, " -> ", dst);
      break;
    case TransferKind::kLocalCopy:
      absl::StrAppend(&line, src, " -> ", dst);
      break;
  }
  if (t.reduce != ReduceOp::kNone) absl::StrAppend(&line, " ", ReduceOpName(t.reduce));
  if (t.after_compute) absl::StrAppend(&line, " after compute");
  if (!t.deps.empty()) {
    std::vector<std::string> deps;
    for (int d : t.deps) deps.push_back(absl::StrCat("t", d));
    absl::StrAppend(&line, " after ", absl::StrJoin(deps, ","));
  }
  absl::StrAppend(&line, " sig ", t.signal);
  return line;
}

}  // namespace

std::string RenderTimeline(const Plan& plan) {
  std::string out = absl::StrCat("plan ", plan.name.empty() ? "(unnamed)" : plan.name,
                                 "  collective ", CollectiveKindName(plan.collective), "  world ",
                                 plan.world_size, "  hash ", PlanHash(plan).substr(0, 12), "\n");
  for (const BufferSpec& b : plan.buffers) {
    absl::StrAppend(&out, "buffer ", b.name, " ", DTypeName(b.dtype), " [",
                    absl::StrJoin(b.shape, ","), "]\n");
  }
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    for (const auto& [buffer, region] : plan.ranks[r].initial) {
      absl::StrAppend(&out, "initial r", r, " ", RegionText(buffer, region), "\n");
    }
  }
  // (step, rank, channel, position) orders the lines.
  std::vector<std::tuple<int, int, int, int, const Transfer*>> rows;
  for (const RankPlan& rp : plan.ranks) {
    for (size_t c = 0; c < rp.channels.size(); ++c) {
      for (size_t i = 0; i < rp.channels[c].size(); ++i) {
        const Transfer& t = rp.channels[c][i];
        rows.emplace_back(t.step, t.rank, static_cast<int>(c), static_cast<int>(i), &t);
      }
    }
  }
  std::sort(rows.begin(), rows.end());
  int step = -1;
  bool first = true;
  for (const auto& row : rows) {
    const Transfer& t = *std::get<4>(row);
    if (first || t.step != step) {
      step = t.step;
      first = false;
      absl::StrAppend(&out, "step ", step, "\n");
    }
    absl::StrAppend(&out, "  ", TransferLine(t), "\n");
  }
  absl::StrAppend(&out, "postcondition ", plan.postcondition.size(), " expectations\n");
  return out;
}

}  // namespace syncopate::plan
