// See node_layout.h.
#include "server/node_layout.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace syncopate::server {

absl::StatusOr<std::optional<int>> ContiguousRanksPerNode(
    const std::vector<std::string>& node_of_rank) {
  for (const std::string& node : node_of_rank) {
    if (node.empty()) return std::optional<int>();
  }
  if (node_of_rank.empty()) return std::optional<int>();
  // The first node's run of ranks sets the size; every later run must match it and start a node
  // not seen before (a node whose ranks are not consecutive cannot be a two-level node).
  const int world = static_cast<int>(node_of_rank.size());
  int rpn = 1;
  while (rpn < world && node_of_rank[rpn] == node_of_rank[0]) ++rpn;
  std::map<std::string, int> first_rank;
  for (int start = 0; start < world; start += rpn) {
    const std::string& node = node_of_rank[start];
    if (auto seen = first_rank.find(node); seen != first_rank.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "node '", node, "' holds ranks ", seen->second, " and ", start,
          " but not the ranks between: two-level plans need each node's ranks to be consecutive"));
    }
    first_rank[node] = start;
    for (int r = start; r < start + rpn; ++r) {
      if (r >= world || node_of_rank[r] != node) {
        return absl::FailedPreconditionError(absl::StrCat(
            "node '", node_of_rank[0], "' holds ", rpn, " ranks but node '", node, "' holds ",
            r - start, " (ranks ", start, "..", r - 1,
            "): two-level plans need the same number of ranks on every node"));
      }
    }
  }
  return std::optional<int>(rpn);
}

bool IsTwoLevelTemplate(const std::string& template_name) {
  return absl::EndsWith(template_name, ".two_level");
}

absl::StatusOr<v1::Proposal> FitProposalToNodes(const v1::Proposal& proposal,
                                                const std::vector<std::string>& node_of_rank) {
  if (!proposal.has_template_request() ||
      !IsTwoLevelTemplate(proposal.template_request().template_name())) {
    return proposal;
  }
  absl::StatusOr<std::optional<int>> placed = ContiguousRanksPerNode(node_of_rank);
  if (!placed.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("template_request '", proposal.template_request().template_name(),
                     "' does not fit where the ranks run: ", placed.status().message()));
  }
  if (!placed->has_value()) return proposal;
  const int rpn = **placed;
  const int asked = proposal.template_request().ranks_per_node();
  if (asked == 0) {
    v1::Proposal fitted = proposal;
    fitted.mutable_template_request()->set_ranks_per_node(rpn);
    return fitted;
  }
  if (asked != rpn) {
    // Name one rank the requested layout puts on the wrong node.
    int wrong = 0;
    for (int r = 1; r < static_cast<int>(node_of_rank.size()); ++r) {
      if ((r / asked == 0) != (node_of_rank[r] == node_of_rank[0])) {
        wrong = r;
        break;
      }
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "template_request.ranks_per_node: ", asked, " puts rank ", wrong,
        wrong / asked == 0 ? " on rank 0's node" : " on another node than rank 0",
        ", but rank ", wrong, " joined from node '", node_of_rank[wrong], "' and rank 0 from '",
        node_of_rank[0], "' (the group runs ", rpn, " ranks per node; 0 derives it)"));
  }
  return proposal;
}

}  // namespace syncopate::server
