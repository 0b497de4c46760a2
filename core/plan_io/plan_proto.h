// Conversion between the plan model (core/plan/plan.h) and its wire form
// (proto/syncopate/v1/plan.proto), done once at the service / file boundary.
//
// FromProto checks structure only (required fields present, no negative ids/ranks/extents, box
// axes consistent, enums known, format version supported) and names the offending field path,
// e.g. "ranks[2].channels[0].transfers[3].dst_region.boxes[0]: lo has 2 axes, hi has 3".
// Semantic checks (peers in range, regions inside buffers, races, postcondition) are
// plan::ValidatePlan's job. ToProto(FromProto(p)) keeps every field, so the plan hash survives
// the round trip.
//
// Thread-safety: stateless functions; safe to call concurrently.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "core/plan/plan.h"
#include "core/plan/templates.h"
#include "syncopate/v1/plan.pb.h"

namespace syncopate::plan_io {

// The plan format version this build writes and the newest it reads.
inline constexpr uint32_t kPlanFormatVersion = 1;

v1::Plan ToProto(const plan::Plan& plan);
// `plan_hash` in the message, when non-empty, must match the decoded plan's hash.
absl::StatusOr<plan::Plan> FromProto(const v1::Plan& proto);

// A template request in plain C++: which template, its parameters, and an optional re-chunking.
struct TemplateRequest {
  std::string name;
  plan::TemplateParams params;
  int split = 0;  // > 1: SplitPlan(plan, split) after building
};

v1::TemplateRequest ToProto(const TemplateRequest& request);
absl::StatusOr<TemplateRequest> FromProto(const v1::TemplateRequest& proto);

// BuildTemplate + SplitPlan for a request.
absl::StatusOr<plan::Plan> BuildTemplateRequest(const TemplateRequest& request);

// Enum conversions, for other services that embed these enums.
v1::DType ToProto(plan::DType dtype);
absl::StatusOr<plan::DType> FromProto(v1::DType dtype);
v1::ReduceOp ToProto(plan::ReduceOp op);
absl::StatusOr<plan::ReduceOp> FromProto(v1::ReduceOp op);

}  // namespace syncopate::plan_io
