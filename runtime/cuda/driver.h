// The CUDA driver API, loaded at run time: libcuda.so.1 is dlopen'ed on first use and every entry
// point is resolved through cuGetProcAddress into one table (NCCL's cudawrap pattern). Nothing
// links against libcuda, so binaries start on machines without a driver; there the first GPU call
// returns FailedPrecondition("CUDA driver libcuda.so.1 not found: ...").
//
// <cuda.h> is included for types only. Members are named after the API (the header's versioning
// macros rename both the member and the call site alike, so `api.cuMemAlloc(...)` resolves the
// version whose prototype the header declares).
//
// Thread-safety: Driver() is safe to call from any thread; the table is immutable once loaded.
#pragma once

#include <cuda.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace syncopate::cuda {

#define SYNCOPATE_CU_FOREACH(X)                  \
  X(cuGetErrorName)                              \
  X(cuGetErrorString)                            \
  X(cuInit)                                      \
  X(cuDriverGetVersion)                          \
  X(cuDeviceGet)                                 \
  X(cuDeviceGetCount)                            \
  X(cuDeviceGetAttribute)                        \
  X(cuDeviceGetName)                             \
  X(cuDeviceGetUuid)                             \
  X(cuDevicePrimaryCtxRetain)                    \
  X(cuDevicePrimaryCtxRelease)                   \
  X(cuCtxCreate)                                 \
  X(cuCtxDestroy)                                \
  X(cuCtxSetCurrent)                             \
  X(cuCtxGetCurrent)                             \
  X(cuCtxSynchronize)                            \
  X(cuStreamCreate)                              \
  X(cuStreamDestroy)                             \
  X(cuStreamSynchronize)                         \
  X(cuStreamQuery)                               \
  X(cuStreamWaitEvent)                           \
  X(cuStreamWaitValue32)                         \
  X(cuStreamWriteValue32)                        \
  X(cuStreamIsCapturing)                         \
  X(cuStreamBeginCapture)                        \
  X(cuStreamEndCapture)                          \
  X(cuGraphInstantiateWithFlags)                 \
  X(cuGraphLaunch)                               \
  X(cuGraphDestroy)                              \
  X(cuGraphExecDestroy)                          \
  X(cuGraphGetNodes)                             \
  X(cuGraphNodeGetType)                          \
  X(cuGraphKernelNodeGetParams)                  \
  X(cuGraphExecKernelNodeSetParams)              \
  X(cuGraphBatchMemOpNodeGetParams)              \
  X(cuGraphExecBatchMemOpNodeSetParams)          \
  X(cuEventCreate)                               \
  X(cuEventDestroy)                              \
  X(cuEventRecord)                               \
  X(cuEventSynchronize)                          \
  X(cuEventQuery)                                \
  X(cuEventElapsedTime)                          \
  X(cuModuleLoadData)                            \
  X(cuModuleUnload)                              \
  X(cuModuleGetFunction)                         \
  X(cuFuncSetAttribute)                          \
  X(cuFuncGetAttribute)                          \
  X(cuLaunchKernel)                              \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
  X(cuMemAlloc)                                  \
  X(cuMemFree)                                   \
  X(cuMemHostAlloc)                              \
  X(cuMemFreeHost)                               \
  X(cuMemHostGetDevicePointer)                   \
  X(cuMemHostRegister)                           \
  X(cuMemHostUnregister)                         \
  X(cuMemcpyHtoD)                                \
  X(cuMemcpyDtoH)                                \
  X(cuMemcpyAsync)                               \
  X(cuMemcpyHtoDAsync)                           \
  X(cuMemcpyDtoHAsync)                           \
  X(cuMemcpy2DAsync)                             \
  X(cuMemsetD8Async)                             \
  X(cuMemsetD16Async)                            \
  X(cuMemsetD32Async)                            \
  X(cuMemsetD2D16Async)                          \
  X(cuMemsetD2D32Async)                          \
  X(cuMemCreate)                                 \
  X(cuMemRelease)                                \
  X(cuMemAddressReserve)                         \
  X(cuMemAddressFree)                            \
  X(cuMemMap)                                    \
  X(cuMemUnmap)                                  \
  X(cuMemSetAccess)                              \
  X(cuMemGetAllocationGranularity)               \
  X(cuMemExportToShareableHandle)                \
  X(cuMemImportFromShareableHandle)

// Entry points used when the driver has them (null otherwise): cuMemcpyBatchAsync (CUDA 12.8+)
// lets a copy ask for the copy engines instead of the SMs.
#define SYNCOPATE_CU_FOREACH_OPTIONAL(X) X(cuMemcpyBatchAsync)

struct DriverApi {
#define SYNCOPATE_CU_MEMBER(name) decltype(&::name) name = nullptr;
  SYNCOPATE_CU_FOREACH(SYNCOPATE_CU_MEMBER)
  SYNCOPATE_CU_FOREACH_OPTIONAL(SYNCOPATE_CU_MEMBER)
#undef SYNCOPATE_CU_MEMBER
  int driver_version = 0;  // cuDriverGetVersion, e.g. 13000
};

// Loads libcuda.so.1, resolves the table and calls cuInit(0), once per process. Later calls
// return the same table or the same error.
absl::StatusOr<const DriverApi*> Driver();

// True when Driver() succeeds and at least one device is visible (for tests that skip).
bool GpuAvailable(std::string* why_not = nullptr);

// "CUDA_ERROR_INVALID_VALUE (invalid argument)", through the table when it is loaded.
std::string CuResultName(CUresult result);

// Builds the error status for a failed driver call: the call's text and the result's name.
absl::Status CuError(CUresult result, const char* call_text, const char* file, int line);

}  // namespace syncopate::cuda

// CU_RETURN_IF_ERROR(api.cuMemAlloc(&ptr, bytes)): returns an absl::Status naming the call and
// the CUresult from the enclosing function when the call fails. The sticky-error case needs no
// special handling: the next call reports it again, and the context is then unusable anyway.
#define CU_RETURN_IF_ERROR(call)                                                      \
  do {                                                                                \
    CUresult syncopate_cu_result_ = (call);                                           \
    if (syncopate_cu_result_ != CUDA_SUCCESS)                                         \
      return ::syncopate::cuda::CuError(syncopate_cu_result_, #call, __FILE__, __LINE__); \
  } while (0)

// For destructors and other void contexts: logs a failed call to stderr, never throws.
#define CU_LOG_IF_ERROR(call)                                                         \
  do {                                                                                \
    CUresult syncopate_cu_result_ = (call);                                           \
    if (syncopate_cu_result_ != CUDA_SUCCESS)                                         \
      ::syncopate::cuda::LogCuError(syncopate_cu_result_, #call, __FILE__, __LINE__); \
  } while (0)

namespace syncopate::cuda {
void LogCuError(CUresult result, const char* call_text, const char* file, int line);
}  // namespace syncopate::cuda
