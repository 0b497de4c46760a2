// Symmetric memory for the ranks of one node: every rank allocates a buffer of the same name and
// size with cuMemCreate (POSIX-fd handle), the fds travel over the NodeRendezvous (SCM_RIGHTS),
// and every rank maps every peer's buffer into its own address space. Works for ranks on different
// GPUs and for several processes sharing one GPU (how the GPU tests run on one lent GPU).
//
// Allocation is collective: every rank calls Allocate with the same name and size, in the same
// order; a mismatch is an error naming the rank that differs.
//
// Ranks are global (the plan's): in a group spanning nodes the rendezvous connects only this
// node's ranks, `members` maps its indices to global ranks, and a buffer's pointer for a rank on
// another node is 0 (no device can address it; the inter-node proxy carries those chunks).
//
// Thread-safety: a SymmetricHeap is used by one thread at a time.
#pragma once

#include <cuda.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cuda/handles.h"
#include "runtime/cuda/rendezvous.h"

namespace syncopate::cuda {

// One symmetric buffer: this rank's allocation plus every peer's, mapped here.
class SymmetricBuffer {
 public:
  const std::string& name() const { return name_; }
  size_t size() const { return bytes_; }
  CUdeviceptr local() const { return ptrs_[rank_]; }
  // Rank r's buffer as mapped in this process (local() for r == this rank; 0 for a rank on
  // another node).
  CUdeviceptr peer(int r) const { return ptrs_[r]; }
  const std::vector<CUdeviceptr>& all() const { return ptrs_; }

 private:
  friend class SymmetricHeap;
  std::string name_;
  size_t bytes_ = 0;
  int rank_ = 0;
  std::vector<VmmAllocation> mappings_;  // index = global rank
  std::vector<CUdeviceptr> ptrs_;
};

class SymmetricHeap {
 public:
  // `context` must outlive the heap; `rendezvous` is shared with other users of the group.
  // `members`: the global rank of each rendezvous index (empty: the identity, every rank of
  // `world_size` on this node; world_size 0: the rendezvous' world).
  SymmetricHeap(const Context& context, Rendezvous& rendezvous, std::vector<int> members = {},
                int world_size = 0);

  // Collective. Returns the buffer (owned by the heap, valid until the heap dies). Size is rounded
  // up to the allocation granularity; contents are not initialised.
  absl::StatusOr<SymmetricBuffer*> Allocate(const std::string& name, size_t bytes);
  // nullptr when no buffer of that name was allocated.
  SymmetricBuffer* Find(const std::string& name) const;

  // Global rank and world size.
  int rank() const { return members_[rendezvous_.rank()]; }
  int world_size() const { return world_size_; }

 private:
  const Context& context_;
  Rendezvous& rendezvous_;
  std::vector<int> members_;  // rendezvous index -> global rank
  int world_size_ = 0;
  std::map<std::string, std::unique_ptr<SymmetricBuffer>> buffers_;
};

}  // namespace syncopate::cuda
