// GroupRegistry, plan agreement rounds (see group_registry.h): Agree puts a rank's proposal into
// its round; the rank that completes the round decides it (agreement.h) outside the registry's
// lock, reusing a recent decision of its group when the proposals are the same, and completes every
// rank with the one result.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/group_registry.h"
#include "spdlog/spdlog.h"

namespace syncopate::server {
namespace {

// Decisions a group keeps for reuse (FormedGroup::decided).
constexpr size_t kDecidedKept = 8;

using DecidedCache = std::vector<std::pair<std::string, std::shared_ptr<const AgreeResult>>>;

int ProposalWorldSize(const v1::Proposal& proposal) {
  if (proposal.has_template_request()) return proposal.template_request().world_size();
  if (proposal.has_plan()) return proposal.plan().world_size();
  return -1;
}

struct Decision {
  absl::StatusOr<std::shared_ptr<const AgreeResult>> result;
  std::string fingerprint;  // of rank 0's proposal
  bool reused = false;      // taken from `decided`, not decided again
};

// Decides a full round from its proposals (`by_rank[r]` is rank r's), taking the result from
// `decided` (the group's cache, copied) when every rank proposed what an earlier round decided.
Decision Decide(const std::string& group_id, int world_size,
                const std::vector<const v1::Proposal*>& by_rank,
                const std::vector<std::string>& node_of_rank, const DecidedCache& decided) {
  Decision decision;
  decision.fingerprint = ProposalFingerprint(*by_rank[0]);
  bool all_same = true;
  for (int r = 1; r < world_size && all_same; ++r) {
    all_same = ProposalFingerprint(*by_rank[r]) == decision.fingerprint;
  }
  if (all_same) {
    for (auto& [fp, earlier] : decided) {
      if (fp == decision.fingerprint) {
        decision.result = earlier;
        decision.reused = true;
      }
    }
  }
  if (!decision.reused) {
    decision.result = DecideAgreement(group_id, world_size, by_rank, node_of_rank);
  }
  return decision;
}

void LogDecision(const std::string& group_id, uint64_t round_index, const Decision& decision) {
  const absl::StatusOr<std::shared_ptr<const AgreeResult>>& result = decision.result;
  if (result.ok()) {
    spdlog::debug("event=agreed group={} round={} plan_hash={} reused={}", group_id, round_index,
                  (*result)->plan_hash, decision.reused);
  } else {
    spdlog::info("event=agreement_failed group={} round={} code={} msg=\"{}\"", group_id,
                 round_index, absl::StatusCodeToString(result.status().code()),
                 std::string(result.status().message()));
  }
}

}  // namespace

GroupRegistry::WaiterId GroupRegistry::Agree(const std::string& group_id, int rank,
                                             v1::Proposal proposal, absl::Time deadline,
                                             AgreeDone done) {
  absl::Status reject;
  WaiterId id = 0;
  std::map<int, AgreeWaiter> ready;
  DecidedCache decided;
  uint64_t round_index = 0;
  int world_size = 0;
  std::vector<std::string> node_of_rank;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<FormedGroup*> found = FindFormedGroup(group_id, rank);
    if (!found.ok()) {
      reject = found.status();
    } else if (ProposalWorldSize(proposal) != (*found)->info.world_size) {
      reject = absl::InvalidArgumentError(
          absl::StrCat(proposal.has_plan() ? "proposal.plan.world_size: "
                                           : "proposal.template_request.world_size: ",
                       ProposalWorldSize(proposal), " does not match the world size ",
                       (*found)->info.world_size, " of group ", group_id));
    } else {
      FormedGroup& group = **found;
      group.last_used = absl::Now();
      world_size = group.info.world_size;
      round_index = group.next_round[rank]++;
      id = next_waiter_++;
      AgreeWaiter waiter;
      waiter.id = id;
      waiter.proposal = std::move(proposal);
      waiter.done = std::move(done);
      ready = AddToRound(group, group.rounds, Location{false, group_id, rank, round_index},
                         deadline, std::move(waiter));
      if (!ready.empty()) {
        decided.assign(group.decided.begin(), group.decided.end());
        for (const MemberInfo& m : group.info.members) node_of_rank.push_back(m.node_name);
      }
    }
  }
  if (!reject.ok()) {
    LogRejected("agree_rejected", group_id, rank, reject);
    done(reject);
    return 0;
  }
  if (ready.empty()) return id;

  // Every rank has proposed: decide outside the lock (building and validating a plan can take a
  // while), reusing an earlier decision when the proposals are the same as one already decided.
  std::vector<const v1::Proposal*> by_rank;
  for (auto& [r, w] : ready) by_rank.push_back(&w.proposal);
  const Decision decision = Decide(group_id, world_size, by_rank, node_of_rank, decided);
  RecordDecision(group_id, decision.fingerprint, decision.result, decision.reused);
  LogDecision(group_id, round_index, decision);
  for (auto& [r, w] : ready) {
    if (decision.result.ok()) {
      w.done(AgreeOutcome{*decision.result, round_index});
    } else {
      w.done(decision.result.status());
    }
  }
  return id;
}

void GroupRegistry::RecordDecision(const std::string& group_id, const std::string& fingerprint,
                                   const absl::StatusOr<std::shared_ptr<const AgreeResult>>& result,
                                   bool reused) {
  absl::MutexLock lock(&mu_);
  if (!result.ok()) {
    ++stats_.agreements_failed;
    return;
  }
  ++stats_.agreements;
  if (reused) return;
  // The group may have broken while the round was decided; then there is nothing to cache into.
  if (auto it = formed_.find(group_id); it != formed_.end()) {
    auto& cache = it->second.decided;
    cache.emplace_back(fingerprint, *result);
    if (cache.size() > kDecidedKept) cache.pop_front();
  }
}

}  // namespace syncopate::server
