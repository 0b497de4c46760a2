// The C ABI (syncopate/syncopate_ops.h) over syncopate::ops::Op. Each entry point converts the
// caller's structs (checking struct_size first: a caller built against an older header passes
// fewer bytes), calls the C++ API and records the message of a failure for
// syncopate_last_error(). Nothing throws across the boundary.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "ops/c_bootstrap.h"
#include "syncopate/ops.h"
#include "syncopate/syncopate_ops.h"

struct syncopate_op {
  std::unique_ptr<syncopate::ops::Op> op;
};

namespace {

using syncopate::Result;
using syncopate::Status;
using syncopate::StatusCode;
namespace ops = syncopate::ops;

thread_local std::string last_error;

// The handles syncopate_op_create returned and syncopate_op_destroy has not destroyed. Every
// entry point checks its handle here first, so a destroyed (or made-up) handle is an error, not
// a use after free; a second destroy does nothing. The one lock costs tens of nanoseconds per
// call against the run call's microseconds. A handle whose address a later create reuses reads
// as that op: the check cannot tell them apart.
class LiveOps {
 public:
  void Add(const syncopate_op* op) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.insert(op);
  }
  bool Remove(const syncopate_op* op) {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.erase(op) > 0;
  }
  bool Contains(const syncopate_op* op) const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.count(op) > 0;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_set<const syncopate_op*> live_;
};

LiveOps& Live() {
  static auto* live = new LiveOps();  // never destroyed: ops may be destroyed at exit
  return *live;
}

int32_t Report(const Status& status) {
  last_error = status.ok() ? "" : status.message();
  return static_cast<int32_t>(status.code());
}

int32_t Invalid(const std::string& message) {
  return Report(Status(StatusCode::kInvalidArgument, message));
}

int32_t NotLive(const syncopate_op* op) {
  char address[32];
  std::snprintf(address, sizeof(address), "%p", static_cast<const void*>(op));
  return Invalid(std::string("op ") + address +
                 " is not a live op (destroyed, or not returned by syncopate_op_create)");
}

// INVALID_ARGUMENT naming the handle unless it is a live op; SYNCOPATE_OK otherwise.
int32_t CheckLive(const syncopate_op* op) {
  if (op == nullptr) return Invalid("op is NULL");
  return Live().Contains(op) ? SYNCOPATE_OK : NotLive(op);
}

// Runs `body` (returning a Status), turning any C++ exception into INTERNAL.
template <class Body>
int32_t Guarded(Body&& body) {
  try {
    return Report(body());
  } catch (const std::exception& e) {
    return Report(Status(StatusCode::kInternal, std::string("syncopate: exception: ") + e.what()));
  } catch (...) {
    return Report(Status(StatusCode::kInternal, "syncopate: unknown exception"));
  }
}

// Whether a caller's struct (of at least the ABI's first size, CheckStruct) reaches past
// `member`: a field a later header appended, which an older caller's struct lacks.
#define SYNCOPATE_HAS_FIELD(s, type, member) \
  ((s)->struct_size >= offsetof(type, member) + sizeof((s)->member))

// A caller's struct: not NULL, and at least `first_size` bytes (struct_size first): the size of
// this ABI version's first release of it. A caller built against an older header passes fewer
// bytes than this library's struct; the fields it lacks take their defaults (inputs) or are not
// written (outputs), checked with SYNCOPATE_HAS_FIELD.
template <class CStruct>
Status CheckStruct(const CStruct* in, const char* what, const char* type, size_t first_size) {
  if (in == nullptr) return Status(StatusCode::kInvalidArgument, std::string(what) + " is NULL");
  if (in->struct_size < first_size) {
    return Status(StatusCode::kInvalidArgument,
                  std::string(what) + " struct_size " + std::to_string(in->struct_size) + " < " +
                      std::to_string(first_size) + " (set it to sizeof(" + type + "))");
  }
  return Status::Ok();
}

// Each struct's first size: the fields up to the first one a later header appended.
constexpr size_t kGroupConfigFirstSize = sizeof(syncopate_group_config);
constexpr size_t kOpConfigFirstSize = offsetof(syncopate_op_config, tile_parts);
constexpr size_t kPathFirstSize = offsetof(syncopate_path, tile_parts);

Status ToGroupConfig(const syncopate_group_config* in, ops::GroupConfig& out) {
  if (Status s = CheckStruct(in, "group config", "syncopate_group_config", kGroupConfigFirstSize);
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
  if (Status s = CheckStruct(in, "op config", "syncopate_op_config", kOpConfigFirstSize); !s.ok())
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
  if (Status s = CheckStruct(out, "path", "syncopate_path", kPathFirstSize); !s.ok()) return s;
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

}  // namespace

// The C ABI's names (syncopate_ops.h), not the C++ style.
// NOLINTBEGIN(readability-identifier-naming)
extern "C" {

const char* syncopate_last_error(void) { return last_error.c_str(); }

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

int32_t syncopate_op_create(const syncopate_group_config* group, const syncopate_op_config* config,
                            syncopate_op** out) {
  if (out == nullptr) return Invalid("op output is NULL");
  *out = nullptr;
  return Guarded([&] {
    ops::GroupConfig g;
    ops::OpConfig c;
    Status s = ToGroupConfig(group, g);
    if (s.ok()) s = ToOpConfig(config, c);
    if (!s.ok()) return s;
    Result<std::unique_ptr<ops::Op>> op = ops::Op::Create(g, c);
    if (!op.ok()) return op.status();
    *out = new syncopate_op{std::move(*op)};
    Live().Add(*out);
    return Status::Ok();
  });
}

int32_t syncopate_op_run(syncopate_op* op, int64_t m, uint64_t a, uint64_t b, uint64_t c,
                         uint64_t a_gathered, void* stream) {
  if (const int32_t live = CheckLive(op); live != SYNCOPATE_OK) return live;
  return Guarded([&] {
    return op->op->Run({.m = m, .a = a, .b = b, .c = c, .a_gathered = a_gathered},
                       static_cast<CUstream>(stream));
  });
}

int32_t syncopate_op_synchronize(syncopate_op* op, void* stream) {
  if (const int32_t live = CheckLive(op); live != SYNCOPATE_OK) return live;
  return Guarded([&] { return op->op->Synchronize(static_cast<CUstream>(stream)); });
}

int32_t syncopate_op_error(const syncopate_op* op) {
  if (const int32_t live = CheckLive(op); live != SYNCOPATE_OK) return live;
  return Guarded([&] { return op->op->error(); });
}

int32_t syncopate_op_path(const syncopate_op* op, int64_t m, syncopate_path* out) {
  if (const int32_t live = CheckLive(op); live != SYNCOPATE_OK) return live;
  if (out == nullptr) return Invalid("path output is NULL");
  return Guarded([&] { return ToCPath(op->op->Path(m), out); });
}

uint64_t syncopate_op_input_workspace(const syncopate_op* op, int64_t m) {
  if (CheckLive(op) != SYNCOPATE_OK) return 0;
  uint64_t address = 0;
  Guarded([&] {
    address = op->op->InputWorkspace(m);
    // 0: Path says why (an M out of range); OK where the op has no input workspace.
    return address != 0 ? Status::Ok() : op->op->Path(m).status();
  });
  return address;
}

void syncopate_op_destroy(syncopate_op* op) {
  if (op == nullptr) return;
  if (!Live().Remove(op)) {  // destroyed before, or never created: nothing to free
    NotLive(op);             // says so in syncopate_last_error()
    return;
  }
  delete op;
}

}  // extern "C"
// NOLINTEND(readability-identifier-naming)
