// StagedChannel: see staged_channel.h.
#include "runtime/ucx/staged_channel.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "runtime/ucx/backoff.h"

namespace syncopate::ucx {

absl::StatusOr<std::unique_ptr<StagedChannel>> StagedChannel::Create(UcxTransport* transport,
                                                                      std::string name, int peer,
                                                                      bool sender,
                                                                      StagingOptions options) {
  if (options.slots < 1 || options.slot_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat("staged channel '", name,
                                                   "': needs slots >= 1 and slot_bytes > 0"));
  }
  if ((sender && !options.device_to_host) || (!sender && !options.host_to_device)) {
    return absl::InvalidArgumentError(absl::StrCat("staged channel '", name, "': the ",
                                                   sender ? "device_to_host" : "host_to_device",
                                                   " copy callback is missing"));
  }
  std::unique_ptr<StagedChannel> ch(
      new StagedChannel(transport, std::move(name), peer, sender, std::move(options)));
  // Both ends register all three regions so the names line up on every rank.
  ASSIGN_OR_RETURN(ch->slots_region_,
                   transport->AllocateMemory(absl::StrCat(ch->name_, ":slots"),
                                             ch->options_.slots * ch->options_.slot_bytes));
  ASSIGN_OR_RETURN(ch->signals_region_,
                   transport->AllocateMemory(absl::StrCat(ch->name_, ":signals"),
                                             ch->options_.slots * 8));
  ASSIGN_OR_RETURN(ch->credits_region_,
                   transport->AllocateMemory(absl::StrCat(ch->name_, ":credits"),
                                             ch->options_.slots * 8));
  return ch;
}

absl::Status StagedChannel::WaitWord(int region, int index, uint64_t at_least,
                                     absl::string_view what) {
  auto* words = static_cast<uint64_t*>(transport_->region_address(region));
  std::atomic_ref<uint64_t> word(words[index]);
  const absl::Time deadline = absl::Now() + options_.timeout;
  Backoff backoff;
  while (word.load(std::memory_order_acquire) < at_least) {
    RETURN_IF_ERROR(transport_->PeerStatus(peer_));
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("staged channel '", name_, "': ", what, " from ",
                       transport_->PeerName(peer_), " not there by the deadline (slot ", index,
                       " at ", word.load(), ", expected ", at_least, ")"));
    }
    backoff.Pause();
  }
  return absl::OkStatus();
}

absl::Status StagedChannel::Send(const std::vector<StagedChunk>& chunks) {
  if (!sender_) return absl::FailedPreconditionError(absl::StrCat(name_, ": receive-only end"));
  times_ = {};
  const int slots = options_.slots;
  std::vector<Completion> in_flight(slots);
  auto* host = static_cast<char*>(transport_->region_address(slots_region_));
  for (size_t i = 0; i < chunks.size(); ++i) {
    const StagedChunk& c = chunks[i];
    if (c.bytes > options_.slot_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("staged channel '", name_, "': chunk ", i,
                                                     " has ", c.bytes, " bytes, slots hold ",
                                                     options_.slot_bytes));
    }
    const uint64_t seq = next_seq_++;
    const int s = static_cast<int>((seq - 1) % slots);
    const uint64_t offset = static_cast<uint64_t>(s) * options_.slot_bytes;
    absl::Time t0 = absl::Now();
    // The slot's previous chunk must have left this host and been consumed remotely.
    if (in_flight[s].state() != nullptr) {
      RETURN_IF_ERROR(transport_->Wait(in_flight[s], absl::Now() + options_.timeout,
                                       absl::StrCat("staged channel '", name_, "' put")));
    }
    if (seq > static_cast<uint64_t>(slots)) {
      RETURN_IF_ERROR(WaitWord(credits_region_, s, seq - slots, "credit"));
    }
    absl::Time t1 = absl::Now();
    RETURN_IF_ERROR(options_.device_to_host(host + offset, c.device, c.bytes));
    times_.copy += absl::Now() - t1;
    times_.wait += t1 - t0;
    in_flight[s] = transport_->PutWithSignal(peer_, slots_region_, slots_region_,
                                             {{offset, offset, c.bytes}},
                                             {signals_region_, uint64_t(s) * 8}, seq);
  }
  for (Completion& c : in_flight) {
    if (c.state() == nullptr) continue;
    RETURN_IF_ERROR(transport_->Wait(c, absl::Now() + options_.timeout,
                                     absl::StrCat("staged channel '", name_, "' put")));
  }
  return absl::OkStatus();
}

absl::Status StagedChannel::Receive(const std::vector<StagedChunk>& chunks,
                                    const std::function<void(int)>& on_arrival) {
  if (sender_) return absl::FailedPreconditionError(absl::StrCat(name_, ": send-only end"));
  times_ = {};
  const int slots = options_.slots;
  std::vector<Completion> credits(slots);
  auto* host = static_cast<char*>(transport_->region_address(slots_region_));
  for (size_t i = 0; i < chunks.size(); ++i) {
    const StagedChunk& c = chunks[i];
    const uint64_t seq = next_seq_++;
    const int s = static_cast<int>((seq - 1) % slots);
    absl::Time t0 = absl::Now();
    RETURN_IF_ERROR(WaitWord(signals_region_, s, seq, absl::StrCat("chunk ", i)));
    absl::Time t1 = absl::Now();
    RETURN_IF_ERROR(options_.host_to_device(c.device,
                                            host + static_cast<uint64_t>(s) * options_.slot_bytes,
                                            std::min(c.bytes, options_.slot_bytes)));
    times_.copy += absl::Now() - t1;
    times_.wait += t1 - t0;
    if (credits[s].state() != nullptr) {
      RETURN_IF_ERROR(transport_->Wait(credits[s], absl::Now() + options_.timeout,
                                       absl::StrCat("staged channel '", name_, "' credit")));
    }
    credits[s] = transport_->PutWord(peer_, {credits_region_, uint64_t(s) * 8}, seq);
    if (on_arrival) on_arrival(static_cast<int>(i));
  }
  for (Completion& c : credits) {
    if (c.state() == nullptr) continue;
    RETURN_IF_ERROR(transport_->Wait(c, absl::Now() + options_.timeout,
                                     absl::StrCat("staged channel '", name_, "' credit")));
  }
  return absl::OkStatus();
}

}  // namespace syncopate::ucx
