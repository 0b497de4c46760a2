// Diagnostics: per-CTA timelines of an op's fused launches, for finding where a run's time goes
// (a first run after idle, a late CTA, waits for peers). Off unless SYNCOPATE_OPS_TRACE_DIR names
// a folder: then every direct fused launch (not one captured in a graph) writes its records
// (jit/include/syncopate/impl/trace.cuh) into a ring of the last kSlots launches on the device,
// and the op writes them to <dir>/<job>_<kind>_rank<r>.csv when it is destroyed, after its work
// has ended. The clock is %globaltimer, one clock for every process on a GPU, so the ranks'
// files line up. bench/ops/launch_trace_summary.py reads them.
#ifndef SYNCOPATE_OPS_LAUNCH_TRACE_H_
#define SYNCOPATE_OPS_LAUNCH_TRACE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ops/core/launch_ring.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/handles.h"

namespace syncopate::ops {

class LaunchTrace {
 public:
  static constexpr int kSlots = 512;     // launches kept: the last ones (16 MiB on the device)
  static constexpr int kMaxCtas = 1024;  // per launch; a larger grid is not traced

  // Null (and no error) when SYNCOPATE_OPS_TRACE_DIR is unset or empty.
  static absl::StatusOr<std::unique_ptr<LaunchTrace>> FromEnvironment(const cuda::DriverApi& api,
                                                                      const std::string& file_stem);

  // Device memory for the records of the next launch of `ctas` CTAs (the first `comm_ctas` of
  // them comm CTAs, then `control_ctas` control CTAs) at this bucket and M, or 0 where it is not
  // traced (too large a grid).
  CUdeviceptr Next(int ctas, int comm_ctas, int control_ctas, int64_t bucket_m, int64_t m);
  // The launch Next was last called for did not happen: its slot is freed.
  void DropLast();

  // Writes the kept launches, oldest first, where there was any. Only once they have ended.
  absl::Status Write() const;

 private:
  LaunchTrace(const cuda::DriverApi& api, std::string path, cuda::DeviceBuffer records)
      : api_(&api), path_(std::move(path)), records_(std::move(records)), ring_(kSlots) {}

  const cuda::DriverApi* api_;
  std::string path_;
  cuda::DeviceBuffer records_;  // kSlots x kMaxCtas x 4 u64, zeroed: a CTA that never ran shows 0
  LaunchRing ring_;             // which slot holds which launch
};

}  // namespace syncopate::ops

#endif  // SYNCOPATE_OPS_LAUNCH_TRACE_H_
