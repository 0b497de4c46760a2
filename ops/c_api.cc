// The C ABI's op handles (syncopate/syncopate_ops.h) over syncopate::ops::Op: each entry point
// checks its handle, converts the caller's structs (c_abi_common.h), calls the C++ API and
// records the message of a failure for syncopate_last_error(). Nothing throws across the
// boundary. The pure entry points are c_abi_pure.cc's.
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

#include "ops/c_abi_common.h"
#include "syncopate/ops.h"
#include "syncopate/syncopate_ops.h"

struct syncopate_op {
  std::unique_ptr<syncopate::ops::Op> op;
};

namespace {

using syncopate::Result;
using syncopate::Status;
using syncopate::ops::c_abi::Guarded;
using syncopate::ops::c_abi::Invalid;
using syncopate::ops::c_abi::ToCPath;
using syncopate::ops::c_abi::ToGroupConfig;
using syncopate::ops::c_abi::ToOpConfig;
namespace ops = syncopate::ops;

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

}  // namespace

// The C ABI's names (syncopate_ops.h), not the C++ style.
// NOLINTBEGIN(readability-identifier-naming)
extern "C" {

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
