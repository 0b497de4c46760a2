// The MSCCL XML program as read and checked (msccl_algo.cc), before msccl_import.cc maps it onto
// a plan: gpus, their thread blocks and steps, with the attributes MSCCL's executor uses.
// Internal to core/plan (namespace plan::msccl). Plain data; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/plan/plan.h"
#include "core/plan/xml_reader.h"

namespace syncopate::plan::msccl {

enum class StepType {
  kSend,
  kRecv,
  kRecvCopySend,
  kRecvReduceCopy,
  kRecvReduceSend,
  kRecvReduceCopySend,
  kCopy,
  kReduce,
  kNop
};

struct StepTypeInfo {
  const char* name;
  StepType type;
  bool sends;
  bool receives;
};

struct Step {
  std::string where;  // "line N: <gpu id=..> <tb id=..> <step s=..>"
  const StepTypeInfo* info = nullptr;
  char srcbuf = 'i', dstbuf = 'o';
  int64_t srcoff = -1, dstoff = -1, cnt = 0;
  int depid = -1, deps = -1;
  // Filled while building (transfer handles, -1 when none): the transfer delivering into this
  // step (receive half), the one it sends (send half) or its local op, and for a reducing receive
  // whose destination differs from its source, the local copy of the result.
  int incoming = -1;
  int outgoing = -1;
  int local = -1;

  bool ReduceReceive() const {
    return info->type == StepType::kRecvReduceCopy || info->type == StepType::kRecvReduceSend ||
           info->type == StepType::kRecvReduceCopySend;
  }
  bool SrcIsDst() const { return srcbuf == dstbuf && srcoff == dstoff; }
  // The handles this step executes on its own gpu, in channel order.
  std::vector<int> Executed() const {
    std::vector<int> out;
    if (local >= 0) out.push_back(local);
    if (outgoing >= 0) out.push_back(outgoing);
    return out;
  }
};

struct ThreadBlock {
  std::string where;
  int id = 0, send = -1, recv = -1, chan = 0;
  std::vector<Step> steps;
};

struct Gpu {
  std::string where;
  int id = 0;
  int64_t i_chunks = 0, o_chunks = 0, s_chunks = 0;
  std::vector<ThreadBlock> tbs;  // index == tb id
};

enum class Coll { kAllGather, kReduceScatter, kAllReduce, kAllToAll, kCustom };

struct Algo {
  std::string name;
  Coll coll = Coll::kCustom;
  bool inplace = false;
  ReduceOp op = ReduceOp::kSum;
  int nchannels = -1;  // -1: not given
  std::vector<Gpu> gpus;
};

// InvalidArgument "<where>: <message>".
absl::Status At(absl::string_view where, absl::string_view message);

// The <algo> document: every element read, checked (ids, ranges, step types, thread-block
// pairing attributes) and bounded; errors name the line and element.
absl::StatusOr<Algo> ReadAlgo(const XmlElement& root);

}  // namespace syncopate::plan::msccl
