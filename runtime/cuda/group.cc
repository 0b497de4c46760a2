// A node-local group: creation (context, rendezvous, heap, control block), its streams and its
// end; see group.h. The launch protocol is in group_launch.cc, its bounded waits and the
// diagnosis of a failed launch in group_watchdog.cc, graphs in group_graph.cc.
#include "runtime/cuda/group.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "runtime/cuda/node_rendezvous.h"

namespace syncopate::cuda {

const char* BackendName(Backend backend) {
  switch (backend) {
    case Backend::kCopyEngine:
      return "copy_engine";
    case Backend::kSm:
      return "sm";
    case Backend::kDirect:
      return "direct";
  }
  return "?";
}

namespace {

// This rank's device UUID, as bytes to compare with the peers'.
absl::StatusOr<std::string> DeviceUuid(const Context& context) {
  CUuuid uuid{};
  CU_RETURN_IF_ERROR(context.api().cuDeviceGetUuid(&uuid, context.device()));
  return std::string(uuid.bytes, sizeof(uuid.bytes));
}

// The rendezvous' ranks whose device UUID is `mine` (collective).
absl::StatusOr<int> CountRanksOnDevice(const std::string& mine, Rendezvous& rendezvous) {
  ASSIGN_OR_RETURN(std::vector<PeerMessage> all, rendezvous.AllGather(mine));
  return static_cast<int>(std::count_if(all.begin(), all.end(),
                                        [&mine](const PeerMessage& m) { return m.bytes == mine; }));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Group>> Group::Create(const GroupOptions& options) {
  if (options.world_size < 1 || options.world_size > kMaxRanks) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size ", options.world_size, " out of 1..", kMaxRanks));
  }
  ASSIGN_OR_RETURN(std::vector<int> nodes,
                   plan::ResolveNodeMap(options.world_size, options.nodes));
  if (options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", options.rank, " out of range for world size ", options.world_size));
  }
  auto group = std::unique_ptr<Group>(new Group(options));
  group->nodes_ = std::move(nodes);
  RETURN_IF_ERROR(group->Init());
  return group;
}

absl::Status Group::Init() {
  // The driver first: without a GPU there is no point in waiting for peers.
  ASSIGN_OR_RETURN(context_, Context::Retain(options_.device_ordinal));
  const DriverApi& api = context_.api();
  // Before the rendezvous: a rank that fails here leaves no peer waiting in a collective.
  ASSIGN_OR_RETURN(const std::string device_uuid, DeviceUuid(context_));
  // This node's ranks rendezvous among themselves, under a per-node name when the group spans
  // nodes (processes playing different nodes may share a host).
  std::vector<int> members;
  for (int r = 0; r < world_size(); ++r) {
    if (same_node(r)) members.push_back(r);
  }
  const int index = static_cast<int>(std::find(members.begin(), members.end(), rank()) -
                                     members.begin());
  const bool multi_node = static_cast<int>(members.size()) != world_size();
  const std::string rendezvous_id =
      multi_node ? absl::StrCat(options_.group_id, ".node", nodes_[rank()]) : options_.group_id;
  absl::StatusOr<std::unique_ptr<Rendezvous>> connected;
  if (options_.bootstrap) {
    if (multi_node) {
      return absl::InvalidArgumentError(
          "bootstrap: an allgather callback forms one node's group; a group spanning nodes "
          "rendezvouses per node on Unix sockets");
    }
    connected = CallbackRendezvous::Create(rendezvous_id, index, static_cast<int>(members.size()),
                                           options_.bootstrap);
  } else {
    connected = NodeRendezvous::Connect({rendezvous_id, index, static_cast<int>(members.size()),
                                         options_.rendezvous_dir, options_.rendezvous_timeout});
  }
  if (!connected.ok() && multi_node) {
    // The rendezvous numbers this node's ranks from 0: say which global rank each number is.
    std::vector<std::string> legend;
    for (size_t i = 0; i < members.size(); ++i) legend.push_back(absl::StrCat(i, " = rank ", members[i]));
    return absl::Status(connected.status().code(),
                        absl::StrCat(connected.status().message(), " (node ", nodes_[rank()],
                                     "'s rendezvous numbers its ranks: ",
                                     absl::StrJoin(legend, ", "), ")"));
  }
  if (!connected.ok()) return connected.status();
  rendezvous_ = *std::move(connected);
  ASSIGN_OR_RETURN(ranks_on_device_, CountRanksOnDevice(device_uuid, *rendezvous_));
  heap_ = std::make_unique<SymmetricHeap>(context_, *rendezvous_, members, world_size());
  ASSIGN_OR_RETURN(control_, heap_->Allocate("syncopate.control", kControlBytes));
  ASSIGN_OR_RETURN(rescue_stream_, Stream::Create(api));
  ASSIGN_OR_RETURN(capture_stream_, Stream::Create(api));
  constexpr size_t kChunkWords = 2 * kChunkCapacity + kStepCounterCapacity + 1 + 2 + 2;
  ASSIGN_OR_RETURN(chunk_words_, DeviceBuffer::Allocate(api, sizeof(uint32_t) * kChunkWords));
  CU_RETURN_IF_ERROR(api.cuMemsetD32Async(control_->local(), 0, control_->size() / 4,
                                          rescue_stream_.get()));
  CU_RETURN_IF_ERROR(
      api.cuMemsetD32Async(chunk_words_.get(), 0, kChunkWords, rescue_stream_.get()));
  ASSIGN_OR_RETURN(step_claims_,
                   DeviceBuffer::Allocate(api, sizeof(uint64_t) * kStepCounterCapacity));
  CU_RETURN_IF_ERROR(api.cuMemsetD32Async(
      step_claims_.get(), 0, sizeof(uint64_t) / sizeof(uint32_t) * kStepCounterCapacity,
      rescue_stream_.get()));
  // The kernels' table [world] of a word in each same-node rank's control block (0 for a rank on
  // another node, which the kernels never address directly).
  auto peer_word_table = [&](auto word_of) -> absl::StatusOr<DeviceBuffer> {
    std::vector<CUdeviceptr> table(world_size(), 0);
    for (int r = 0; r < world_size(); ++r) {
      if (same_node(r)) table[r] = word_of(r);
    }
    ASSIGN_OR_RETURN(DeviceBuffer buffer,
                     DeviceBuffer::Allocate(api, sizeof(CUdeviceptr) * table.size()));
    CU_RETURN_IF_ERROR(
        api.cuMemcpyHtoD(buffer.get(), table.data(), sizeof(CUdeviceptr) * table.size()));
    return buffer;
  };
  ASSIGN_OR_RETURN(peer_signal_table_, peer_word_table([&](int r) { return SignalWord(r, 0); }));
  ASSIGN_OR_RETURN(peer_entered_table_,
                   peer_word_table([&](int r) { return EnteredWord(r, rank()); }));
  ASSIGN_OR_RETURN(tile_progress_table_,
                   peer_word_table([&](int r) { return TileProgressWord(r); }));
  for (int r = 0; r < world_size(); ++r) {
    if (!same_node(r)) single_node_ = false;
  }
  ASSIGN_OR_RETURN(watch_, LaunchWatch::Create(api));
  ASSIGN_OR_RETURN(side_streams_, SideStreams::Create(api));
  RETURN_IF_ERROR(rescue_stream_.Synchronize());
  // No peer may write into this rank's control block before it is zeroed.
  return rendezvous_->Barrier();
}

Group::~Group() {
  // Peers hold their own references to this rank's physical memory, so a late peer write lands
  // in memory that is still allocated; only our own in-flight work must finish first.
  if (context_.get() != nullptr) {
    (void)context_.MakeCurrent();
    CU_LOG_IF_ERROR(context_.api().cuCtxSynchronize());
  }
}

}  // namespace syncopate::cuda
