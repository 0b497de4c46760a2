// Collective allocation and peer mapping of symmetric buffers; see symmetric_memory.h.
#include "runtime/cuda/symmetric_memory.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"

namespace syncopate::cuda {

SymmetricHeap::SymmetricHeap(const Context& context, Rendezvous& rendezvous,
                             std::vector<int> members, int world_size)
    : context_(context),
      rendezvous_(rendezvous),
      members_(std::move(members)),
      world_size_(world_size > 0 ? world_size : rendezvous.world_size()) {
  if (members_.empty()) {
    for (int r = 0; r < rendezvous.world_size(); ++r) members_.push_back(r);
  }
}

absl::StatusOr<SymmetricBuffer*> SymmetricHeap::Allocate(const std::string& name, size_t bytes) {
  if (buffers_.count(name)) {
    return absl::AlreadyExistsError(absl::StrCat("symmetric buffer '", name, "' already exists"));
  }
  const DriverApi& api = context_.api();
  RETURN_IF_ERROR(context_.MakeCurrent());
  auto buffer = std::make_unique<SymmetricBuffer>();
  buffer->name_ = name;
  buffer->rank_ = rank();
  buffer->mappings_.resize(world_size());
  buffer->ptrs_.resize(world_size());
  ASSIGN_OR_RETURN(VmmAllocation own, VmmAllocation::Create(api, context_.device(), bytes));
  buffer->bytes_ = own.size();
  ASSIGN_OR_RETURN(ScopedFd fd, own.ExportFd());
  buffer->ptrs_[rank()] = own.get();
  buffer->mappings_[rank()] = std::move(own);

  // "<name>\n<requested bytes>\n<rounded bytes>": peers check the first two agree.
  std::string mine = absl::StrCat(name, "\n", bytes, "\n", buffer->bytes_);
  int raw_fd = fd.get();
  ASSIGN_OR_RETURN(std::vector<PeerMessage> all,
                   rendezvous_.AllGather(mine, std::span<const int>(&raw_fd, 1)));
  for (int index = 0; index < static_cast<int>(members_.size()); ++index) {
    const int r = members_[index];
    if (r == rank()) continue;
    std::vector<std::string> parts = absl::StrSplit(all[index].bytes, '\n');
    size_t requested = 0, rounded = 0;
    if (parts.size() != 3 || !absl::SimpleAtoi(parts[1], &requested) ||
        !absl::SimpleAtoi(parts[2], &rounded) || all[index].fds.size() != 1) {
      return absl::DataLossError(
          absl::StrCat("malformed symmetric allocation message from rank ", r));
    }
    if (parts[0] != name || requested != bytes) {
      return absl::FailedPreconditionError(absl::StrCat(
          "symmetric allocation mismatch: rank ", rank(), " allocates '", name, "' (", bytes,
          " bytes) but rank ", r, " allocates '", parts[0], "' (", requested, " bytes)"));
    }
    absl::StatusOr<VmmAllocation> mapped =
        VmmAllocation::Import(api, context_.device(), all[index].fds[0].get(), rounded);
    if (!mapped.ok()) {
      return absl::Status(mapped.status().code(),
                          absl::StrCat("mapping rank ", r, "'s symmetric buffer '", name,
                                       "': ", mapped.status().message()));
    }
    buffer->ptrs_[r] = mapped->get();
    buffer->mappings_[r] = *std::move(mapped);
  }
  SymmetricBuffer* out = buffer.get();
  buffers_[name] = std::move(buffer);
  return out;
}

SymmetricBuffer* SymmetricHeap::Find(const std::string& name) const {
  auto it = buffers_.find(name);
  return it == buffers_.end() ? nullptr : it->second.get();
}

}  // namespace syncopate::cuda
