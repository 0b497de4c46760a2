// Device headers and example kernels, embedded into the library at build time (the CMake step in
// jit/compiler/CMakeLists.txt turns the .cuh files into raw string literals), so NVRTC gets them
// as in-memory headers and compiles from any working directory, with nothing installed.
// Immutable after static initialisation; thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace syncopate::jit {

// NVRTC include name ("syncopate/device.cuh", "syncopate/launch_abi.h",
// "syncopate/impl/schedule.cuh", ...) -> content.
const std::map<std::string, std::string>& DeviceHeaders();

// examples/kernels/*.cuh by file name ("gemm_mma.cuh", "rowwise.cuh").
absl::StatusOr<std::string_view> ExampleKernelSource(std::string_view name);
std::vector<std::string> ExampleKernelNames();

// examples/kernels/*.spec by file name ("scale_rows.spec", "gemm_allgather.spec").
absl::StatusOr<std::string_view> ExampleKernelSpec(std::string_view name);

}  // namespace syncopate::jit
