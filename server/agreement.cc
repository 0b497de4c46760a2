// See agreement.h.
#include "server/agreement.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/message_differencer.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/sha256.h"
#include "core/base/status_macros.h"
#include "core/plan/plan.h"
#include "core/plan/validate.h"
#include "core/plan_io/plan_proto.h"
#include "server/node_layout.h"

namespace syncopate::server {
namespace {

std::string DeterministicBytes(const google::protobuf::Message& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return bytes;
}

// The first few differences between two proposals, as "field: a -> b" lines joined by "; ".
std::string DescribeDifference(const v1::Proposal& reference, const v1::Proposal& other) {
  std::string report;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&report);
  differencer.Compare(reference, other);
  // The report lists one difference per line; keep it short enough for a status message.
  std::vector<std::string> lines = absl::StrSplit(report, '\n', absl::SkipEmpty());
  if (lines.size() > 3) {
    const size_t more = lines.size() - 3;
    lines.resize(3);
    lines.push_back(absl::StrCat("and ", more, " more"));
  }
  std::string text = absl::StrJoin(lines, "; ");
  if (text.size() > 600) text = text.substr(0, 600) + "...";
  return text;
}

}  // namespace

std::string MessageFingerprint(const google::protobuf::Message& message) {
  return Sha256Hex(DeterministicBytes(message));
}

absl::StatusOr<std::shared_ptr<const AgreeResult>> BuildAgreedPlan(const v1::Proposal& proposal,
                                                                  int world_size) {
  plan::Plan plan;
  if (proposal.has_template_request()) {
    const v1::TemplateRequest& request = proposal.template_request();
    if (request.world_size() != world_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("proposal.template_request.world_size: ", request.world_size(),
                       " does not match the group's world size ", world_size));
    }
    ASSIGN_OR_RETURN(plan_io::TemplateRequest parsed, plan_io::FromProto(request));
    ASSIGN_OR_RETURN(plan, plan_io::BuildTemplateRequest(parsed));
  } else if (proposal.has_plan()) {
    if (proposal.plan().world_size() != world_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("proposal.plan.world_size: ", proposal.plan().world_size(),
                       " does not match the group's world size ", world_size));
    }
    absl::StatusOr<plan::Plan> decoded = plan_io::FromProto(proposal.plan());
    if (!decoded.ok()) {
      return absl::Status(decoded.status().code(),
                          absl::StrCat("proposal.plan.", decoded.status().message()));
    }
    plan = *std::move(decoded);
  } else {
    return absl::InvalidArgumentError("proposal: needs a plan or a template_request");
  }
  absl::Status valid = plan::ValidatePlan(plan);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the proposed plan '", plan.name, "' fails validation: ", valid.message()));
  }
  auto result = std::make_shared<AgreeResult>();
  result->plan_hash = plan::PlanHash(plan);
  result->kernel_hash = proposal.kernel_hash();
  result->plan = plan_io::ToProto(plan);
  result->plan.set_plan_hash(result->plan_hash);
  return std::shared_ptr<const AgreeResult>(std::move(result));
}

absl::StatusOr<std::shared_ptr<const AgreeResult>> DecideAgreement(
    const std::string& group_id, int world_size, const std::vector<const v1::Proposal*>& by_rank,
    const std::vector<std::string>& node_of_rank) {
  if (by_rank.empty() || static_cast<int>(by_rank.size()) != world_size) {
    return absl::InternalError("DecideAgreement: one proposal per rank expected");
  }
  const std::string reference = ProposalFingerprint(*by_rank[0]);
  std::vector<int> diverging;
  for (int r = 1; r < world_size; ++r) {
    if (ProposalFingerprint(*by_rank[r]) != reference) diverging.push_back(r);
  }
  if (!diverging.empty()) {
    const v1::Proposal& first = *by_rank[diverging.front()];
    const char* what = first.kernel_hash() != by_rank[0]->kernel_hash() ? "kernel_hash"
                       : first.source_case() != by_rank[0]->source_case()
                           ? "plan source (plan vs template_request)"
                           : "plan";
    return absl::FailedPreconditionError(absl::StrCat(
        "plan agreement failed in group ", group_id, ": ranks [", absl::StrJoin(diverging, ", "),
        "] diverge from rank 0 in their ", what, "; rank ", diverging.front(), " vs rank 0: ",
        DescribeDifference(*by_rank[0], first)));
  }
  absl::StatusOr<std::shared_ptr<const AgreeResult>> result;
  if (absl::StatusOr<v1::Proposal> fitted = FitProposalToNodes(*by_rank[0], node_of_rank);
      fitted.ok()) {
    result = BuildAgreedPlan(*fitted, world_size);
  } else {
    result = fitted.status();
  }
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        absl::StrCat("plan agreement in group ", group_id,
                                     " (all ranks agree): ", result.status().message()));
  }
  return result;
}

}  // namespace syncopate::server
