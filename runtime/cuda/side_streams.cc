// See side_streams.h.
#include "runtime/cuda/side_streams.h"

#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace syncopate::cuda {
namespace {

// A 2D copy whose rows are back to back on both sides: one range.
bool IsContiguous(const Copy2D& c) {
  return c.rows == 1 || (c.src_pitch == c.row_bytes && c.dst_pitch == c.row_bytes);
}

}  // namespace

absl::StatusOr<SideStreams> SideStreams::Create(const DriverApi& api) {
  SideStreams s(api);
  ASSIGN_OR_RETURN(s.fork_, Event::Create(api));
  return s;
}

absl::Status SideStreams::Reserve(int channels, size_t steps) {
  while (static_cast<int>(streams_.size()) < channels) {
    ASSIGN_OR_RETURN(Stream s, Stream::Create(*api_));
    streams_.push_back(std::move(s));
    ASSIGN_OR_RETURN(Event e, Event::Create(*api_));
    joins_.push_back(std::move(e));
  }
  while (steps_.size() < steps) {
    ASSIGN_OR_RETURN(Event e, Event::Create(*api_));
    steps_.push_back(std::move(e));
  }
  return absl::OkStatus();
}

absl::Status SideStreams::Fork(CUstream stream, int channels) {
  RETURN_IF_ERROR(Reserve(channels, 0));
  CU_RETURN_IF_ERROR(api_->cuEventRecord(fork_.get(), stream));
  return absl::OkStatus();
}

absl::Status SideStreams::Issue(const CopyProgram& program, const std::vector<int>& step_gates,
                                CUstream stream, const StepEpoch& epoch, bool batch_copies,
                                const CopyStepWords& words, int me) {
  const DriverApi& api = *api_;
  for (int c = 0; c < program.num_channels; ++c) {
    CU_RETURN_IF_ERROR(api.cuStreamWaitEvent(streams_[c].get(), fork_.get(), 0));
  }
  std::set<int> referenced;
  for (const CopyStep& s : program.steps)
    referenced.insert(s.after_steps.begin(), s.after_steps.end());
  RETURN_IF_ERROR(Reserve(0, program.steps.size()));
  for (size_t i = 0; i < program.steps.size(); ++i) {
    const CopyStep& step = program.steps[i];
    CUstream s = streams_[step.channel].get();
    for (int after : step.after_steps) {
      CU_RETURN_IF_ERROR(api.cuStreamWaitEvent(s, steps_[after].get(), 0));
    }
    if (step_gates[i] >= 0) {
      if (epoch.source_gates == nullptr) {
        CU_RETURN_IF_ERROR(api.cuStreamWaitValue32(s, words.gate(step_gates[i]), epoch.value,
                                                   CU_STREAM_WAIT_VALUE_GEQ));
      } else {  // zeroed before the kernel, so nonzero is this launch's release
        CU_RETURN_IF_ERROR(
            api.cuStreamWaitValue32(s, words.gate(step_gates[i]), ~0u, CU_STREAM_WAIT_VALUE_AND));
      }
    }
    RETURN_IF_ERROR(IssueStepCopies(step, s, batch_copies));
    if (step.signal >= 0) {
      RETURN_IF_ERROR(WriteEpoch(s, words.signal(step.signal_rank, step.signal), epoch, i, words));
    }
    if (step.drained_rank >= 0) {
      RETURN_IF_ERROR(WriteEpoch(s, words.drained(step.drained_rank, me), epoch, i, words));
    }
    if (referenced.count(static_cast<int>(i))) {
      CU_RETURN_IF_ERROR(api.cuEventRecord(steps_[i].get(), s));
    }
  }
  for (int c = 0; c < program.num_channels; ++c) {
    CU_RETURN_IF_ERROR(api.cuEventRecord(joins_[c].get(), streams_[c].get()));
    CU_RETURN_IF_ERROR(api.cuStreamWaitEvent(stream, joins_[c].get(), 0));
  }
  return absl::OkStatus();
}

absl::Status SideStreams::WriteEpoch(CUstream s, CUdeviceptr dst, const StepEpoch& epoch,
                                     size_t step, const CopyStepWords& words) const {
  const DriverApi& api = *api_;
  // The default write carries a fence: the copies before it are visible before the word.
  if (epoch.source_gates == nullptr) {
    CU_RETURN_IF_ERROR(
        api.cuStreamWriteValue32(s, dst, epoch.value, CU_STREAM_WRITE_VALUE_DEFAULT));
    return absl::OkStatus();
  }
  const int source = epoch.source_gates->at(step);
  if (source < 0) {
    return absl::InternalError(absl::StrCat("copy step ", step,
                                            " writes a word but has no gate "
                                            "holding the epoch (EpochSourceGates let it pass)"));
  }
  CU_RETURN_IF_ERROR(
      api.cuStreamWriteValue32(s, words.fence_scratch, 0, CU_STREAM_WRITE_VALUE_DEFAULT));
  CU_RETURN_IF_ERROR(api.cuMemcpyAsync(dst, words.gate(source), sizeof(uint32_t), s));
  return absl::OkStatus();
}

// A step's contiguous ranges (batched where asked and available), then its strided copies.
absl::Status SideStreams::IssueStepCopies(const CopyStep& step, CUstream s, bool batch) const {
  const DriverApi& api = *api_;
  std::vector<CUdeviceptr> dsts, srcs;
  std::vector<size_t> sizes;
  for (const Copy2D& c : step.copies) {
    if (!IsContiguous(c)) continue;
    dsts.push_back(c.dst);
    srcs.push_back(c.src);
    sizes.push_back(c.row_bytes * c.rows);  // one copy per contiguous range
  }
  if (!dsts.empty() && batch && api.cuMemcpyBatchAsync != nullptr) {
    // The sources are written earlier on the launch stream (the gate orders them): stream order.
    CUmemcpyAttributes attrs{};
    attrs.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    attrs.flags = CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE;
    size_t first = 0;
    CU_RETURN_IF_ERROR(api.cuMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), dsts.size(),
                                              &attrs, &first, 1, s));
  } else {
    for (size_t i = 0; i < dsts.size(); ++i) {
      CU_RETURN_IF_ERROR(api.cuMemcpyAsync(dsts[i], srcs[i], sizes[i], s));
    }
  }
  for (const Copy2D& c : step.copies) {
    if (IsContiguous(c)) continue;
    CUDA_MEMCPY2D m;
    std::memset(&m, 0, sizeof(m));
    m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    m.srcDevice = c.src;
    m.srcPitch = c.src_pitch;
    m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    m.dstDevice = c.dst;
    m.dstPitch = c.dst_pitch;
    m.WidthInBytes = c.row_bytes;
    m.Height = c.rows;
    CU_RETURN_IF_ERROR(api.cuMemcpy2DAsync(&m, s));
  }
  return absl::OkStatus();
}

}  // namespace syncopate::cuda
