// Loading libcuda.so.1 and resolving the driver table; see driver.h.
#include "runtime/cuda/driver.h"

#include <dlfcn.h>

#include <cstdio>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace syncopate::cuda {
namespace {

// cuGetProcAddress with the CUDA 12+ signature (driver status out-parameter).
using GetProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult*);

struct Loaded {
  DriverApi api;
  absl::Status status;
};

absl::Status LoadInto(DriverApi& api) {
  // RTLD_NOW: a broken libcuda fails here, not at a random later call.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("CUDA driver libcuda.so.1 not found: ", why ? why : "dlopen failed",
                     " (is the NVIDIA driver installed and is this a GPU machine?)"));
  }
  // The library stays loaded for the life of the process (driver state is process-global).
  auto get_proc = reinterpret_cast<GetProcAddressFn>(dlsym(lib, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    return absl::FailedPreconditionError(
        "CUDA driver libcuda.so.1 is too old: it has no cuGetProcAddress_v2 (need a CUDA 12+ "
        "driver)");
  }
  std::string missing;
#define SYNCOPATE_CU_RESOLVE(name)                                                        \
  {                                                                                       \
    void* fn = nullptr;                                                                   \
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;         \
    CUresult r = get_proc(#name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found); \
    if (r != CUDA_SUCCESS || fn == nullptr || found != CU_GET_PROC_ADDRESS_SUCCESS) {     \
      absl::StrAppend(&missing, missing.empty() ? "" : ", ", #name,                       \
                      found == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT                 \
                          ? " (driver older than the CUDA headers)"                      \
                          : "");                                                          \
    } else {                                                                              \
      api.name = reinterpret_cast<decltype(api.name)>(fn);                                \
    }                                                                                     \
  }
  SYNCOPATE_CU_FOREACH(SYNCOPATE_CU_RESOLVE)
#undef SYNCOPATE_CU_RESOLVE
#define SYNCOPATE_CU_RESOLVE_OPTIONAL(name)                                                        \
  {                                                                                                \
    void* fn = nullptr;                                                                            \
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                   \
    if (get_proc(#name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found) == CUDA_SUCCESS && \
        found == CU_GET_PROC_ADDRESS_SUCCESS) {                                                    \
      api.name = reinterpret_cast<decltype(api.name)>(fn);                                         \
    }                                                                                              \
  }
  SYNCOPATE_CU_FOREACH_OPTIONAL(SYNCOPATE_CU_RESOLVE_OPTIONAL)
#undef SYNCOPATE_CU_RESOLVE_OPTIONAL
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CUDA driver libcuda.so.1 lacks entry points needed by Syncopate: ", missing));
  }
  CUresult r = api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    api.cuGetErrorName(r, &name);
    return absl::FailedPreconditionError(absl::StrCat(
        "CUDA driver libcuda.so.1 loaded but cuInit(0) failed: ", name ? name : "unknown",
        " (no usable GPU?)"));
  }
  api.cuDriverGetVersion(&api.driver_version);
  return absl::OkStatus();
}

Loaded& Instance() {
  static Loaded* loaded = [] {
    auto* l = new Loaded;  // never destroyed: other statics may release handles at exit
    l->status = LoadInto(l->api);
    return l;
  }();
  return *loaded;
}

}  // namespace

absl::StatusOr<const DriverApi*> Driver() {
  Loaded& l = Instance();
  if (!l.status.ok()) return l.status;
  return &l.api;
}

bool GpuAvailable(std::string* why_not) {
  auto api = Driver();
  if (!api.ok()) {
    if (why_not) *why_not = std::string(api.status().message());
    return false;
  }
  int count = 0;
  CUresult r = (*api)->cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count == 0) {
    if (why_not) *why_not = "CUDA driver loaded but no GPU is visible";
    return false;
  }
  return true;
}

std::string CuResultName(CUresult result) {
  Loaded& l = Instance();
  if (!l.status.ok()) return absl::StrCat("CUresult ", static_cast<int>(result));
  const char* name = nullptr;
  const char* text = nullptr;
  if (l.api.cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) {
    return absl::StrCat("CUresult ", static_cast<int>(result));
  }
  l.api.cuGetErrorString(result, &text);
  return text ? absl::StrCat(name, " (", text, ")") : std::string(name);
}

absl::Status CuError(CUresult result, const char* call_text, const char* file, int line) {
  std::string message = absl::StrFormat("%s failed: %s [%s:%d]", call_text, CuResultName(result),
                                        file, line);
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
    case CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED:  // the MPS server's connection pool
      return absl::ResourceExhaustedError(message);
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
      return absl::InvalidArgumentError(message);
    case CUDA_ERROR_NOT_SUPPORTED:
      return absl::UnimplementedError(message);
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

void LogCuError(CUresult result, const char* call_text, const char* file, int line) {
  std::fprintf(stderr, "syncopate: %s failed: %s [%s:%d]\n", call_text,
               CuResultName(result).c_str(), file, line);
}

}  // namespace syncopate::cuda
