// Device-side output checks for syncopate_tp_bench (NVRTC-compiled at run time, like
// runtime/cuda/workloads/test_kernels.h): outputs of the largest shapes are hundreds of MB, so comparing on
// the host after every configuration would dominate the run.
//   Compare  a 16-bit output against its fp32 reference: non-finite elements (poisoned, i.e.
//            unwritten, outputs are NaN), elements outside |got - want| <= rtol |want| + atol,
//            sum of squared errors and of squared reference (for ||got - want|| / ||want||), and
//            the output's sum and sum of squares (the checksum baselines.py writes too).
//   Mismatch the number of 16-bit words that differ between two buffers (the gathered A).
//   AbsMax   max |x| of an fp32 buffer (scales atol to the reference's magnitude).
// Thread-safety: one thread at a time per CheckKernels.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/cuda/handles.h"

namespace syncopate::tp_bench {

struct CompareResult {
  int64_t elements = 0;
  int64_t nonfinite = 0;
  int64_t out_of_tolerance = 0;
  double rel_err = 0;  // ||got - want|| / ||want||
  double out_sum = 0;
  double out_sq = 0;
  bool Passed(double rel_tol) const {
    return nonfinite == 0 && out_of_tolerance == 0 && rel_err <= rel_tol;
  }
};

class CheckKernels {
 public:
  static absl::StatusOr<CheckKernels> Load(const cuda::Context& context);

  // got: `rows` rows of `cols` bf16 (row pitch cols); want: fp32, same layout. Synchronous.
  absl::StatusOr<CompareResult> Compare(CUdeviceptr got_bf16, CUdeviceptr want_f32, int64_t rows,
                                        int64_t cols, double rtol, double atol_abs,
                                        CUstream stream) const;
  absl::StatusOr<int64_t> Mismatch(CUdeviceptr a, CUdeviceptr b, int64_t count16,
                                   CUstream stream) const;
  absl::StatusOr<double> AbsMax(CUdeviceptr p_f32, int64_t count, CUstream stream) const;

 private:
  const cuda::DriverApi* api_ = nullptr;
  cuda::Module module_;
  CUfunction compare_ = nullptr;
  CUfunction mismatch_ = nullptr;
  CUfunction absmax_ = nullptr;
  cuda::DeviceBuffer acc_;  // accumulators, zeroed before each use
};

}  // namespace syncopate::tp_bench
