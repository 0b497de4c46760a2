// Template plans as most tests want them: a name, a world size and a shape, every other parameter
// at its TemplateParams default (bf16, axis 0, one chunk per shard). Header-only.
#pragma once

#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "core/plan/plan.h"
#include "core/plan/region.h"
#include "core/plan/templates.h"

namespace syncopate::testing {

// Spares each test the TemplateParams boilerplate when only the world and shape matter.
inline absl::StatusOr<plan::Plan> TemplatePlan(std::string_view name, int world,
                                               plan::Shape shape) {
  plan::TemplateParams params;
  params.world_size = world;
  params.shape = std::move(shape);
  return plan::BuildTemplate(name, params);
}

}  // namespace syncopate::testing
