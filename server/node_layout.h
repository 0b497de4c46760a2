// Where a group's ranks run, from the node names they joined with, and whether that fits the
// two-level templates, which put ranks [n*rpn, (n+1)*rpn) on node n and move chunks between nodes
// only through those nodes' leaders. A two-level plan whose idea of the nodes differs from the real
// placement still validates, but its "intra-node" chunks would cross nodes, so agreement derives
// ranks_per_node from the placement, or refuses a given one that contradicts it.
//
// Thread-safety: stateless functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "syncopate/v1/service.pb.h"

namespace syncopate::server {

// `node_of_rank[r]`: the node name rank r joined with. nullopt when any rank gave none (the
// placement is unknown, nothing to check). Otherwise the ranks per node, if every node holds the
// same number of consecutive ranks; else FailedPrecondition naming the first node that does not.
absl::StatusOr<std::optional<int>> ContiguousRanksPerNode(
    const std::vector<std::string>& node_of_rank);

// Whether `template_name` places ranks on nodes (uses ranks_per_node).
bool IsTwoLevelTemplate(const std::string& template_name);

// For a two-level template request: fills in ranks_per_node from the placement when it is 0, or
// FailedPrecondition when it contradicts the placement (naming the ranks and nodes). Other
// proposals, and unknown placements, pass unchanged.
absl::StatusOr<v1::Proposal> FitProposalToNodes(const v1::Proposal& proposal,
                                                const std::vector<std::string>& node_of_rank);

}  // namespace syncopate::server
