// Plan agreement, the decision part: given every rank's proposal for one round, check that they
// agree, then build and validate the plan once. Runs on the leader daemon only.
//
// Agreement means identical proposals: the same kernel hash and the same plan or template request,
// compared on their deterministic serialization. When they differ, the ranks that differ from
// rank 0 are named, with the first differing field of the first of them.
//
// Thread-safety: stateless functions; the result is an immutable value shared by every rank.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "syncopate/v1/service.pb.h"

namespace syncopate::server {

struct AgreeResult {
  std::string plan_hash;
  std::string kernel_hash;
  v1::Plan plan;  // with plan_hash set
};

// SHA-256 hex of the deterministic serialization of `message` (map order fixed).
std::string MessageFingerprint(const google::protobuf::Message& message);
inline std::string ProposalFingerprint(const v1::Proposal& proposal) {
  return MessageFingerprint(proposal);
}

// `by_rank[r]` is rank r's proposal; all non-null. `node_of_rank[r]` is the node rank r joined
// from ("" unknown): two-level templates are fitted to it (node_layout.h). FailedPrecondition
// naming the diverging ranks or the misplaced rank, or InvalidArgument when the agreed proposal
// does not give a valid plan for `world_size` ranks.
absl::StatusOr<std::shared_ptr<const AgreeResult>> DecideAgreement(
    const std::string& group_id, int world_size, const std::vector<const v1::Proposal*>& by_rank,
    const std::vector<std::string>& node_of_rank);

// Builds (template) or decodes (plan), then validates; the plan must have `world_size` ranks.
absl::StatusOr<std::shared_ptr<const AgreeResult>> BuildAgreedPlan(const v1::Proposal& proposal,
                                                                  int world_size);

}  // namespace syncopate::server
