// Flags that say which plan a CLI command works on: a template (--template NAME --world ...) or
// a plan file (--file PATH), optionally re-chunked (--split N). Shared by `syncopate plan`,
// `syncopate compile` and `syncopate demo` so every command spells them the same way.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cli/flag_parser.h"
#include "core/plan/plan.h"

namespace syncopate::cli {

struct PlanSourceOptions {
  std::string template_name;
  std::string file;
  int world = 8;
  std::string shape;  // empty: the command's default
  std::string dtype = "bf16";
  int axis = 0;
  int chunks = 1;
  std::string op = "sum";
  int ranks_per_node = 0;
  int sub_collectives = 1;
  std::string splits;
  int split = 0;
  bool produced_by_compute = false;
};

void AddPlanSourceFlags(FlagParser& flags, PlanSourceOptions* options);

// After parsing: exactly one of --template / --file unless `allow_none`, template-only flags not
// given with --file, --split >= 0. InvalidArgument naming the flag.
absl::Status CheckPlanSourceFlags(const FlagParser& flags, const PlanSourceOptions& options,
                                  bool allow_none = false);

// Builds the template or loads the file, then applies --split. `default_shape` is used for
// templates when --shape was not given.
absl::StatusOr<plan::Plan> PlanFromFlags(const PlanSourceOptions& options,
                                         const std::string& default_shape = "64,32");

absl::StatusOr<plan::Shape> ParseShapeFlag(const std::string& text);

}  // namespace syncopate::cli
