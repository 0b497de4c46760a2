// Internal to libsyncopate: what the C ABI's entry points share (syncopate_ops.h). The pure
// entry points and the struct conversions (c_abi_pure.cc) build without CUDA, so the C config
// fuzzer (tests/fuzz) links them alone; the op handles' entry points are c_api.cc's.
#pragma once

#include <cstdint>
#include <exception>
#include <string>

#include "syncopate/ops.h"
#include "syncopate/status.h"
#include "syncopate/syncopate_ops.h"

namespace syncopate::ops::c_abi {

// Records `status`'s message for syncopate_last_error() (this thread's) and returns its code.
int32_t Report(const Status& status);
int32_t Invalid(const std::string& message);
// This thread's last recorded message ("" after a success): syncopate_last_error()'s.
const char* LastError();

// Runs `body` (returning a Status), turning any C++ exception into INTERNAL.
template <class Body>
int32_t Guarded(Body&& body) {
  try {
    return Report(body());
  } catch (const std::exception& e) {
    return Report(Status(StatusCode::kInternal, std::string("syncopate: exception: ") + e.what()));
  } catch (...) {
    return Report(Status(StatusCode::kInternal, "syncopate: unknown exception"));
  }
}

// The caller's structs as the C++ API's, checking struct_size first (a caller built against an
// older header passes fewer bytes); InvalidArgument naming the field at fault.
Status ToGroupConfig(const syncopate_group_config* in, GroupConfig& out);
Status ToOpConfig(const syncopate_op_config* in, OpConfig& out);
// `choice` into the caller's struct, or choice's error.
Status ToCPath(const Result<PathChoice>& choice, syncopate_path* out);

}  // namespace syncopate::ops::c_abi
