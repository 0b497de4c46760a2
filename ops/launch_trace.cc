#include "ops/launch_trace.h"

#include <cstdlib>
#include <fstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace syncopate::ops {
namespace {

constexpr size_t kWordsPerCta = 4;
constexpr size_t kSlotBytes = sizeof(uint64_t) * kWordsPerCta * LaunchTrace::kMaxCtas;

}  // namespace

absl::StatusOr<std::unique_ptr<LaunchTrace>> LaunchTrace::FromEnvironment(
    const cuda::DriverApi& api, const std::string& file_stem) {
  const char* dir = std::getenv("SYNCOPATE_OPS_TRACE_DIR");
  if (dir == nullptr || *dir == '\0') return nullptr;
  ASSIGN_OR_RETURN(cuda::DeviceBuffer records,
                   cuda::DeviceBuffer::Allocate(api, kSlots * kSlotBytes));
  // Zeroed, and complete before any launch on any stream writes a record.
  CU_RETURN_IF_ERROR(api.cuMemsetD8Async(records.get(), 0, kSlots * kSlotBytes, nullptr));
  CU_RETURN_IF_ERROR(api.cuStreamSynchronize(nullptr));
  std::string path = absl::StrCat(dir, "/", file_stem, ".csv");
  return std::unique_ptr<LaunchTrace>(new LaunchTrace(api, std::move(path), std::move(records)));
}

CUdeviceptr LaunchTrace::Next(int ctas, int comm_ctas, int control_ctas, int64_t bucket_m,
                              int64_t m) {
  if (ctas <= 0 || ctas > kMaxCtas) return 0;
  const int index = ring_.Claim({.ctas = ctas,
                                 .comm_ctas = comm_ctas,
                                 .control_ctas = control_ctas,
                                 .bucket_m = bucket_m,
                                 .m = m});
  return records_.get() + index * kSlotBytes;
}

void LaunchTrace::DropLast() { ring_.DropLast(); }

absl::Status LaunchTrace::Write() const {
  // An op that never launched (a Create that failed) leaves no file, nor replaces one.
  if (ring_.launches() == 0) return absl::OkStatus();
  std::ofstream out(path_);
  out << "launch,bucket_m,m,cta,comm,control,smid,start_ns,end_ns,wait_ns,waits\n";
  std::vector<uint64_t> rec(kWordsPerCta * kMaxCtas);
  for (const int index : ring_.OldestFirst()) {
    const LaunchRecordSlot& s = ring_.slot(index);
    const size_t bytes = sizeof(uint64_t) * kWordsPerCta * s.ctas;
    CU_RETURN_IF_ERROR(api_->cuMemcpyDtoH(rec.data(), records_.get() + index * kSlotBytes, bytes));
    for (int b = 0; b < s.ctas; ++b) {
      const uint64_t* r = &rec[kWordsPerCta * b];
      const bool comm = b < s.comm_ctas;
      const bool control = !comm && b < s.comm_ctas + s.control_ctas;
      out << s.launch << ',' << s.bucket_m << ',' << s.m << ',' << b << ',' << (comm ? 1 : 0) << ','
          << (control ? 1 : 0) << ',' << (r[3] >> 32) << ',' << r[0] << ',' << r[1] << ',' << r[2]
          << ',' << (r[3] & 0xffffffffu) << '\n';
    }
  }
  if (!out.good()) return absl::InternalError(absl::StrCat("cannot write ", path_));
  return absl::OkStatus();
}

}  // namespace syncopate::ops
