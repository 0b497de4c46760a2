// Launch waits of a prepared launch; see launch_waits.h.
#include "runtime/cuda/launch_waits.h"

#include <atomic>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace syncopate::cuda {
namespace {

LaunchWaitOp Op(uint64_t word, int kind, int gate, int peer, int index, int transfer,
                WordKind word_kind) {
  LaunchWaitOp op{};
  op.word = reinterpret_cast<const syncopate_u32*>(word);
  op.kind = kind;
  op.gate = gate;
  op.peer = peer;
  op.index = index;
  op.transfer = transfer;
  op.word_kind = static_cast<int32_t>(word_kind);
  return op;
}

}  // namespace

absl::StatusOr<LaunchWaits> BuildLaunchWaits(int rank, const CopyProgram* program,
                                             const std::vector<int>& guarded_peers,
                                             const std::vector<IncomingSignal>& incoming,
                                             const std::vector<int>& pulled_by,
                                             const ProtocolWords& words, int gate_capacity,
                                             const std::vector<uint64_t>& proxy_epoch_words) {
  LaunchWaits out;
  if (program != nullptr) {
    out.step_gate.assign(program->steps.size(), -1);
    for (size_t i = 0; i < program->steps.size(); ++i) {
      const CopyStep& step = program->steps[i];
      if (step.waits.empty()) continue;
      const int gate = out.num_gates++;
      if (gate >= gate_capacity) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rank ", rank, "'s copy-engine program has more than ", gate_capacity,
            " steps with conditions (gate words); split the plan into fewer chunks"));
      }
      out.step_gate[i] = gate;
      for (const WordWait& w : step.waits) {
        switch (w.kind) {
          case WaitKind::kSignal:
            out.ops.push_back(Op(words.signal(rank, w.index), kGateWait, gate, -1, w.index,
                                 step.transfer, WordKind::kSignal));
            break;
          case WaitKind::kPeerSignal:
            out.ops.push_back(Op(words.signal(w.rank, w.index), kGateWait, gate, w.rank, w.index,
                                 step.transfer, WordKind::kSignal));
            break;
          case WaitKind::kChunkReady:
            out.ops.push_back(Op(words.chunk_ready(w.index), kGateWait, gate, rank, w.index,
                                 step.transfer, WordKind::kChunkReady));
            break;
          case WaitKind::kEntered:
            out.ops.push_back(Op(words.entered(w.index), kGateWait, gate, w.index, -1,
                                 step.transfer, WordKind::kEntered));
            break;
        }
      }
    }
  } else {
    for (int q : guarded_peers) {
      if (q == rank) continue;
      out.ops.push_back(Op(words.entered(q), kGuardWait, -1, q, -1, -1, WordKind::kEntered));
    }
  }
  for (const IncomingSignal& s : incoming) {
    out.ops.push_back(Op(words.signal(rank, s.signal), kTailWait, -1, s.writer, s.signal,
                         s.transfer, WordKind::kSignal));
  }
  for (int q : pulled_by) {
    if (q == rank) continue;
    out.ops.push_back(Op(words.drained(q), kTailWait, -1, q, -1, -1, WordKind::kDrained));
  }
  for (uint64_t word : proxy_epoch_words) {
    out.ops.push_back(Op(word, kTailWait, -1, rank, -1, -1, WordKind::kProxyEpoch));
  }
  out.control_cta = program != nullptr && !out.ops.empty();
  return out;
}

std::vector<int> StaleGates(const std::vector<uint32_t>& released_at, int num_gates,
                            uint32_t epoch) {
  std::vector<int> stale;
  for (int g = 0; g < num_gates; ++g) {
    const uint32_t last = g < static_cast<int>(released_at.size()) ? released_at[g] : 0;
    if (epoch - last >= kGateRefreshAge) stale.push_back(g);
  }
  return stale;
}

std::string DescribeTimeout(const WaitTimeoutRecord& r) {
  const int ms = static_cast<int>(r.waited_ns / 1000000);
  if (r.what == 0) {
    std::string who = r.tile >= 0 ? absl::StrCat("tile ", r.tile)
                                  : std::string("a communication CTA");
    return absl::StrFormat(
        "rank %d waited %d ms for chunk %d (signal %d) from rank %d: expected epoch %u, saw %u "
        "(%s timed out first; the launch was aborted)",
        r.rank, ms, r.chunk, r.signal, r.peer, r.expected, r.seen, who);
  }
  const int kind = (r.what & 0xf) - 1;
  const auto word = static_cast<WordKind>(r.what >> 4);
  const char* role = kind == kGuardWait  ? "before writing into its buffers"
                     : kind == kGateWait ? "before its copy engine may move the chunk"
                                         : "before the launch may end";
  std::string what;
  switch (word) {
    case WordKind::kEntered:
      what = absl::StrCat("rank ", r.peer, " to enter launch ", r.expected);
      break;
    case WordKind::kDrained:
      what = absl::StrCat("rank ", r.peer, " to finish pulling from rank ", r.rank);
      break;
    case WordKind::kChunkReady:
      what = absl::StrCat("its own kernel to produce outgoing chunk ", r.signal, " (transfer ",
                          r.chunk, ")");
      break;
    case WordKind::kProxyEpoch:
      what = "its inter-node proxy to copy out this launch's chunks for other nodes";
      break;
    case WordKind::kSignal:
      what = r.peer >= 0 ? absl::StrCat("signal ", r.signal, " (transfer ", r.chunk,
                                        ") from rank ", r.peer)
                         : absl::StrCat("signal ", r.signal, " (transfer ", r.chunk,
                                        ", a chunk forwarded to rank ", r.rank, ")");
      break;
  }
  return absl::StrFormat("rank %d waited %d ms for %s %s: expected epoch %u, saw %u (the launch "
                         "was aborted)",
                         r.rank, ms, what, role, r.expected, r.seen);
}

absl::Status ReadTimeoutRecord(const volatile WaitTimeoutRecord& record,
                               absl::Duration fill_grace) {
  const absl::Time give_up = absl::Now() + fill_grace;
  uint32_t state = record.timed_out;
  while (state == kTimeoutRecordClaimed && absl::Now() < give_up) {
    std::this_thread::yield();
    state = record.timed_out;
  }
  if (state == 0) return absl::OkStatus();
  if (state != kTimeoutRecordFilled) {
    return absl::DeadlineExceededError(absl::StrCat(
        "a device-side wait timed out; its record (which wait, for which peer) was still being "
        "written after ",
        absl::FormatDuration(fill_grace)));
  }
  std::atomic_thread_fence(std::memory_order_acquire);  // the fields were written before the flag
  WaitTimeoutRecord copy;
  std::memcpy(&copy, const_cast<const WaitTimeoutRecord*>(&record), sizeof(copy));
  return absl::DeadlineExceededError(DescribeTimeout(copy));
}

}  // namespace syncopate::cuda
