// Interleaved CUDA-event timing; see kernel_timing.h.
#include "runtime/gemm/kernel_timing.h"

#include <algorithm>

#include "core/base/status_macros.h"
#include "runtime/cuda/handles.h"

namespace syncopate::gemm {

absl::StatusOr<std::vector<double>> MedianMsInterleaved(const cuda::DriverApi& api, CUstream stream,
                                                        int warmup, int reps,
                                                        const std::vector<TimedRun>& runs) {
  if (reps < 1) return absl::InvalidArgumentError("reps must be at least 1");
  ASSIGN_OR_RETURN(cuda::Event start, cuda::Event::Create(api, CU_EVENT_DEFAULT));
  ASSIGN_OR_RETURN(cuda::Event stop, cuda::Event::Create(api, CU_EVENT_DEFAULT));
  for (int i = 0; i < warmup; ++i) {
    for (const TimedRun& run : runs) RETURN_IF_ERROR(run());
  }
  std::vector<std::vector<double>> ms(runs.size());
  for (int rep = 0; rep < reps; ++rep) {
    for (size_t c = 0; c < runs.size(); ++c) {
      RETURN_IF_ERROR(start.Record(stream));
      RETURN_IF_ERROR(runs[c]());
      RETURN_IF_ERROR(stop.Record(stream));
      CU_RETURN_IF_ERROR(api.cuEventSynchronize(stop.get()));
      ASSIGN_OR_RETURN(float t, stop.ElapsedMsSince(start));
      ms[c].push_back(t);
    }
  }
  std::vector<double> medians;
  for (std::vector<double>& m : ms) {
    std::nth_element(m.begin(), m.begin() + m.size() / 2, m.end());
    medians.push_back(m[m.size() / 2]);
  }
  return medians;
}

}  // namespace syncopate::gemm
