// See c_bootstrap.h.
#include "ops/c_bootstrap.h"

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace syncopate::ops {
namespace {

struct Delivery {
  std::vector<std::string>* all;
  std::vector<bool> seen;
  std::string problem;
};

// A rank's message is a rendezvous record of a few hundred bytes; far more is a caller's bug
// (a length from the wrong variable), refused before it is copied.
constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 20;

void Fail(Delivery* d, const std::string& problem) {
  if (d->problem.empty()) d->problem = problem;  // the first one says most
}

// Called from the caller's C code: nothing may throw out of it.
void Deliver(void* ctx, int32_t rank, const char* data, uint64_t length) {
  auto* d = static_cast<Delivery*>(ctx);
  const std::string who = "the caller's allgather delivered rank " + std::to_string(rank);
  if (rank < 0 || rank >= static_cast<int32_t>(d->seen.size())) {
    Fail(d, who + ", outside 0.." + std::to_string(d->seen.size() - 1));
    return;
  }
  if (data == nullptr && length > 0) {
    Fail(d, who + " with NULL data of length " + std::to_string(length));
    return;
  }
  if (length > kMaxMessageBytes) {
    Fail(d, who + " with length " + std::to_string(length) + " (a message is at most " +
                std::to_string(kMaxMessageBytes) + " bytes)");
    return;
  }
  try {
    (*d->all)[rank].assign(data == nullptr ? "" : data, length);
    d->seen[rank] = true;
  } catch (const std::exception& e) {
    Fail(d, who + ": " + e.what());
  }
}

}  // namespace

std::function<Status(const std::string&, std::vector<std::string>*)> BootstrapOf(
    syncopate_allgather_fn fn, void* user_data) {
  return [fn, user_data](const std::string& mine, std::vector<std::string>* all) {
    // The world size is not known here: the runtime checks the count; collect up to 4096 ranks.
    constexpr int kMaxRanks = 4096;
    all->assign(kMaxRanks, "");
    Delivery d{all, std::vector<bool>(kMaxRanks, false), ""};
    const int32_t code = fn(user_data, mine.data(), mine.size(), &Deliver, &d);
    if (code != SYNCOPATE_OK) {
      return Status(static_cast<StatusCode>(code),
                    std::string("the caller's allgather returned ") +
                        StatusCodeName(static_cast<StatusCode>(code)));
    }
    if (!d.problem.empty()) return Status(StatusCode::kInvalidArgument, d.problem);
    size_t delivered = 0;
    while (delivered < d.seen.size() && d.seen[delivered]) ++delivered;
    for (size_t r = delivered; r < d.seen.size(); ++r) {
      if (d.seen[r]) {
        return Status(StatusCode::kInvalidArgument, "the caller's allgather delivered rank " +
                                                        std::to_string(r) + " but not rank " +
                                                        std::to_string(delivered));
      }
    }
    all->resize(delivered);
    return Status::Ok();
  };
}

}  // namespace syncopate::ops
