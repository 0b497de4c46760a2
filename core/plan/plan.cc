// Plan model helpers: enum names, buffers, id lookup, canonical encoding and plan hash.
// Pure functions on value types; thread-compatible.
//
// Canonical encoding, version 1 (one item per line, '\n' line ends, no trailing spaces; strings
// are C-escaped and double-quoted; regions in Region::ToString form; lists comma-separated, "-"
// when empty; booleans 0/1):
//
//   syncopate-plan v1
//   name "<name>"
//   collective <allgather|...>
//   world_size <n>
//   buffers <count>
//   buffer "<name>" dtype <f32|...> shape <d0,d1,...> strides <s0,s1,...>
//   ranks <count>
//   rank <r> channels <count> initial <count>
//   initial "<buffer>" <region>                  (sorted by buffer name)
//   channel <c> transfers <count>
//   transfer id <id> kind <push|pull|local_copy> rank <r> channel <c> peer <p>
//       src "<buffer>" <region> dst "<buffer>" <region> chunk <k> step <s> reduce <op>
//       deps <ids> after_compute <0|1> signal <sig>        (all on one line)
//   postcondition <count>
//   expect rank <r> buffer "<buffer>" region <region> op <op> sources <count>
//   source rank <r> buffer "<buffer>" region <region>
//   end
//
// Order is the plan's own order everywhere (buffers, channels, transfers, expectations), because
// that order is meaningful (program order, element order) and part of what the hash pins down.
#include "core/plan/plan.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/sha256.h"

namespace syncopate::plan {

int64_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF16:
      return 2;
    case DType::kBF16:
      return 2;
    case DType::kF64:
      return 8;
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
    case DType::kI8:
      return 1;
    case DType::kU8:
      return 1;
  }
  return 0;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kF64:
      return "f64";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
    case DType::kI8:
      return "i8";
    case DType::kU8:
      return "u8";
  }
  return "unknown";
}

absl::StatusOr<DType> ParseDType(std::string_view name) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI32, DType::kI64,
                  DType::kI8, DType::kU8}) {
    if (name == DTypeName(d)) return d;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype \"", std::string(name),
                   "\" (expected one of f32, f16, bf16, f64, i32, i64, i8, u8)"));
}

const char* TransferKindName(TransferKind kind) {
  switch (kind) {
    case TransferKind::kPush:
      return "push";
    case TransferKind::kPull:
      return "pull";
    case TransferKind::kLocalCopy:
      return "local_copy";
  }
  return "unknown";
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kNone:
      return "none";
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMax:
      return "max";
  }
  return "unknown";
}

const char* CollectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kCustom:
      return "custom";
    case CollectiveKind::kAllGather:
      return "allgather";
    case CollectiveKind::kReduceScatter:
      return "reducescatter";
    case CollectiveKind::kAllReduce:
      return "allreduce";
    case CollectiveKind::kAllToAll:
      return "alltoall";
  }
  return "unknown";
}

int64_t BufferSpec::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

BufferSpec MakeBuffer(std::string name, DType dtype, Shape shape) {
  BufferSpec spec;
  spec.name = std::move(name);
  spec.dtype = dtype;
  spec.strides = RowMajorStrides(shape);
  spec.shape = std::move(shape);
  return spec;
}

const BufferSpec* Plan::FindBuffer(std::string_view name) const {
  for (const BufferSpec& b : buffers) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

int Plan::NumTransfers() const {
  int n = 0;
  for (const RankPlan& r : ranks) {
    for (const auto& ch : r.channels) n += static_cast<int>(ch.size());
  }
  return n;
}

std::vector<const Transfer*> Plan::TransfersById() const {
  // Sized by the largest id so malformed (sparse or out-of-range) ids do not write out of
  // bounds; negative ids are skipped. ValidatePlan reports those.
  int max_id = -1;
  for (const RankPlan& r : ranks) {
    for (const auto& ch : r.channels) {
      for (const Transfer& t : ch) max_id = std::max(max_id, t.id);
    }
  }
  std::vector<const Transfer*> out(std::max(max_id + 1, NumTransfers()), nullptr);
  for (const RankPlan& r : ranks) {
    for (const auto& ch : r.channels) {
      for (const Transfer& t : ch) {
        if (t.id >= 0) out[t.id] = &t;
      }
    }
  }
  return out;
}

namespace {

std::string Quote(const std::string& s) { return absl::StrCat("\"", absl::CEscape(s), "\""); }

std::string IntList(const std::vector<int64_t>& v) {
  return v.empty() ? "-" : absl::StrJoin(v, ",");
}
std::string IntList(const std::vector<int>& v) { return v.empty() ? "-" : absl::StrJoin(v, ","); }

void EncodeTransfer(const Transfer& t, std::string& out) {
  absl::StrAppend(&out, "transfer id ", t.id, " kind ", TransferKindName(t.kind), " rank ", t.rank,
                  " channel ", t.channel, " peer ", t.peer, " src ", Quote(t.src_buffer), " ",
                  t.src_region.ToString(), " dst ", Quote(t.dst_buffer), " ",
                  t.dst_region.ToString(), " chunk ", t.chunk, " step ", t.step, " reduce ",
                  ReduceOpName(t.reduce), " deps ", IntList(t.deps), " after_compute ",
                  t.after_compute ? 1 : 0, " signal ", t.signal, "\n");
}

}  // namespace

std::string CanonicalEncoding(const Plan& plan) {
  std::string out = "syncopate-plan v1\n";
  absl::StrAppend(&out, "name ", Quote(plan.name), "\n");
  absl::StrAppend(&out, "collective ", CollectiveKindName(plan.collective), "\n");
  absl::StrAppend(&out, "world_size ", plan.world_size, "\n");
  absl::StrAppend(&out, "buffers ", plan.buffers.size(), "\n");
  for (const BufferSpec& b : plan.buffers) {
    absl::StrAppend(&out, "buffer ", Quote(b.name), " dtype ", DTypeName(b.dtype), " shape ",
                    IntList(b.shape), " strides ", IntList(b.strides), "\n");
  }
  absl::StrAppend(&out, "ranks ", plan.ranks.size(), "\n");
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    const RankPlan& rp = plan.ranks[r];
    absl::StrAppend(&out, "rank ", r, " channels ", rp.channels.size(), " initial ",
                    rp.initial.size(), "\n");
    for (const auto& [buffer, region] : rp.initial) {  // std::map: sorted by name
      absl::StrAppend(&out, "initial ", Quote(buffer), " ", region.ToString(), "\n");
    }
    for (size_t c = 0; c < rp.channels.size(); ++c) {
      absl::StrAppend(&out, "channel ", c, " transfers ", rp.channels[c].size(), "\n");
      for (const Transfer& t : rp.channels[c]) EncodeTransfer(t, out);
    }
  }
  absl::StrAppend(&out, "postcondition ", plan.postcondition.size(), "\n");
  for (const Expectation& e : plan.postcondition) {
    absl::StrAppend(&out, "expect rank ", e.rank, " buffer ", Quote(e.buffer), " region ",
                    e.region.ToString(), " op ", ReduceOpName(e.op), " sources ", e.sources.size(),
                    "\n");
    for (const Contribution& c : e.sources) {
      absl::StrAppend(&out, "source rank ", c.rank, " buffer ", Quote(c.buffer), " region ",
                      c.region.ToString(), "\n");
    }
  }
  out += "end\n";
  return out;
}

std::string PlanHash(const Plan& plan) { return Sha256Hex(CanonicalEncoding(plan)); }

absl::StatusOr<std::vector<int>> ResolveNodeMap(int world_size, const std::vector<int>& nodes) {
  if (nodes.empty()) return std::vector<int>(std::max(world_size, 0), 0);
  if (static_cast<int>(nodes.size()) != world_size) {
    return absl::InvalidArgumentError(absl::StrCat("node map has ", nodes.size(),
                                                   " entries for world size ", world_size,
                                                   " (need one node id per rank, or none)"));
  }
  for (size_t r = 0; r < nodes.size(); ++r) {
    if (nodes[r] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("node map gives rank ", r, " node ", nodes[r], " (node ids are >= 0)"));
    }
  }
  return nodes;
}

}  // namespace syncopate::plan
