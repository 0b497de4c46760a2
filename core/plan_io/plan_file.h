// Plan files: load and save plans in the protobuf text format (.textproto, .txtpb, .pbtxt), the
// binary wire format (.pb, .binpb), and import MSCCL XML algorithms (.xml, load only).
//
// Text files start with the conventional header (# proto-file / # proto-message) and a comment
// with the plan hash; comments are ignored on load. Parse errors name file, line and column
// ("plan.textproto:12:5: Expected integer, got: x"); structural errors name the field path
// (plan_proto.h). Loading does not validate the plan: call plan::ValidatePlan.
//
// Thread-safety: stateless functions; concurrent calls are safe (SavePlanFile on one path from
// several threads is last-writer-wins, each write atomic by rename).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/plan/msccl_import.h"
#include "core/plan/plan.h"

namespace syncopate::plan_io {

enum class PlanFileFormat { kText, kBinary, kMsccl };

// The format implied by the path's extension; InvalidArgument for an unknown one.
absl::StatusOr<PlanFileFormat> FormatForPath(std::string_view path);

struct LoadOptions {
  // MSCCL XML only: the data shape and dtype the algorithm's chunks are cut from.
  plan::ImportOptions msccl;
};

absl::StatusOr<plan::Plan> LoadPlanFile(const std::string& path, const LoadOptions& options = {});
// Writes to a temporary file beside `path`, then renames it over `path`.
absl::Status SavePlanFile(const plan::Plan& plan, const std::string& path);

// The text format without the file: `source` names the input in error messages.
absl::StatusOr<plan::Plan> ParsePlanText(std::string_view text, std::string_view source = "<text>");
std::string PlanToText(const plan::Plan& plan);

}  // namespace syncopate::plan_io
