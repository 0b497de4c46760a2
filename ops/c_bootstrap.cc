// See c_bootstrap.h.
#include "ops/c_bootstrap.h"

#include <cstdint>
#include <string>
#include <vector>

namespace syncopate::ops {
namespace {

struct Delivery {
  std::vector<std::string>* all;
  std::vector<bool> seen;
  std::string problem;
};

void Deliver(void* ctx, int32_t rank, const char* data, uint64_t length) {
  auto* d = static_cast<Delivery*>(ctx);
  if (rank < 0 || rank >= static_cast<int32_t>(d->seen.size())) {
    if (d->problem.empty()) {  // the first one says most
      d->problem = "the caller's allgather delivered rank " + std::to_string(rank) +
                   ", outside 0.." + std::to_string(d->seen.size() - 1);
    }
    return;
  }
  (*d->all)[rank].assign(data, length);
  d->seen[rank] = true;
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
