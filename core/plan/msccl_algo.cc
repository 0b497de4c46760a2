// Reading an MSCCL XML program into msccl_algo.h's structs: pass (1) of msccl_import.cc.
#include "core/plan/msccl_algo.h"

#include <charconv>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"

namespace syncopate::plan::msccl {
namespace {

constexpr int kMaxGpus = 1024;
constexpr int64_t kMaxChunks = int64_t{1} << 20;
// Steps per gpu: bounds the recursion depth of the dependency passes. MSCCL's own executor allows
// 256 steps per tb, so real algorithms stay far below.
constexpr size_t kMaxStepsPerGpu = 8192;

constexpr StepTypeInfo kStepTypes[] = {
    {"s", StepType::kSend, true, false},
    {"r", StepType::kRecv, false, true},
    {"rcs", StepType::kRecvCopySend, true, true},
    {"rrc", StepType::kRecvReduceCopy, false, true},
    {"rrs", StepType::kRecvReduceSend, true, true},
    {"rrcs", StepType::kRecvReduceCopySend, true, true},
    {"cpy", StepType::kCopy, false, false},
    {"re", StepType::kReduce, false, false},
    {"nop", StepType::kNop, false, false},
};

// Integer attribute; `fallback` when absent and not required.
absl::StatusOr<int64_t> IntAttr(const XmlElement& e, absl::string_view where,
                                absl::string_view name, std::optional<int64_t> fallback) {
  const std::string* value = e.Attribute(std::string_view(name.data(), name.size()));
  if (value == nullptr) {
    if (fallback.has_value()) return *fallback;
    return At(where, absl::StrCat("missing attribute ", name));
  }
  int64_t out = 0;
  const char* begin = value->data();
  const char* end = begin + value->size();
  auto [ptr, ec] = std::from_chars(begin, end, out);
  if (ec != std::errc() || ptr != end) {
    return At(where, absl::StrCat("attribute ", name, "=\"", *value, "\" is not an integer"));
  }
  return out;
}

absl::StatusOr<int64_t> RangeAttr(const XmlElement& e, absl::string_view where,
                                  absl::string_view name, std::optional<int64_t> fallback,
                                  int64_t lo, int64_t hi) {
  ASSIGN_OR_RETURN(int64_t v, IntAttr(e, where, name, fallback));
  if (v < lo || v > hi) {
    return At(where, absl::StrFormat("attribute %s=%d is out of range [%d, %d]", name, v, lo, hi));
  }
  return v;
}

absl::StatusOr<char> BufAttr(const XmlElement& e, absl::string_view where, absl::string_view name,
                             char fallback) {
  const std::string* value = e.Attribute(std::string_view(name.data(), name.size()));
  if (value == nullptr) return fallback;
  if (*value == "i" || *value == "o" || *value == "s") return (*value)[0];
  return At(where,
            absl::StrCat("attribute ", name, "=\"", *value, "\" is not a buffer (i, o or s)"));
}

std::string Label(const XmlElement& e, absl::string_view key) {
  const std::string* v = e.Attribute(std::string_view(key.data(), key.size()));
  return absl::StrCat("<", e.name, " ", key, "=", v == nullptr ? "?" : *v, ">");
}

absl::StatusOr<Step> ReadStep(const XmlElement& e, const std::string& prefix, int index) {
  Step step;
  step.where = absl::StrCat("line ", e.line, ": ", prefix, " ", Label(e, "s"));
  if (e.name != "step") return At(step.where, absl::StrCat("unexpected element <", e.name, ">"));
  ASSIGN_OR_RETURN(int64_t s, IntAttr(e, step.where, "s", std::nullopt));
  if (s != index) {
    return At(step.where,
              absl::StrFormat("steps must be numbered 0, 1, ...: expected s=%d", index));
  }
  const std::string* type = e.Attribute("type");
  if (type == nullptr) return At(step.where, "missing attribute type");
  for (const StepTypeInfo& info : kStepTypes) {
    if (*type == info.name) step.info = &info;
  }
  if (step.info == nullptr) {
    return At(step.where, absl::StrCat("unknown step type \"", *type,
                                       "\" (expected s, r, rcs, rrc, rrs, rrcs, cpy, re or nop)"));
  }
  ASSIGN_OR_RETURN(step.srcbuf, BufAttr(e, step.where, "srcbuf", 'i'));
  ASSIGN_OR_RETURN(step.dstbuf, BufAttr(e, step.where, "dstbuf", 'o'));
  ASSIGN_OR_RETURN(step.srcoff, RangeAttr(e, step.where, "srcoff", -1, -1, kMaxChunks));
  ASSIGN_OR_RETURN(step.dstoff, RangeAttr(e, step.where, "dstoff", -1, -1, kMaxChunks));
  const bool nop = step.info->type == StepType::kNop;
  ASSIGN_OR_RETURN(step.cnt, RangeAttr(e, step.where, "cnt", nop ? 0 : 1, nop ? 0 : 1, kMaxChunks));
  ASSIGN_OR_RETURN(int64_t depid, RangeAttr(e, step.where, "depid", -1, -1, 1 << 20));
  ASSIGN_OR_RETURN(int64_t deps, RangeAttr(e, step.where, "deps", -1, -1, 1 << 20));
  if ((depid < 0) != (deps < 0)) {
    return At(step.where, "depid and deps must both be -1 or both name a step");
  }
  step.depid = static_cast<int>(depid);
  step.deps = static_cast<int>(deps);
  RETURN_IF_ERROR(RangeAttr(e, step.where, "hasdep", 0, 0, 1).status());
  return step;
}

absl::StatusOr<Gpu> ReadGpu(const XmlElement& e, int ngpus) {
  Gpu gpu;
  gpu.where = absl::StrCat("line ", e.line, ": ", Label(e, "id"));
  if (e.name != "gpu") return At(gpu.where, absl::StrCat("unexpected element <", e.name, ">"));
  ASSIGN_OR_RETURN(int64_t id, RangeAttr(e, gpu.where, "id", std::nullopt, 0, ngpus - 1));
  gpu.id = static_cast<int>(id);
  ASSIGN_OR_RETURN(gpu.i_chunks, RangeAttr(e, gpu.where, "i_chunks", std::nullopt, 0, kMaxChunks));
  ASSIGN_OR_RETURN(gpu.o_chunks, RangeAttr(e, gpu.where, "o_chunks", std::nullopt, 0, kMaxChunks));
  ASSIGN_OR_RETURN(gpu.s_chunks, RangeAttr(e, gpu.where, "s_chunks", 0, 0, kMaxChunks));
  const std::string gpu_label = Label(e, "id");
  std::vector<std::optional<ThreadBlock>> tbs(e.children.size());
  for (const XmlElement& child : e.children) {
    ThreadBlock tb;
    tb.where = absl::StrCat("line ", child.line, ": ", gpu_label, " ", Label(child, "id"));
    if (child.name != "tb") {
      return At(tb.where, absl::StrCat("unexpected element <", child.name, "> in <gpu>"));
    }
    ASSIGN_OR_RETURN(int64_t tb_id, IntAttr(child, tb.where, "id", std::nullopt));
    if (tb_id < 0 || tb_id >= static_cast<int64_t>(tbs.size())) {
      return At(tb.where, absl::StrFormat("tb ids must be 0..%d (one per <tb>)", tbs.size() - 1));
    }
    if (tbs[tb_id].has_value()) {
      return At(tb.where, absl::StrCat("duplicate tb id (first at ", tbs[tb_id]->where, ")"));
    }
    tb.id = static_cast<int>(tb_id);
    ASSIGN_OR_RETURN(int64_t send, RangeAttr(child, tb.where, "send", -1, -1, ngpus - 1));
    ASSIGN_OR_RETURN(int64_t recv, RangeAttr(child, tb.where, "recv", -1, -1, ngpus - 1));
    ASSIGN_OR_RETURN(int64_t chan, RangeAttr(child, tb.where, "chan", 0, 0, 1 << 16));
    if (send == gpu.id || recv == gpu.id) {
      return At(tb.where, "a thread block cannot send to or receive from its own gpu");
    }
    tb.send = static_cast<int>(send);
    tb.recv = static_cast<int>(recv);
    tb.chan = static_cast<int>(chan);
    const std::string prefix = absl::StrCat(gpu_label, " ", Label(child, "id"));
    for (size_t s = 0; s < child.children.size(); ++s) {
      ASSIGN_OR_RETURN(Step step, ReadStep(child.children[s], prefix, static_cast<int>(s)));
      if (step.info->sends && tb.send < 0) {
        return At(step.where, absl::StrCat("step type ", step.info->name,
                                           " sends, but the tb has no send peer (send=-1)"));
      }
      if (step.info->receives && tb.recv < 0) {
        return At(step.where, absl::StrCat("step type ", step.info->name,
                                           " receives, but the tb has no recv peer (recv=-1)"));
      }
      tb.steps.push_back(std::move(step));
    }
    tbs[tb_id] = std::move(tb);
  }
  size_t steps = 0;
  for (auto& tb : tbs) {
    steps += tb->steps.size();
    gpu.tbs.push_back(std::move(*tb));
  }
  if (steps > kMaxStepsPerGpu) {
    return At(gpu.where,
              absl::StrFormat("%d steps; at most %d are supported", steps, kMaxStepsPerGpu));
  }
  return gpu;
}

}  // namespace

absl::Status At(absl::string_view where, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", message));
}

absl::StatusOr<Algo> ReadAlgo(const XmlElement& root) {
  Algo algo;
  const std::string where = absl::StrCat("line ", root.line, ": <", root.name, ">");
  if (root.name != "algo") {
    return At(where, "the root element must be <algo> (an MSCCL algorithm)");
  }
  if (const std::string* name = root.Attribute("name")) algo.name = *name;
  ASSIGN_OR_RETURN(int64_t ngpus, RangeAttr(root, where, "ngpus", std::nullopt, 1, kMaxGpus));
  ASSIGN_OR_RETURN(int64_t nchannels, RangeAttr(root, where, "nchannels", -1, -1, 1 << 16));
  algo.nchannels = static_cast<int>(nchannels);
  RETURN_IF_ERROR(RangeAttr(root, where, "nchunksperloop", 0, 0, kMaxChunks).status());
  ASSIGN_OR_RETURN(int64_t inplace, RangeAttr(root, where, "inplace", 0, 0, 1));
  algo.inplace = inplace == 1;
  const std::string* coll = root.Attribute("coll");
  std::string coll_name = coll == nullptr ? "custom" : *coll;
  if (coll_name == "allgather") {
    algo.coll = Coll::kAllGather;
  } else if (coll_name == "reduce_scatter" || coll_name == "reducescatter") {
    algo.coll = Coll::kReduceScatter;
  } else if (coll_name == "allreduce") {
    algo.coll = Coll::kAllReduce;
  } else if (coll_name == "alltoall") {
    algo.coll = Coll::kAllToAll;
  } else if (coll_name == "custom") {
    algo.coll = Coll::kCustom;
  } else {
    return At(where, absl::StrCat("unsupported coll=\"", coll_name,
                                  "\" (allgather, reduce_scatter, allreduce, alltoall, custom)"));
  }
  if (const std::string* redop = root.Attribute("redop")) {
    if (*redop == "sum") {
      algo.op = ReduceOp::kSum;
    } else if (*redop == "max") {
      algo.op = ReduceOp::kMax;
    } else {
      return At(where, absl::StrCat("unsupported redop=\"", *redop, "\" (sum or max)"));
    }
  }
  std::vector<std::optional<Gpu>> gpus(ngpus);
  for (const XmlElement& child : root.children) {
    ASSIGN_OR_RETURN(Gpu gpu, ReadGpu(child, static_cast<int>(ngpus)));
    if (gpus[gpu.id].has_value()) {
      return At(gpu.where, absl::StrCat("duplicate gpu id (first at ", gpus[gpu.id]->where, ")"));
    }
    for (const ThreadBlock& tb : gpu.tbs) {
      if (algo.nchannels >= 0 && tb.chan >= algo.nchannels) {
        return At(tb.where, absl::StrFormat("chan=%d but the algo has nchannels=%d", tb.chan,
                                            algo.nchannels));
      }
    }
    gpus[gpu.id] = std::move(gpu);
  }
  for (int g = 0; g < ngpus; ++g) {
    if (!gpus[g].has_value()) {
      return At(where, absl::StrFormat("ngpus=%d but there is no <gpu id=%d>", ngpus, g));
    }
    algo.gpus.push_back(std::move(*gpus[g]));
  }
  return algo;
}

}  // namespace syncopate::plan::msccl
