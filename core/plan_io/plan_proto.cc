// plan::Plan <-> syncopate.v1.Plan (see plan_proto.h). Stateless; thread-safe.
//
// Decoding walks the message once, carrying the field path of the current element so that the
// first structural error names exactly where it is ("ranks[1].initial[0].region: missing").
#include "core/plan_io/plan_proto.h"

#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"

namespace syncopate::plan_io {
namespace {

using plan::Box;
using plan::Region;

absl::Status FieldError(absl::string_view path, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
}

std::string Index(absl::string_view path, absl::string_view field, int i) {
  return absl::StrFormat("%s%s%s[%d]", path, path.empty() ? "" : ".", field, i);
}

std::string Field(absl::string_view path, absl::string_view field) {
  return path.empty() ? std::string(field) : absl::StrCat(path, ".", field);
}

// ---- encode ----

void RegionToProto(const Region& region, v1::Region* out) {
  for (const Box& box : region.boxes()) {
    v1::Box* b = out->add_boxes();
    b->mutable_lo()->Add(box.lo.begin(), box.lo.end());
    b->mutable_hi()->Add(box.hi.begin(), box.hi.end());
  }
}

v1::TransferKind KindToProto(plan::TransferKind kind) {
  switch (kind) {
    case plan::TransferKind::kPush:
      return v1::TRANSFER_KIND_PUSH;
    case plan::TransferKind::kPull:
      return v1::TRANSFER_KIND_PULL;
    case plan::TransferKind::kLocalCopy:
      return v1::TRANSFER_KIND_LOCAL_COPY;
  }
  return v1::TRANSFER_KIND_UNSPECIFIED;
}

v1::CollectiveKind CollectiveToProto(plan::CollectiveKind kind) {
  switch (kind) {
    case plan::CollectiveKind::kCustom:
      return v1::COLLECTIVE_KIND_CUSTOM;
    case plan::CollectiveKind::kAllGather:
      return v1::COLLECTIVE_KIND_ALL_GATHER;
    case plan::CollectiveKind::kReduceScatter:
      return v1::COLLECTIVE_KIND_REDUCE_SCATTER;
    case plan::CollectiveKind::kAllReduce:
      return v1::COLLECTIVE_KIND_ALL_REDUCE;
    case plan::CollectiveKind::kAllToAll:
      return v1::COLLECTIVE_KIND_ALL_TO_ALL;
  }
  return v1::COLLECTIVE_KIND_UNSPECIFIED;
}

// ---- decode ----

absl::StatusOr<int> NonNegative(int64_t value, absl::string_view path) {
  if (value < 0) return FieldError(path, absl::StrCat("must be >= 0, got ", value));
  return static_cast<int>(value);
}

absl::Status CheckName(const std::string& name, absl::string_view path) {
  if (name.empty()) return FieldError(path, "missing");
  return absl::OkStatus();
}

absl::StatusOr<Region> RegionFromProto(const v1::Region& proto, absl::string_view path) {
  std::vector<Box> boxes;
  boxes.reserve(proto.boxes_size());
  int axes = -1;
  for (int i = 0; i < proto.boxes_size(); ++i) {
    const v1::Box& b = proto.boxes(i);
    std::string box_path = Index(path, "boxes", i);
    if (b.lo_size() != b.hi_size()) {
      return FieldError(box_path,
                        absl::StrFormat("lo has %d axes, hi has %d", b.lo_size(), b.hi_size()));
    }
    if (b.lo_size() == 0) return FieldError(box_path, "no axes (lo and hi are empty)");
    if (axes >= 0 && b.lo_size() != axes) {
      return FieldError(box_path,
                        absl::StrFormat("has %d axes, boxes[0] has %d", b.lo_size(), axes));
    }
    axes = b.lo_size();
    for (int a = 0; a < b.lo_size(); ++a) {
      if (b.lo(a) < 0) {
        return FieldError(box_path, absl::StrFormat("lo[%d] is negative (%d)", a, b.lo(a)));
      }
      if (b.hi(a) < b.lo(a)) {
        return FieldError(
            box_path, absl::StrFormat("hi[%d] = %d is below lo[%d] = %d", a, b.hi(a), a, b.lo(a)));
      }
    }
    boxes.push_back(Box{{b.lo().begin(), b.lo().end()}, {b.hi().begin(), b.hi().end()}});
  }
  return Region(std::move(boxes));
}

// A required sub-message: proto3 keeps presence for messages, so "missing" is detectable.
absl::StatusOr<Region> RequiredRegion(bool has, const v1::Region& region, absl::string_view path) {
  if (!has) return FieldError(path, "missing");
  return RegionFromProto(region, path);
}

absl::StatusOr<plan::TransferKind> KindFromProto(v1::TransferKind kind, absl::string_view path) {
  switch (kind) {
    case v1::TRANSFER_KIND_PUSH:
      return plan::TransferKind::kPush;
    case v1::TRANSFER_KIND_PULL:
      return plan::TransferKind::kPull;
    case v1::TRANSFER_KIND_LOCAL_COPY:
      return plan::TransferKind::kLocalCopy;
    case v1::TRANSFER_KIND_UNSPECIFIED:
      return FieldError(path, "missing (TRANSFER_KIND_UNSPECIFIED)");
    default:
      return FieldError(path, absl::StrCat("unknown value ", static_cast<int>(kind)));
  }
}

absl::StatusOr<plan::ReduceOp> ReduceFromProto(v1::ReduceOp op, absl::string_view path) {
  auto result = FromProto(op);
  if (!result.ok()) return FieldError(path, result.status().message());
  return result;
}

absl::StatusOr<plan::CollectiveKind> CollectiveFromProto(v1::CollectiveKind kind,
                                                         absl::string_view path) {
  switch (kind) {
    case v1::COLLECTIVE_KIND_CUSTOM:
      return plan::CollectiveKind::kCustom;
    case v1::COLLECTIVE_KIND_ALL_GATHER:
      return plan::CollectiveKind::kAllGather;
    case v1::COLLECTIVE_KIND_REDUCE_SCATTER:
      return plan::CollectiveKind::kReduceScatter;
    case v1::COLLECTIVE_KIND_ALL_REDUCE:
      return plan::CollectiveKind::kAllReduce;
    case v1::COLLECTIVE_KIND_ALL_TO_ALL:
      return plan::CollectiveKind::kAllToAll;
    case v1::COLLECTIVE_KIND_UNSPECIFIED:
      return FieldError(path, "missing (COLLECTIVE_KIND_UNSPECIFIED; use COLLECTIVE_KIND_CUSTOM)");
    default:
      return FieldError(path, absl::StrCat("unknown value ", static_cast<int>(kind)));
  }
}

absl::StatusOr<plan::DType> DTypeFromProto(v1::DType dtype, absl::string_view path) {
  auto result = FromProto(dtype);
  if (!result.ok()) return FieldError(path, result.status().message());
  return result;
}

absl::StatusOr<plan::BufferSpec> BufferFromProto(const v1::Buffer& proto, absl::string_view path) {
  plan::BufferSpec buffer;
  RETURN_IF_ERROR(CheckName(proto.name(), Field(path, "name")));
  buffer.name = proto.name();
  ASSIGN_OR_RETURN(buffer.dtype, DTypeFromProto(proto.dtype(), Field(path, "dtype")));
  if (proto.shape_size() == 0) return FieldError(Field(path, "shape"), "missing");
  for (int i = 0; i < proto.shape_size(); ++i) {
    if (proto.shape(i) < 0) {
      return FieldError(Index(path, "shape", i), absl::StrCat("negative extent ", proto.shape(i)));
    }
  }
  buffer.shape.assign(proto.shape().begin(), proto.shape().end());
  if (proto.strides_size() == 0) {
    buffer.strides = plan::RowMajorStrides(buffer.shape);
  } else {
    if (proto.strides_size() != proto.shape_size()) {
      return FieldError(Field(path, "strides"),
                        absl::StrFormat("has %d entries, shape has %d", proto.strides_size(),
                                        proto.shape_size()));
    }
    for (int i = 0; i < proto.strides_size(); ++i) {
      if (proto.strides(i) < 0) {
        return FieldError(Index(path, "strides", i),
                          absl::StrCat("negative stride ", proto.strides(i)));
      }
    }
    buffer.strides.assign(proto.strides().begin(), proto.strides().end());
  }
  return buffer;
}

absl::StatusOr<plan::Transfer> TransferFromProto(const v1::Transfer& proto, int rank, int channel,
                                                 absl::string_view path) {
  plan::Transfer t;
  if (!proto.has_id()) return FieldError(Field(path, "id"), "missing");
  ASSIGN_OR_RETURN(t.id, NonNegative(proto.id(), Field(path, "id")));
  ASSIGN_OR_RETURN(t.kind, KindFromProto(proto.kind(), Field(path, "kind")));
  t.rank = rank;
  t.channel = channel;
  if (proto.has_peer()) {
    ASSIGN_OR_RETURN(t.peer, NonNegative(proto.peer(), Field(path, "peer")));
  } else if (t.kind == plan::TransferKind::kLocalCopy) {
    t.peer = rank;
  } else {
    return FieldError(Field(path, "peer"),
                      absl::StrCat("missing (required for ", plan::TransferKindName(t.kind), ")"));
  }
  RETURN_IF_ERROR(CheckName(proto.src_buffer(), Field(path, "src_buffer")));
  t.src_buffer = proto.src_buffer();
  ASSIGN_OR_RETURN(t.src_region, RequiredRegion(proto.has_src_region(), proto.src_region(),
                                                Field(path, "src_region")));
  RETURN_IF_ERROR(CheckName(proto.dst_buffer(), Field(path, "dst_buffer")));
  t.dst_buffer = proto.dst_buffer();
  ASSIGN_OR_RETURN(t.dst_region, RequiredRegion(proto.has_dst_region(), proto.dst_region(),
                                                Field(path, "dst_region")));
  ASSIGN_OR_RETURN(t.chunk, NonNegative(proto.chunk(), Field(path, "chunk")));
  ASSIGN_OR_RETURN(t.step, NonNegative(proto.step(), Field(path, "step")));
  ASSIGN_OR_RETURN(t.reduce, ReduceFromProto(proto.reduce(), Field(path, "reduce")));
  for (int i = 0; i < proto.deps_size(); ++i) {
    ASSIGN_OR_RETURN(int dep, NonNegative(proto.deps(i), Index(path, "deps", i)));
    t.deps.push_back(dep);
  }
  t.after_compute = proto.after_compute();
  if (proto.has_signal()) {
    ASSIGN_OR_RETURN(t.signal, NonNegative(proto.signal(), Field(path, "signal")));
  } else {
    t.signal = -1;
  }
  return t;
}

absl::StatusOr<plan::RankPlan> RankFromProto(const v1::RankPlan& proto, int rank,
                                             absl::string_view path) {
  if (proto.has_rank() && proto.rank() != rank) {
    return FieldError(Field(path, "rank"),
                      absl::StrFormat("is %d but the entry is at index %d", proto.rank(), rank));
  }
  plan::RankPlan out;
  out.channels.resize(proto.channels_size());
  for (int c = 0; c < proto.channels_size(); ++c) {
    const v1::Channel& channel = proto.channels(c);
    std::string channel_path = Index(path, "channels", c);
    for (int i = 0; i < channel.transfers_size(); ++i) {
      ASSIGN_OR_RETURN(plan::Transfer t, TransferFromProto(channel.transfers(i), rank, c,
                                                           Index(channel_path, "transfers", i)));
      out.channels[c].push_back(std::move(t));
    }
  }
  for (int i = 0; i < proto.initial_size(); ++i) {
    const v1::InitialRegion& initial = proto.initial(i);
    std::string initial_path = Index(path, "initial", i);
    RETURN_IF_ERROR(CheckName(initial.buffer(), Field(initial_path, "buffer")));
    if (out.initial.contains(initial.buffer())) {
      return FieldError(Field(initial_path, "buffer"),
                        absl::StrCat("\"", initial.buffer(), "\" appears twice"));
    }
    ASSIGN_OR_RETURN(Region region, RequiredRegion(initial.has_region(), initial.region(),
                                                   Field(initial_path, "region")));
    out.initial.emplace(initial.buffer(), std::move(region));
  }
  return out;
}

absl::StatusOr<plan::Contribution> ContributionFromProto(const v1::Contribution& proto,
                                                         absl::string_view path) {
  plan::Contribution c;
  ASSIGN_OR_RETURN(c.rank, NonNegative(proto.rank(), Field(path, "rank")));
  RETURN_IF_ERROR(CheckName(proto.buffer(), Field(path, "buffer")));
  c.buffer = proto.buffer();
  ASSIGN_OR_RETURN(c.region,
                   RequiredRegion(proto.has_region(), proto.region(), Field(path, "region")));
  return c;
}

absl::StatusOr<plan::Expectation> ExpectationFromProto(const v1::Expectation& proto,
                                                       absl::string_view path) {
  plan::Expectation e;
  ASSIGN_OR_RETURN(e.rank, NonNegative(proto.rank(), Field(path, "rank")));
  RETURN_IF_ERROR(CheckName(proto.buffer(), Field(path, "buffer")));
  e.buffer = proto.buffer();
  ASSIGN_OR_RETURN(e.region,
                   RequiredRegion(proto.has_region(), proto.region(), Field(path, "region")));
  ASSIGN_OR_RETURN(e.op, ReduceFromProto(proto.op(), Field(path, "op")));
  if (proto.sources_size() == 0) return FieldError(Field(path, "sources"), "missing");
  for (int i = 0; i < proto.sources_size(); ++i) {
    ASSIGN_OR_RETURN(plan::Contribution c,
                     ContributionFromProto(proto.sources(i), Index(path, "sources", i)));
    e.sources.push_back(std::move(c));
  }
  return e;
}

}  // namespace

v1::DType ToProto(plan::DType dtype) {
  switch (dtype) {
    case plan::DType::kF32:
      return v1::DTYPE_F32;
    case plan::DType::kF16:
      return v1::DTYPE_F16;
    case plan::DType::kBF16:
      return v1::DTYPE_BF16;
    case plan::DType::kF64:
      return v1::DTYPE_F64;
    case plan::DType::kI32:
      return v1::DTYPE_I32;
    case plan::DType::kI64:
      return v1::DTYPE_I64;
    case plan::DType::kI8:
      return v1::DTYPE_I8;
    case plan::DType::kU8:
      return v1::DTYPE_U8;
  }
  return v1::DTYPE_UNSPECIFIED;
}

absl::StatusOr<plan::DType> FromProto(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_F32:
      return plan::DType::kF32;
    case v1::DTYPE_F16:
      return plan::DType::kF16;
    case v1::DTYPE_BF16:
      return plan::DType::kBF16;
    case v1::DTYPE_F64:
      return plan::DType::kF64;
    case v1::DTYPE_I32:
      return plan::DType::kI32;
    case v1::DTYPE_I64:
      return plan::DType::kI64;
    case v1::DTYPE_I8:
      return plan::DType::kI8;
    case v1::DTYPE_U8:
      return plan::DType::kU8;
    case v1::DTYPE_UNSPECIFIED:
      return absl::InvalidArgumentError("missing (DTYPE_UNSPECIFIED)");
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unknown dtype value ", static_cast<int>(dtype)));
  }
}

v1::ReduceOp ToProto(plan::ReduceOp op) {
  switch (op) {
    case plan::ReduceOp::kNone:
      return v1::REDUCE_OP_NONE;
    case plan::ReduceOp::kSum:
      return v1::REDUCE_OP_SUM;
    case plan::ReduceOp::kMax:
      return v1::REDUCE_OP_MAX;
  }
  return v1::REDUCE_OP_NONE;
}

absl::StatusOr<plan::ReduceOp> FromProto(v1::ReduceOp op) {
  switch (op) {
    case v1::REDUCE_OP_NONE:
      return plan::ReduceOp::kNone;
    case v1::REDUCE_OP_SUM:
      return plan::ReduceOp::kSum;
    case v1::REDUCE_OP_MAX:
      return plan::ReduceOp::kMax;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unknown reduce op value ", static_cast<int>(op)));
  }
}

v1::Plan ToProto(const plan::Plan& plan) {
  v1::Plan out;
  out.set_format_version(kPlanFormatVersion);
  out.set_name(plan.name);
  out.set_collective(CollectiveToProto(plan.collective));
  out.set_world_size(plan.world_size);
  for (const plan::BufferSpec& buffer : plan.buffers) {
    v1::Buffer* b = out.add_buffers();
    b->set_name(buffer.name);
    b->set_dtype(ToProto(buffer.dtype));
    b->mutable_shape()->Add(buffer.shape.begin(), buffer.shape.end());
    // Written even when row-major, so the round trip keeps the plan (and its hash) exactly.
    b->mutable_strides()->Add(buffer.strides.begin(), buffer.strides.end());
  }
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    const plan::RankPlan& rank = plan.ranks[r];
    v1::RankPlan* rp = out.add_ranks();
    rp->set_rank(static_cast<int>(r));
    for (const auto& channel : rank.channels) {
      v1::Channel* ch = rp->add_channels();
      for (const plan::Transfer& t : channel) {
        v1::Transfer* pt = ch->add_transfers();
        pt->set_id(t.id);
        pt->set_kind(KindToProto(t.kind));
        pt->set_peer(t.peer);
        pt->set_src_buffer(t.src_buffer);
        RegionToProto(t.src_region, pt->mutable_src_region());
        pt->set_dst_buffer(t.dst_buffer);
        RegionToProto(t.dst_region, pt->mutable_dst_region());
        pt->set_chunk(t.chunk);
        pt->set_step(t.step);
        pt->set_reduce(ToProto(t.reduce));
        pt->mutable_deps()->Add(t.deps.begin(), t.deps.end());
        pt->set_after_compute(t.after_compute);
        if (t.signal >= 0) pt->set_signal(t.signal);
      }
    }
    for (const auto& [buffer, region] : rank.initial) {
      v1::InitialRegion* initial = rp->add_initial();
      initial->set_buffer(buffer);
      RegionToProto(region, initial->mutable_region());
    }
  }
  for (const plan::Expectation& e : plan.postcondition) {
    v1::Expectation* pe = out.add_postcondition();
    pe->set_rank(e.rank);
    pe->set_buffer(e.buffer);
    RegionToProto(e.region, pe->mutable_region());
    pe->set_op(ToProto(e.op));
    for (const plan::Contribution& c : e.sources) {
      v1::Contribution* pc = pe->add_sources();
      pc->set_rank(c.rank);
      pc->set_buffer(c.buffer);
      RegionToProto(c.region, pc->mutable_region());
    }
  }
  return out;
}

absl::StatusOr<plan::Plan> FromProto(const v1::Plan& proto) {
  if (proto.format_version() > kPlanFormatVersion) {
    return FieldError("format_version",
                      absl::StrFormat("%d is newer than this build reads (%d)",
                                      proto.format_version(), kPlanFormatVersion));
  }
  plan::Plan out;
  out.name = proto.name();
  ASSIGN_OR_RETURN(out.collective, CollectiveFromProto(proto.collective(), "collective"));
  if (proto.world_size() < 1) {
    return FieldError("world_size", absl::StrCat("must be >= 1, got ", proto.world_size()));
  }
  out.world_size = proto.world_size();
  if (proto.ranks_size() != proto.world_size()) {
    return FieldError("ranks", absl::StrFormat("has %d entries, world_size is %d",
                                               proto.ranks_size(), proto.world_size()));
  }
  std::set<std::string> buffer_names;
  for (int i = 0; i < proto.buffers_size(); ++i) {
    std::string path = Index("", "buffers", i);
    ASSIGN_OR_RETURN(plan::BufferSpec buffer, BufferFromProto(proto.buffers(i), path));
    if (!buffer_names.insert(buffer.name).second) {
      return FieldError(Field(path, "name"), absl::StrCat("\"", buffer.name, "\" appears twice"));
    }
    out.buffers.push_back(std::move(buffer));
  }
  for (int r = 0; r < proto.ranks_size(); ++r) {
    ASSIGN_OR_RETURN(plan::RankPlan rank, RankFromProto(proto.ranks(r), r, Index("", "ranks", r)));
    out.ranks.push_back(std::move(rank));
  }
  for (int i = 0; i < proto.postcondition_size(); ++i) {
    ASSIGN_OR_RETURN(plan::Expectation e,
                     ExpectationFromProto(proto.postcondition(i), Index("", "postcondition", i)));
    out.postcondition.push_back(std::move(e));
  }
  if (!proto.plan_hash().empty()) {
    std::string hash = plan::PlanHash(out);
    if (hash != proto.plan_hash()) {
      return FieldError(
          "plan_hash", absl::StrFormat("is %s but the plan hashes to %s", proto.plan_hash(), hash));
    }
  }
  return out;
}

v1::TemplateRequest ToProto(const TemplateRequest& request) {
  v1::TemplateRequest out;
  const plan::TemplateParams& p = request.params;
  out.set_template_name(request.name);
  out.set_world_size(p.world_size);
  out.mutable_shape()->Add(p.shape.begin(), p.shape.end());
  out.set_dtype(ToProto(p.dtype));
  out.set_axis(p.axis);
  out.set_chunks_per_shard(p.chunks_per_shard);
  out.set_op(ToProto(p.op));
  out.set_ranks_per_node(p.ranks_per_node);
  out.set_sub_collectives(p.sub_collectives);
  for (const auto& row : p.splits) {
    out.add_splits()->mutable_rows()->Add(row.begin(), row.end());
  }
  out.set_split(request.split);
  return out;
}

absl::StatusOr<TemplateRequest> FromProto(const v1::TemplateRequest& proto) {
  TemplateRequest out;
  plan::TemplateParams& p = out.params;
  RETURN_IF_ERROR(CheckName(proto.template_name(), "template_name"));
  out.name = proto.template_name();
  if (proto.world_size() < 1) {
    return FieldError("world_size", absl::StrCat("must be >= 1, got ", proto.world_size()));
  }
  p.world_size = proto.world_size();
  if (proto.shape_size() == 0) return FieldError("shape", "missing");
  for (int i = 0; i < proto.shape_size(); ++i) {
    if (proto.shape(i) < 0) {
      return FieldError(Index("", "shape", i), absl::StrCat("negative extent ", proto.shape(i)));
    }
  }
  p.shape.assign(proto.shape().begin(), proto.shape().end());
  ASSIGN_OR_RETURN(p.dtype, DTypeFromProto(proto.dtype(), "dtype"));
  ASSIGN_OR_RETURN(p.axis, NonNegative(proto.axis(), "axis"));
  if (proto.has_chunks_per_shard()) {
    if (proto.chunks_per_shard() < 1) {
      return FieldError("chunks_per_shard",
                        absl::StrCat("must be >= 1, got ", proto.chunks_per_shard()));
    }
    p.chunks_per_shard = proto.chunks_per_shard();
  }
  if (proto.has_op()) {
    ASSIGN_OR_RETURN(p.op, ReduceFromProto(proto.op(), "op"));
  }
  ASSIGN_OR_RETURN(p.ranks_per_node, NonNegative(proto.ranks_per_node(), "ranks_per_node"));
  if (proto.has_sub_collectives()) {
    if (proto.sub_collectives() < 1) {
      return FieldError("sub_collectives",
                        absl::StrCat("must be >= 1, got ", proto.sub_collectives()));
    }
    p.sub_collectives = proto.sub_collectives();
  }
  for (int i = 0; i < proto.splits_size(); ++i) {
    const v1::SplitRow& row = proto.splits(i);
    for (int j = 0; j < row.rows_size(); ++j) {
      if (row.rows(j) < 0) {
        return FieldError(absl::StrFormat("splits[%d].rows[%d]", i, j),
                          absl::StrCat("negative row count ", row.rows(j)));
      }
    }
    p.splits.emplace_back(row.rows().begin(), row.rows().end());
  }
  ASSIGN_OR_RETURN(out.split, NonNegative(proto.split(), "split"));
  return out;
}

absl::StatusOr<plan::Plan> BuildTemplateRequest(const TemplateRequest& request) {
  ASSIGN_OR_RETURN(plan::Plan built, plan::BuildTemplate(request.name, request.params));
  if (request.split > 1) return plan::SplitPlan(built, request.split);
  return built;
}

}  // namespace syncopate::plan_io
