// The C ABI's pure entry points (no GPU touched) and the struct conversions every entry point
// uses (c_abi_common.h). Nothing throws across the boundary.
#include <cstddef>
#include <cstring>
#include <string>

#include "ops/c_abi_common.h"
#include "ops/c_bootstrap.h"

// Whether a caller's struct (of at least the ABI's first size, CheckStruct) reaches past
// `member`: a field a later header appended, which an older caller's struct lacks.
#define SYNCOPATE_HAS_FIELD(s, type, member) \
  ((s)->struct_size >= offsetof(type, member) + sizeof((s)->member))

namespace syncopate::ops::c_abi {
namespace {

thread_local std::string last_error;

// A caller's struct: not NULL, and at least `required_size` bytes (struct_size first): its fields
// the header marks required. A caller built against an older header passes fewer bytes than
// this library's struct; the later fields it lacks take their defaults (inputs) or are not
// written (outputs), checked with SYNCOPATE_HAS_FIELD.
template <class CStruct>
Status CheckStruct(const CStruct* in, const char* what, const char* type, size_t required_size) {
  if (in == nullptr) return Status(StatusCode::kInvalidArgument, std::string(what) + " is NULL");
  if (in->struct_size < required_size) {
    return Status(StatusCode::kInvalidArgument,
                  std::string(what) + " struct_size " + std::to_string(in->struct_size) + " < " +
                      std::to_string(required_size) + " (set it to sizeof(" + type + "))");
  }
  return Status::Ok();
}

// Each struct's required size: its fields up to the first one appended after them (tile_parts);
// every field of the group config is required.
constexpr size_t kGroupConfigRequiredSize = sizeof(syncopate_group_config);
constexpr size_t kOpConfigRequiredSize = offsetof(syncopate_op_config, tile_parts);
constexpr size_t kPathRequiredSize = offsetof(syncopate_path, tile_parts);

}  // namespace

Status ToGroupConfig(const syncopate_group_config* in, ops::GroupConfig& out) {
  if (Status s =
          CheckStruct(in, "group config", "syncopate_group_config", kGroupConfigRequiredSize);
      !s.ok())
    return s;
  out.job = in->job != nullptr ? in->job : "";
  out.rank = in->rank;
  out.world = in->world;
  out.device = in->device;
  if (in->rendezvous_timeout_ms != 0) out.rendezvous_timeout_ms = in->rendezvous_timeout_ms;
  out.rendezvous_dir = in->rendezvous_dir != nullptr ? in->rendezvous_dir : "";
  if (in->bootstrap != nullptr)
    out.bootstrap = ops::BootstrapOf(in->bootstrap, in->bootstrap_user_data);
  return Status::Ok();
}

Status ToOpConfig(const syncopate_op_config* in, ops::OpConfig& out) {
  if (Status s = CheckStruct(in, "op config", "syncopate_op_config", kOpConfigRequiredSize);
      !s.ok())
    return s;
  if (in->num_buckets < 0 || in->num_buckets > SYNCOPATE_MAX_BUCKETS) {
    return Status(StatusCode::kInvalidArgument,
                  "op config num_buckets " + std::to_string(in->num_buckets) + " is not in 0.." +
                      std::to_string(SYNCOPATE_MAX_BUCKETS));
  }
  // Enums are range-checked by CheckConfig, which names the field.
  out.kind = static_cast<ops::OpKind>(in->kind);
  out.max_m = in->max_m;
  out.n = in->n;
  out.k = in->k;
  out.dtype = static_cast<ops::DType>(in->dtype);
  out.backend = static_cast<ops::Backend>(in->backend);
  out.path = static_cast<ops::PathPreference>(in->path);
  out.m_buckets.assign(in->m_buckets, in->m_buckets + in->num_buckets);
  out.chunks = in->chunks;
  out.comm_ctas = in->comm_ctas;
  if (in->timeout_ms != 0) out.timeout_ms = in->timeout_ms;
  out.cache_dir = in->cache_dir != nullptr ? in->cache_dir : "";
  if (in->num_bucket_paths < 0 || in->num_bucket_paths > SYNCOPATE_MAX_BUCKETS) {
    return Status(StatusCode::kInvalidArgument,
                  "op config num_bucket_paths " + std::to_string(in->num_bucket_paths) +
                      " is not in 0.." + std::to_string(SYNCOPATE_MAX_BUCKETS));
  }
  for (int i = 0; i < in->num_bucket_paths; ++i) {
    const syncopate_bucket_path& p = in->bucket_paths[i];
    out.bucket_paths.push_back({.bucket_m = p.bucket_m,
                                .fused = p.fused != 0,
                                .backend = static_cast<ops::Backend>(p.backend),
                                .chunks = p.chunks});
  }
  const int32_t tile_parts =
      SYNCOPATE_HAS_FIELD(in, syncopate_op_config, tile_parts) ? in->tile_parts : 0;
  if (tile_parts < -1 || tile_parts > 1) {
    return Status(StatusCode::kInvalidArgument, "op config tile_parts " +
                                                    std::to_string(tile_parts) +
                                                    " is not -1 (off), 0 (the default) or 1 (on)");
  }
  if (tile_parts != 0) out.tile_parts = tile_parts > 0;
  return Status::Ok();
}

// `text` into a caller's char array, NUL-terminated, truncated to fit.
template <size_t kSize>
void CopyTruncated(const std::string& text, char (&to)[kSize]) {
  std::strncpy(to, text.c_str(), kSize - 1);
  to[kSize - 1] = '\0';
}

Status ToCPath(const Result<ops::PathChoice>& choice, syncopate_path* out) {
  if (!choice.ok()) return choice.status();
  if (Status s = CheckStruct(out, "path", "syncopate_path", kPathRequiredSize); !s.ok()) return s;
  out->m = choice->m;
  out->bucket_m = choice->bucket_m;
  out->fused = choice->fused ? 1 : 0;
  out->backend = static_cast<int32_t>(choice->backend);
  out->chunks = choice->chunks;
  CopyTruncated(choice->reason, out->reason);
  if (SYNCOPATE_HAS_FIELD(out, syncopate_path, tile_parts)) {
    out->tile_parts = choice->tile_parts ? 1 : 0;
  }
  if (SYNCOPATE_HAS_FIELD(out, syncopate_path, plan)) CopyTruncated(choice->plan, out->plan);
  return Status::Ok();
}

int32_t Report(const Status& status) {
  last_error = status.ok() ? "" : status.message();
  return static_cast<int32_t>(status.code());
}

int32_t Invalid(const std::string& message) {
  return Report(Status(StatusCode::kInvalidArgument, message));
}

const char* LastError() { return last_error.c_str(); }

}  // namespace syncopate::ops::c_abi

using syncopate::Status;
using syncopate::StatusCode;
using syncopate::ops::c_abi::Guarded;
using syncopate::ops::c_abi::Invalid;
using syncopate::ops::c_abi::ToCPath;
using syncopate::ops::c_abi::ToGroupConfig;
using syncopate::ops::c_abi::ToOpConfig;
namespace ops = syncopate::ops;

// The C ABI's names (syncopate_ops.h), not the C++ style.
// NOLINTBEGIN(readability-identifier-naming)
extern "C" {

const char* syncopate_last_error(void) { return syncopate::ops::c_abi::LastError(); }

int32_t syncopate_abi_version(void) { return SYNCOPATE_ABI_VERSION; }

const char* syncopate_status_name(int32_t status) {
  return syncopate::StatusCodeName(static_cast<StatusCode>(status));
}

int32_t syncopate_check_config(const syncopate_group_config* group,
                               const syncopate_op_config* config) {
  return Guarded([&] {
    ops::GroupConfig g;
    ops::OpConfig c;
    Status s = ToGroupConfig(group, g);
    if (s.ok()) s = ToOpConfig(config, c);
    return s.ok() ? ops::CheckConfig(g, c) : s;
  });
}

int32_t syncopate_choose_path(const syncopate_op_config* config, int32_t world, int64_t m,
                              syncopate_path* out) {
  if (out == nullptr) return Invalid("path output is NULL");
  return Guarded([&] {
    ops::OpConfig c;
    Status s = ToOpConfig(config, c);
    if (!s.ok()) return s;
    ops::GroupConfig g;
    g.job = "check";
    g.world = world;
    s = ops::CheckConfig(g, c);
    if (!s.ok()) return s;
    return ToCPath(ops::ChoosePath(c, world, m), out);
  });
}

}  // extern "C"
// NOLINTEND(readability-identifier-naming)
