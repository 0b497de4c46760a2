#include "client/cli/plan_flags.h"

#include "absl/strings/str_cat.h"
#include "core/plan/templates.h"
#include "core/plan_io/plan_file.h"

namespace syncopate::cli {
namespace {

// Template flags that make no sense with --file (shape/dtype do: they size MSCCL XML imports).
constexpr const char* kTemplateOnlyFlags[] = {"world",          "axis",
                                              "chunks",         "op",
                                              "ranks-per-node", "sub-collectives",
                                              "splits",         "produced-by-compute"};

absl::StatusOr<plan::ReduceOp> ParseOp(const std::string& text) {
  if (text == "sum") return plan::ReduceOp::kSum;
  if (text == "max") return plan::ReduceOp::kMax;
  return absl::InvalidArgumentError(absl::StrCat("--op: '", text, "' is not sum or max"));
}

absl::StatusOr<plan::Plan> PlanFromTemplate(const PlanSourceOptions& o,
                                            const std::string& default_shape) {
  plan::TemplateParams p;
  p.world_size = o.world;
  auto shape = ParseShapeFlag(o.shape.empty() ? default_shape : o.shape);
  if (!shape.ok()) return shape.status();
  p.shape = *shape;
  auto dtype = plan::ParseDType(o.dtype);
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--dtype: ", dtype.status().message()));
  }
  p.dtype = *dtype;
  p.axis = o.axis;
  p.chunks_per_shard = o.chunks;
  auto op = ParseOp(o.op);
  if (!op.ok()) return op.status();
  p.op = *op;
  p.ranks_per_node = o.ranks_per_node;
  p.sub_collectives = o.sub_collectives;
  auto splits = ParseInt64Matrix(o.splits, "--splits");
  if (!splits.ok()) return splits.status();
  p.splits = *splits;
  p.produced_by_compute = o.produced_by_compute;
  return plan::BuildTemplate(o.template_name, p);
}

absl::StatusOr<plan::Plan> PlanFromFile(const PlanSourceOptions& o) {
  plan_io::LoadOptions load;
  if (!o.shape.empty()) {
    auto shape = ParseShapeFlag(o.shape);
    if (!shape.ok()) return shape.status();
    load.msccl.shape = *shape;
  }
  auto dtype = plan::ParseDType(o.dtype);
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--dtype: ", dtype.status().message()));
  }
  load.msccl.dtype = *dtype;
  return plan_io::LoadPlanFile(o.file, load);
}

}  // namespace

absl::StatusOr<plan::Shape> ParseShapeFlag(const std::string& text) {
  auto shape = ParseInt64List(text, "--shape");
  if (!shape.ok()) return shape.status();
  if (shape->empty()) return absl::InvalidArgumentError("--shape: empty");
  for (int64_t extent : *shape) {
    if (extent <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--shape: extents must be positive, got ", text));
    }
  }
  return shape;
}

void AddPlanSourceFlags(FlagParser& flags, PlanSourceOptions* o) {
  flags.AddString("template", &o->template_name, "template name (see `syncopate plan templates`)");
  flags.AddString("file", &o->file, "plan file: .textproto/.txtpb/.pbtxt, .pb, or MSCCL .xml");
  flags.AddInt("world", &o->world, "template: number of ranks");
  flags.AddString("shape", &o->shape,
                  "full tensor shape, comma-separated (sizes templates and MSCCL XML chunks)");
  flags.AddString("dtype", &o->dtype, "element type: f32, f16, bf16, f64, i32, i64, i8, u8");
  flags.AddInt("axis", &o->axis, "template: axis the collective splits");
  flags.AddInt("chunks", &o->chunks, "template: chunks per shard");
  flags.AddString("op", &o->op, "template: reduction, sum or max");
  flags.AddInt("ranks-per-node", &o->ranks_per_node, "template: ranks per node (two_level)");
  flags.AddInt("sub-collectives", &o->sub_collectives, "template: allreduce.split pieces");
  flags.AddString("splits", &o->splits,
                  "template: alltoall.variable rows splits[src][dst], e.g. \"3,1;2,2\"");
  flags.AddBool("produced-by-compute", &o->produced_by_compute,
                "template: the sent data is produced by the fused kernel's computation");
  flags.AddInt("split", &o->split, "re-chunk the plan: every transfer into N pieces");
}

absl::Status CheckPlanSourceFlags(const FlagParser& flags, const PlanSourceOptions& o,
                                  bool allow_none) {
  const bool none = o.template_name.empty() && o.file.empty();
  if (!(allow_none && none) && o.template_name.empty() == o.file.empty()) {
    return absl::InvalidArgumentError("give exactly one of --template NAME or --file PATH");
  }
  if (!o.file.empty()) {
    for (const char* name : kTemplateOnlyFlags) {
      if (flags.WasSet(name)) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " applies to --template only"));
      }
    }
  }
  if (o.split < 0) return absl::InvalidArgumentError("--split: must be >= 0");
  return absl::OkStatus();
}

absl::StatusOr<plan::Plan> PlanFromFlags(const PlanSourceOptions& options,
                                         const std::string& default_shape) {
  auto plan =
      options.file.empty() ? PlanFromTemplate(options, default_shape) : PlanFromFile(options);
  if (!plan.ok() || options.split <= 1) return plan;
  return plan::SplitPlan(*plan, options.split);
}

}  // namespace syncopate::cli
