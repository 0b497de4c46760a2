// libFuzzer target for importing MSCCL algorithms (core/plan/msccl_import.h): the XML reader,
// the algorithm's checks and its lowering into a plan, then ValidatePlan on what it imported.
// `syncopate plan ... --file x.xml` reads such files from other distributed compilers; a file
// must get an error naming what is wrong, within bounded time and memory, never a crash.
//
// Input: one byte picking the import options (the shape's rows and the dtype), then the XML.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/plan/msccl_import.h"
#include "core/plan/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace syncopate::plan;
  if (size < 1) return 0;
  ImportOptions options;
  // Empty: one row of 16 elements per chunk; else rows that many chunk counts divide.
  if ((data[0] & 1) != 0) options.shape = {int64_t{1} << (data[0] >> 4), 16};
  options.dtype = (data[0] & 2) != 0 ? DType::kF16 : DType::kBF16;
  const std::string_view xml(reinterpret_cast<const char*>(data) + 1, size - 1);
  absl::StatusOr<Plan> plan = ImportMscclXml(xml, options);
  if (plan.ok()) (void)ValidatePlan(*plan);
  return 0;
}
