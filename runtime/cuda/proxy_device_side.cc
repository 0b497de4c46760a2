// The GPU end of the inter-node proxy; see proxy_device_side.h.
#include "runtime/cuda/proxy_device_side.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "runtime/cuda/launch_waits.h"
#include "runtime/ucx/segments.h"

namespace syncopate::cuda {

absl::StatusOr<std::unique_ptr<ProxyDeviceSide>> ProxyDeviceSide::Create(
    Group& group, const plan::Plan& plan, std::map<std::string, CUdeviceptr> addresses,
    std::map<int, int> ready_chunk, bool own_context) {
  std::unique_ptr<ProxyDeviceSide> side(new ProxyDeviceSide(group, plan));
  side->by_id_ = plan.TransfersById();
  side->addresses_ = std::move(addresses);
  side->ready_chunk_ = std::move(ready_chunk);
  const DriverApi& api = group.api();
  if (own_context) {
    absl::StatusOr<Context> created = Context::Create(group.context().ordinal());
    (void)group.context().MakeCurrent();
    if (!created.ok()) {
      return absl::Status(created.status().code(),
                          absl::StrCat("rank ", group.rank(), ": the inter-node proxy's context: ",
                                       created.status().message()));
    }
    side->own_context_ = *std::move(created);
  }
  RETURN_IF_ERROR(side->context().MakeCurrent());
  for (const plan::BufferSpec& b : plan.buffers) {
    // At least 8 bytes, as the executor registers every buffer.
    const size_t bytes = std::max<size_t>(ucx::BufferBytes(b), 8);
    ASSIGN_OR_RETURN(PinnedHostBuffer host, PinnedHostBuffer::Allocate(api, bytes));
    side->host_.emplace(b.name, std::move(host));
  }
  ASSIGN_OR_RETURN(side->deliver_stream_, Stream::Create(api));
  ASSIGN_OR_RETURN(side->delivered_, Event::Create(api));
  RETURN_IF_ERROR(group.context().MakeCurrent());
  return side;
}

ProxyDeviceSide::~ProxyDeviceSide() {
  // The streams, events and pinned buffers go in the context that made them.
  CU_LOG_IF_ERROR(group_.api().cuCtxSetCurrent(context().get()));
}

std::map<std::string, void*> ProxyDeviceSide::host_buffers() const {
  std::map<std::string, void*> out;
  for (const auto& [name, buffer] : host_) out[name] = buffer.host();
  return out;
}

absl::Status ProxyDeviceSide::BeginEpoch(CUevent launch_start) {
  RETURN_IF_ERROR(context().MakeCurrent());
  launch_start_ = launch_start;
  CU_RETURN_IF_ERROR(group_.api().cuStreamWaitEvent(deliver_stream_.get(), launch_start, 0));
  return absl::OkStatus();
}

absl::StatusOr<CUdeviceptr> ProxyDeviceSide::Address(const std::string& buffer,
                                                     const plan::Transfer& t) const {
  auto it = addresses_.find(buffer);
  if (it == addresses_.end() || it->second == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", group_.rank(), ": inter-node transfer ", t.id, " uses plan buffer '", buffer,
        "', which is not bound on this rank"));
  }
  return it->second;
}

absl::Status ProxyDeviceSide::AwaitEvent(CUevent event, absl::Time deadline,
                                         const std::string& what) {
  const DriverApi& api = group_.api();
  int sleep_us = 5;
  while (true) {
    const CUresult r = api.cuEventQuery(event);
    if (r == CUDA_SUCCESS) return absl::OkStatus();
    if (r != CUDA_ERROR_NOT_READY) return CuError(r, "cuEventQuery(proxy)", __FILE__, __LINE__);
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, ": device copies not done by the deadline"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min(sleep_us * 2, 500);
  }
}

absl::Status ProxyDeviceSide::AwaitWords(FetchLane& lane, const std::vector<WaitedWord>& words,
                                         uint32_t epoch, absl::Time deadline,
                                         const std::string& what) {
  const DriverApi& api = group_.api();
  if (words.empty()) return absl::OkStatus();
  const size_t bytes = sizeof(uint32_t) * words.size();
  if (lane.words.size() < bytes) {
    ASSIGN_OR_RETURN(lane.words, PinnedHostBuffer::Allocate(api, std::max<size_t>(bytes, 256)));
  }
  auto* seen = static_cast<volatile uint32_t*>(lane.words.host());
  int sleep_us = 2;
  while (true) {
    for (size_t i = 0; i < words.size(); ++i) {
      CU_RETURN_IF_ERROR(api.cuMemcpyDtoHAsync(const_cast<uint32_t*>(seen + i), words[i].word,
                                               sizeof(uint32_t), lane.stream.get()));
    }
    CU_RETURN_IF_ERROR(api.cuEventRecord(lane.done.get(), lane.stream.get()));
    RETURN_IF_ERROR(AwaitEvent(lane.done.get(), deadline, what));
    // After the read: Unblock raises the flag before it forces the words to the epoch.
    if (group_.abort_raised()) {
      return absl::AbortedError(absl::StrCat(what, ": the launch was aborted (its words were "
                                                   "forced to the epoch without their data)"));
    }
    size_t pending = 0;
    while (pending < words.size() && EpochReached(seen[pending], epoch)) ++pending;
    if (pending == words.size()) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(what, ": ", words[pending].what, " is ",
                                                      seen[pending], ", expected epoch ", epoch,
                                                      " by the deadline"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min(sleep_us * 2, 200);
  }
}

absl::Status ProxyDeviceSide::FetchSource(const plan::Transfer& t,
                                          const std::vector<int>& device_deps, uint64_t epoch,
                                          const std::vector<ucx::ByteRange>& ranges, void* host,
                                          absl::Time deadline) {
  const DriverApi& api = group_.api();
  RETURN_IF_ERROR(context().MakeCurrent());
  FetchLane* lane = nullptr;
  {
    absl::MutexLock lock(&lanes_mu_);
    std::unique_ptr<FetchLane>& slot = lanes_[t.channel];
    if (slot == nullptr) {
      auto fresh = std::make_unique<FetchLane>();
      ASSIGN_OR_RETURN(fresh->stream, Stream::Create(api));
      ASSIGN_OR_RETURN(fresh->done, Event::Create(api));
      slot = std::move(fresh);
    }
    lane = slot.get();
  }
  CUstream s = lane->stream.get();
  if (launch_start_ != nullptr) CU_RETURN_IF_ERROR(api.cuStreamWaitEvent(s, launch_start_, 0));
  const auto e32 = static_cast<uint32_t>(epoch);
  std::vector<WaitedWord> words;
  if (t.after_compute) {
    auto it = ready_chunk_.find(t.id);
    if (it == ready_chunk_.end()) {
      return absl::InternalError(absl::StrCat("rank ", group_.rank(), ": inter-node transfer ",
                                              t.id, " is computed but no outgoing chunk of the "
                                              "fused kernel"));
    }
    words.push_back({group_.chunk_ready_word(it->second),
                     absl::StrCat("its kernel's chunk_ready[", it->second, "]")});
  }
  for (int dep : device_deps) {
    if (dep < 0 || dep >= static_cast<int>(by_id_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("unknown dependency transfer ", dep));
    }
    const plan::Transfer& d = *by_id_[dep];
    if (!group_.same_node(d.dst_rank())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dependency transfer ", dep, " lands on rank ", d.dst_rank(), ", not on this node"));
    }
    words.push_back({group_.signal_word(d.dst_rank(), d.signal),
                     absl::StrCat("signal ", d.signal, " on rank ", d.dst_rank(),
                                  " (transfer ", dep, " from rank ", d.src_rank(), ")")});
  }
  const std::string what = absl::StrCat("rank ", group_.rank(), " inter-node transfer ", t.id,
                                        " (chunk ", t.chunk, " to rank ", t.peer, ")");
  RETURN_IF_ERROR(AwaitWords(*lane, words, e32, deadline,
                             absl::StrCat(what, " source not ready on the device")));
  ASSIGN_OR_RETURN(CUdeviceptr src, Address(t.src_buffer, t));
  for (const ucx::ByteRange& r : ranges) {
    CU_RETURN_IF_ERROR(
        api.cuMemcpyDtoHAsync(static_cast<char*>(host) + r.offset, src + r.offset, r.length, s));
  }
  CU_RETURN_IF_ERROR(api.cuEventRecord(lane->done.get(), s));
  return AwaitEvent(lane->done.get(), deadline, absl::StrCat(what, " copy to the host"));
}

absl::Status ProxyDeviceSide::Deliver(const plan::Transfer& t, uint64_t epoch,
                                      const std::vector<ucx::ByteRange>& ranges,
                                      const void* host) {
  const DriverApi& api = group_.api();
  RETURN_IF_ERROR(context().MakeCurrent());
  ASSIGN_OR_RETURN(CUdeviceptr dst, Address(t.dst_buffer, t));
  CUstream s = deliver_stream_.get();
  for (const ucx::ByteRange& r : ranges) {
    CU_RETURN_IF_ERROR(api.cuMemcpyHtoDAsync(dst + r.offset,
                                             static_cast<const char*>(host) + r.offset, r.length,
                                             s));
  }
  // The default write waits for the copies before it (a fence): the kernel's acquire of the
  // signal then sees the chunk.
  CU_RETURN_IF_ERROR(api.cuStreamWriteValue32(s, group_.signal_word(group_.rank(), t.signal),
                                              static_cast<uint32_t>(epoch),
                                              CU_STREAM_WRITE_VALUE_DEFAULT));
  return absl::OkStatus();
}

absl::Status ProxyDeviceSide::Drain(absl::Time deadline) {
  RETURN_IF_ERROR(context().MakeCurrent());
  CU_RETURN_IF_ERROR(group_.api().cuEventRecord(delivered_.get(), deliver_stream_.get()));
  return AwaitEvent(delivered_.get(), deadline,
                    absl::StrCat("rank ", group_.rank(), " inter-node deliveries"));
}

}  // namespace syncopate::cuda
