// See request_checks.h.
#include "server/request_checks.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"

namespace syncopate::server {
namespace {

absl::Status Bad(const std::string& field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// Checks a shape: 1..max_dims axes, each in [min_extent, max_extent], product bounded.
absl::Status CheckShape(const google::protobuf::RepeatedField<int64_t>& shape, int64_t min_extent,
                        const RequestLimits& limits, const std::string& field) {
  if (shape.empty()) return Bad(field, "is empty (need 1 to " + std::to_string(limits.max_dims) +
                                           " axes)");
  if (shape.size() > limits.max_dims) {
    return Bad(field, absl::StrCat("has ", shape.size(), " axes, at most ", limits.max_dims));
  }
  int64_t elements = 1;
  for (int i = 0; i < shape.size(); ++i) {
    const int64_t extent = shape[i];
    const std::string axis = absl::StrCat(field, "[", i, "]");
    if (extent < 0) return Bad(axis, absl::StrCat(extent, " is negative"));
    if (extent < min_extent) return Bad(axis, absl::StrCat(extent, " is below ", min_extent));
    if (extent > limits.max_extent) {
      return Bad(axis, absl::StrCat(extent, " exceeds the limit ", limits.max_extent));
    }
    if (extent != 0 && elements > limits.max_elements / extent) {
      return Bad(field, absl::StrCat("[", absl::StrJoin(shape, ","), "] has more than ",
                                     limits.max_elements, " elements"));
    }
    elements *= extent;
  }
  return absl::OkStatus();
}

absl::Status CheckCount(int64_t value, int64_t lo, int64_t hi, const std::string& field) {
  if (value < lo || value > hi) {
    return Bad(field, absl::StrCat(value, " is out of range [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

int64_t SaturatingMul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  if (a > INT64_MAX / b) return INT64_MAX;
  return a * b;
}

}  // namespace

absl::Status CheckJobId(const std::string& job_id, const char* field) {
  if (job_id.empty()) return Bad(field, "is required");
  if (job_id.size() > 128) return Bad(field, absl::StrCat("is ", job_id.size(), " bytes, at most 128"));
  for (char c : job_id) {
    // No '#': the registry joins a job id and a generation with it to make group ids.
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '/' || c == '-';
    if (!ok) return Bad(field, "may contain only letters, digits and . _ : / -");
  }
  return absl::OkStatus();
}

absl::Status CheckGroupId(const std::string& group_id, const char* field) {
  // The job id alphabet plus '#', which joins a job id and a generation. The form itself is not
  // checked: an id that is well-spelled but unknown gets NOT_FOUND from the registry.
  if (group_id.empty()) return Bad(field, "is required");
  if (group_id.size() > 256) {
    return Bad(field, absl::StrCat("is ", group_id.size(), " bytes, at most 256"));
  }
  for (char c : group_id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '/' || c == '-' || c == '#';
    if (!ok) return Bad(field, "may contain only letters, digits and . _ : / - #");
  }
  return absl::OkStatus();
}

absl::Status CheckJoinRequest(const v1::JoinRequest& request, const RequestLimits& limits) {
  RETURN_IF_ERROR(CheckJobId(request.job_id(), "job_id"));
  RETURN_IF_ERROR(CheckCount(request.world_size(), 1, limits.max_world_size, "world_size"));
  RETURN_IF_ERROR(CheckCount(request.rank(), 0, request.world_size() - 1, "rank"));
  if (request.node_name().size() > 256) return Bad("node_name", "is longer than 256 bytes");
  if (request.gpu_arch().size() > 64) return Bad("gpu_arch", "is longer than 64 bytes");
  if (request.leader_address().size() > 512) return Bad("leader_address", "is longer than 512 bytes");
  if (request.via_daemon().size() > 512) return Bad("via_daemon", "is longer than 512 bytes");
  return absl::OkStatus();
}

absl::Status CheckAgreeRequest(const v1::AgreeRequest& request, const RequestLimits& limits) {
  RETURN_IF_ERROR(CheckGroupId(request.group_id(), "group_id"));
  RETURN_IF_ERROR(CheckCount(request.rank(), 0, limits.max_world_size - 1, "rank"));
  if (!request.has_proposal()) return Bad("proposal", "is required");
  if (request.leader_address().size() > 512) return Bad("leader_address", "is longer than 512 bytes");
  return CheckProposal(request.proposal(), limits, "proposal");
}

absl::Status CheckProposal(const v1::Proposal& proposal, const RequestLimits& limits,
                           const std::string& field) {
  if (proposal.kernel_hash().size() > 256) {
    return Bad(field + ".kernel_hash", "is longer than 256 bytes");
  }
  switch (proposal.source_case()) {
    case v1::Proposal::kPlan:
      return CheckPlanLimits(proposal.plan(), limits, field + ".plan");
    case v1::Proposal::kTemplateRequest:
      return CheckTemplateRequest(proposal.template_request(), limits,
                                  field + ".template_request");
    case v1::Proposal::SOURCE_NOT_SET:
      break;
  }
  return Bad(field, "needs a plan or a template_request");
}

absl::Status CheckTemplateRequest(const v1::TemplateRequest& request, const RequestLimits& limits,
                                  const std::string& field) {
  if (request.template_name().empty()) return Bad(field + ".template_name", "is required");
  if (request.template_name().size() > 64) {
    return Bad(field + ".template_name", "is longer than 64 bytes");
  }
  RETURN_IF_ERROR(CheckCount(request.world_size(), 1, limits.max_template_world_size,
                             field + ".world_size"));
  // Templates shard and chunk every axis they split, so zero-sized axes are rejected here.
  RETURN_IF_ERROR(CheckShape(request.shape(), 1, limits, field + ".shape"));
  RETURN_IF_ERROR(CheckCount(request.axis(), 0, request.shape_size() - 1, field + ".axis"));
  if (request.dtype() == v1::DTYPE_UNSPECIFIED) return Bad(field + ".dtype", "is required");
  if (!v1::DType_IsValid(request.dtype())) {
    return Bad(field + ".dtype", absl::StrCat("unknown value ", request.dtype()));
  }
  const int64_t chunks = request.has_chunks_per_shard() ? request.chunks_per_shard() : 1;
  RETURN_IF_ERROR(CheckCount(chunks, 1, limits.max_chunks, field + ".chunks_per_shard"));
  const int64_t subs = request.has_sub_collectives() ? request.sub_collectives() : 1;
  RETURN_IF_ERROR(CheckCount(subs, 1, limits.max_chunks, field + ".sub_collectives"));
  RETURN_IF_ERROR(CheckCount(request.split(), 0, limits.max_chunks, field + ".split"));
  RETURN_IF_ERROR(
      CheckCount(request.ranks_per_node(), 0, request.world_size(), field + ".ranks_per_node"));
  if (request.has_op() && !v1::ReduceOp_IsValid(request.op())) {
    return Bad(field + ".op", absl::StrCat("unknown value ", request.op()));
  }
  if (!request.splits().empty()) {
    if (request.splits_size() != request.world_size()) {
      return Bad(field + ".splits", absl::StrCat("has ", request.splits_size(),
                                                 " rows, need world_size ", request.world_size()));
    }
    for (int s = 0; s < request.splits_size(); ++s) {
      const auto& rows = request.splits(s).rows();
      const std::string row_field = absl::StrCat(field, ".splits[", s, "].rows");
      if (rows.size() != request.world_size()) {
        return Bad(row_field, absl::StrCat("has ", rows.size(), " entries, need world_size ",
                                           request.world_size()));
      }
      for (int d = 0; d < rows.size(); ++d) {
        RETURN_IF_ERROR(
            CheckCount(rows[d], 0, limits.max_extent, absl::StrCat(row_field, "[", d, "]")));
      }
    }
  }
  // Every template moves at most world^2 chunks per chunk index; bound the plan it would build.
  int64_t estimate = SaturatingMul(request.world_size(), request.world_size());
  estimate = SaturatingMul(estimate, chunks);
  estimate = SaturatingMul(estimate, subs);
  estimate = SaturatingMul(estimate, std::max<int64_t>(1, request.split()));
  if (estimate > limits.max_transfers) {
    return Bad(field, absl::StrCat("world_size^2 * chunks_per_shard * sub_collectives * split = ",
                                   estimate, " transfers exceeds the limit ",
                                   limits.max_transfers));
  }
  return absl::OkStatus();
}

absl::Status CheckPlanLimits(const v1::Plan& plan, const RequestLimits& limits,
                             const std::string& field) {
  RETURN_IF_ERROR(
      CheckCount(plan.world_size(), 1, limits.max_template_world_size, field + ".world_size"));
  if (plan.ranks_size() != plan.world_size()) {
    return Bad(field + ".ranks", absl::StrCat("has ", plan.ranks_size(),
                                              " entries, need world_size ", plan.world_size()));
  }
  if (plan.buffers_size() == 0) return Bad(field + ".buffers", "is empty");
  if (plan.buffers_size() > limits.max_buffers) {
    return Bad(field + ".buffers",
               absl::StrCat("has ", plan.buffers_size(), " entries, at most ", limits.max_buffers));
  }
  for (int b = 0; b < plan.buffers_size(); ++b) {
    const std::string buffer_field = absl::StrCat(field, ".buffers[", b, "]");
    if (plan.buffers(b).name().empty()) return Bad(buffer_field + ".name", "is required");
    RETURN_IF_ERROR(CheckShape(plan.buffers(b).shape(), 0, limits, buffer_field + ".shape"));
  }
  int64_t transfers = 0;
  int64_t boxes = 0;
  auto count_boxes = [&](const v1::Region& region) { boxes += region.boxes_size(); };
  for (const v1::RankPlan& rank : plan.ranks()) {
    for (const v1::Channel& channel : rank.channels()) {
      transfers += channel.transfers_size();
      for (const v1::Transfer& t : channel.transfers()) {
        count_boxes(t.src_region());
        count_boxes(t.dst_region());
      }
    }
    for (const v1::InitialRegion& initial : rank.initial()) count_boxes(initial.region());
  }
  for (const v1::Expectation& e : plan.postcondition()) {
    count_boxes(e.region());
    for (const v1::Contribution& c : e.sources()) count_boxes(c.region());
  }
  if (transfers > limits.max_transfers) {
    return Bad(field, absl::StrCat(transfers, " transfers exceed the limit ", limits.max_transfers));
  }
  if (boxes > limits.max_boxes) {
    return Bad(field, absl::StrCat(boxes, " region boxes exceed the limit ", limits.max_boxes));
  }
  return absl::OkStatus();
}

absl::Status CheckCompileRequest(const v1::CompileRequest& request, const RequestLimits& limits) {
  if (!request.has_kernel()) return Bad("kernel", "is required");
  const v1::KernelSource& kernel = request.kernel();
  if (kernel.source().empty()) return Bad("kernel.source", "is required");
  int64_t bytes = kernel.source().size();
  for (const auto& [name, content] : kernel.headers()) {
    if (name.empty()) return Bad("kernel.headers", "has an entry with an empty name");
    bytes += name.size() + content.size();
  }
  if (bytes > limits.max_source_bytes) {
    return Bad("kernel", absl::StrCat("source + headers are ", bytes, " bytes, at most ",
                                      limits.max_source_bytes));
  }
  if (kernel.spec().empty()) return Bad("kernel.spec", "is required (kernel spec text: entry = ..., operand = ...)");
  if (kernel.spec().size() > (1 << 20)) return Bad("kernel.spec", "is longer than 1 MiB");
  for (int i = 0; i < kernel.options_size(); ++i) {
    if (kernel.options(i).size() > 4096) {
      return Bad(absl::StrCat("kernel.options[", i, "]"), "is longer than 4096 bytes");
    }
  }
  if (request.arch().empty()) return Bad("arch", "is required (e.g. \"sm_90\")");
  if (request.known_cache_key().size() > 128) return Bad("known_cache_key", "is longer than 128 bytes");
  if (request.has_plan() && !request.plan_hash().empty()) {
    return Bad("plan_hash", "is set together with plan: give one of them");
  }
  if (request.plan_hash().size() > 128) return Bad("plan_hash", "is longer than 128 bytes");
  for (char c : request.plan_hash()) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) {
      return Bad("plan_hash", "must be hexadecimal (a plan hash from Agree or CompileResponse)");
    }
  }
  if (request.has_plan()) RETURN_IF_ERROR(CheckPlanLimits(request.plan(), limits, "plan"));
  if (request.has_plan() &&
      (request.rank() < 0 || request.rank() >= request.plan().world_size())) {
    return Bad("rank", absl::StrCat(request.rank(), " is out of range [0, ",
                                    request.plan().world_size(), ")"));
  }
  // The map itself (ids >= 0) is checked where it is used (jit::Lower); here only that it can be
  // the map of this request's group, before anything is generated.
  if (request.nodes_size() > limits.max_world_size) {
    return Bad("nodes", absl::StrCat("has ", request.nodes_size(), " entries, at most ",
                                     limits.max_world_size));
  }
  if (request.nodes_size() > 0 && request.plan_hash().empty() &&
      (!request.has_plan() || request.nodes_size() != request.plan().world_size())) {
    return Bad("nodes", absl::StrCat("has ", request.nodes_size(),
                                     " entries; it maps each rank of the plan to its node, so "
                                     "it needs the plan and one entry per rank (",
                                     request.has_plan() ? request.plan().world_size() : 0, ")"));
  }
  return absl::OkStatus();
}

}  // namespace syncopate::server
