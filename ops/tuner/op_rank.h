// One rank of an op as a measurement drives it: the op, random inputs at its largest shape and a
// stream of its own, and the timing helpers ops_bench and the op tuner (op_tuner.h) share.
// Random inputs, not zeros: a GEMM on zeros draws less power and clocks higher (cuBLAS took
// 1.06-1.17 ms on zeros against 1.22-1.40 ms from torch on random data, same GEMM and setup), so
// figures on zeros flatter the ops.
// Thread-compatible; a rank process may hold several (the tuner holds one per path).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/status_macros.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/handles.h"
#include "syncopate/ops.h"
#include "syncopate/status_absl.h"

namespace syncopate::ops {

// The op and its inputs: a [max_m, k], w [n, k], out [max_m, n] (bf16), on its own stream.
struct OpRank {
  std::unique_ptr<Op> op;
  const cuda::DriverApi* api = nullptr;
  cuda::DeviceBuffer a, w, out;
  cuda::Stream stream;
  // AllGather: the shard lives where the op reads it (Op::InputWorkspace), as an engine that
  // writes its activations there does: no input copy per run.
  bool shard_in_workspace = false;
};

// Creates the op of `config` for `group` (collective with the group's other ranks) and fills its
// inputs with random values on the device.
absl::StatusOr<OpRank> SetUpOpRank(const GroupConfig& group, const OpConfig& config);

// A run's arguments at `m`: the rank's inputs, or the op's input workspace as the shard.
RunArgs RunArgsAt(const OpRank& r, int64_t m);

double Median(std::vector<double> v);

// Milliseconds per call of `body` over `reps` calls, by events on `stream`.
template <class Body>
absl::StatusOr<double> GpuMs(const cuda::DriverApi& api, CUstream stream, int reps, Body body) {
  ASSIGN_OR_RETURN(cuda::Event start, cuda::Event::Create(api, CU_EVENT_DEFAULT));
  ASSIGN_OR_RETURN(cuda::Event stop, cuda::Event::Create(api, CU_EVENT_DEFAULT));
  RETURN_IF_ERROR(start.Record(stream));
  for (int i = 0; i < reps; ++i) RETURN_IF_ERROR(body());
  RETURN_IF_ERROR(stop.Record(stream));
  CU_RETURN_IF_ERROR(api.cuEventSynchronize(stop.get()));
  ASSIGN_OR_RETURN(float ms, stop.ElapsedMsSince(start));
  return static_cast<double>(ms) / static_cast<double>(reps);
}

// Three untimed calls of `body` (a run or a replay), every one finished.
template <class Body>
absl::Status WarmUp(OpRank& r, Body body) {
  for (int i = 0; i < 3; ++i) RETURN_IF_ERROR(body());
  return ToAbsl(r.op->Synchronize(r.stream.get()));
}

}  // namespace syncopate::ops
