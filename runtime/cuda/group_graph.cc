// A launch captured once as a CUDA graph and replayed with a new epoch each time (group.h).
#include "core/base/status_macros.h"
#include "runtime/cuda/group.h"

namespace syncopate::cuda {

absl::StatusOr<std::unique_ptr<LaunchGraph>> Group::CaptureGraph(const KernelLaunch& launch,
                                                                 const LaunchSettings& timeouts) {
  if (broken_) return BrokenError();
  // Its replays write the host's epoch into the stream's words, as Launch does.
  RETURN_IF_ERROR(CheckHostEpochCounted(launch));
  const DriverApi& api = context_.api();
  RETURN_IF_ERROR(context_.MakeCurrent());
  auto g = std::unique_ptr<LaunchGraph>(new LaunchGraph);
  g->group_ = this;
  g->launch_ = launch;
  g->timeouts_ = timeouts;
  CUstream cs = capture_stream_.get();
  CU_RETURN_IF_ERROR(api.cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_RELAXED));
  // Copy engine: the host's epoch, rewritten at each replay; SM: the device's, as in Launch.
  g->device_epoch_ = single_node_ && launch.backend != Backend::kCopyEngine;
  absl::Status issued = Issue(launch, cs, kCaptureEpoch, timeouts,
                              {.device_epoch = g->device_epoch_, .capturing = true});
  CUgraph graph = nullptr;
  CUresult ended = api.cuStreamEndCapture(cs, &graph);
  g->graph_ = Graph(api, graph);  // owned by g from here (destroyed with it)
  RETURN_IF_ERROR(issued);
  CU_RETURN_IF_ERROR(ended);
  size_t n = 0;
  CU_RETURN_IF_ERROR(api.cuGraphGetNodes(graph, nullptr, &n));
  std::vector<CUgraphNode> nodes(n);
  CU_RETURN_IF_ERROR(api.cuGraphGetNodes(graph, nodes.data(), &n));
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type;
    CU_RETURN_IF_ERROR(api.cuGraphNodeGetType(node, &type));
    if (type == CU_GRAPH_NODE_TYPE_KERNEL) {
      if (g->kernel_node_ != nullptr) {
        return absl::InternalError("captured launch has more than one kernel node");
      }
      g->kernel_node_ = node;
      CU_RETURN_IF_ERROR(api.cuGraphKernelNodeGetParams(node, &g->kernel_params_));
    } else if (type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP) {
      LaunchGraph::MemOpNode m;
      m.node = node;
      CU_RETURN_IF_ERROR(api.cuGraphBatchMemOpNodeGetParams(node, &m.params));
      m.ops.assign(m.params.paramArray, m.params.paramArray + m.params.count);
      g->memop_nodes_.push_back(std::move(m));
    }
  }
  if (g->kernel_node_ == nullptr) return absl::InternalError("captured launch has no kernel node");
  RETURN_IF_ERROR(g->graph_.Instantiate());
  return g;
}

absl::Status LaunchGraph::Replay(CUstream stream) {
  Group& g = *group_;
  if (g.broken_) return g.BrokenError();
  RETURN_IF_ERROR(g.CheckHostEpochCounted(launch_));
  const DriverApi& api = g.api();
  RETURN_IF_ERROR(g.context_.MakeCurrent());
  // Refused before anything is issued (the group stays usable): the values this replay writes
  // would repeat at every replay of the caller's graph.
  ASSIGN_OR_RETURN(const bool capturing, StreamIsCapturing(api, stream));
  if (capturing) {
    return absl::FailedPreconditionError(
        "LaunchGraph::Replay on a stream being captured: launch the fused kernel itself "
        "(OverlapRuntime::Launch) inside the caller's capture instead");
  }
  const uint32_t epoch = Group::NextEpoch(g.epoch_);
  FusedLaunchArgs args = g.MakeArgs(launch_, epoch, timeouts_, device_epoch_);
  void* params[] = {&args};
  if (launch_.backend == Backend::kCopyEngine && !device_epoch_) {
    RETURN_IF_ERROR(g.RefreshStaleGates(launch_, stream, epoch));  // outside the graph, before it
  }
  CUDA_KERNEL_NODE_PARAMS kp = kernel_params_;
  kp.kernelParams = params;
  kp.extra = nullptr;
  CU_RETURN_IF_ERROR(api.cuGraphExecKernelNodeSetParams(graph_.exec(), kernel_node_, &kp));
  for (MemOpNode& m : memop_nodes_) {
    std::vector<CUstreamBatchMemOpParams> ops = m.ops;
    for (CUstreamBatchMemOpParams& op : ops) {
      // Every captured value is the capture epoch (waits GEQ it, writes of it).
      if (op.operation == CU_STREAM_MEM_OP_WAIT_VALUE_32) op.waitValue.value = epoch;
      if (op.operation == CU_STREAM_MEM_OP_WRITE_VALUE_32) op.writeValue.value = epoch;
    }
    CUDA_BATCH_MEM_OP_NODE_PARAMS p = m.params;
    p.paramArray = ops.data();
    CU_RETURN_IF_ERROR(api.cuGraphExecBatchMemOpNodeSetParams(graph_.exec(), m.node, &p));
  }
  if (CUresult r = api.cuGraphLaunch(graph_.exec(), stream); r != CUDA_SUCCESS) {
    return g.Break(CuError(r, "cuGraphLaunch", __FILE__, __LINE__));
  }
  g.epoch_ = epoch;
  g.watch_.Arm(Group::GatesToWatch(launch_));
  if (absl::Status issued = g.watch_.Issued(stream, timeouts_.wait); !issued.ok()) {
    return g.Break(issued);
  }
  return absl::OkStatus();
}

}  // namespace syncopate::cuda
