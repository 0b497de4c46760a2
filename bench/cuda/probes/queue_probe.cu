// Probe: can a side-stream copy land while a kernel of the same process spins for it?
//
// The shape of the copy-engine protocol (group.cc, Issue): the kernel is submitted first and
// releases a host-mapped gate word; a side stream waits for the gate, copies, and writes the flag
// the kernel waits for. The probe varies the kernel's grid (1 CTA, all resident slots but one
// SM's, all but one slot, all), how the waiters spin (tight, __nanosleep), and how the copy is
// issued (cuMemcpyAsync, cuMemcpyBatchAsync with CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE);
// one line per trial: ok or STALL (the kernel's 1 s deadline passed).
//
// Found on the H200 (2026-12-04, bench/RESULTS.md): time-sliced and under MPS, every variant
// stalls when the grid holds every resident slot and none does with one slot free: the driver
// runs these device-to-device copies as kernels (DefaultCopyEngineFreeCtas in overlap_runtime.h).
//
// Build: nvcc -O2 -arch=sm_90 -o queue_probe queue_probe.cu -lcuda
// Run it time-sliced and under MPS with CUDA_DEVICE_MAX_CONNECTIONS 1, 8 and 32.
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#define CHECK(x)                                                              \
  do {                                                                        \
    CUresult r_ = (x);                                                        \
    if (r_ != CUDA_SUCCESS) {                                                 \
      const char* s_ = nullptr;                                               \
      cuGetErrorString(r_, &s_);                                              \
      std::fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #x, s_);   \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

__device__ unsigned long long Now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One thread releases the gate, then waits for every flag or for the deadline.
__global__ void Waiter(volatile unsigned* gate_host, volatile unsigned* flags, int num_flags,
                       unsigned long long timeout_ns, volatile unsigned* result_host,
                       unsigned sleep_ns) {
  if (threadIdx.x != 0) return;
  if (blockIdx.x == 0) {
    *gate_host = 1;
    __threadfence_system();
  }
  const unsigned long long start = Now();
  for (int i = 0; i < num_flags; ++i) {
    while (flags[i] < 1) {
      if (sleep_ns != 0) __nanosleep(sleep_ns);
      if (Now() - start > timeout_ns) {
        if (blockIdx.x == 0) {
          *result_host = 2 + (static_cast<unsigned>(i) << 8);
          __threadfence_system();
        }
        return;
      }
    }
  }
  if (blockIdx.x == 0) {
    *result_host = 1;
    __threadfence_system();
  }
}

enum class SideKind { kSameContext, kHighPriority, kSecondContext, kHostIssued };
enum class SignalKind { kWriteValue, kCopy };

const char* Name(SideKind k) {
  switch (k) {
    case SideKind::kSameContext: return "same-ctx";
    case SideKind::kHighPriority: return "high-prio";
    case SideKind::kSecondContext: return "second-ctx";
    case SideKind::kHostIssued: return "host-issued";
  }
  return "?";
}

struct VmmBuffer {
  CUdeviceptr ptr = 0;
  size_t size = 0;
  CUmemGenericAllocationHandle handle = 0;
};

VmmBuffer MakeVmm(CUdevice dev, size_t bytes) {
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  VmmBuffer b;
  b.size = (bytes + gran - 1) / gran * gran;
  CHECK(cuMemCreate(&b.handle, b.size, &prop, 0));
  CHECK(cuMemAddressReserve(&b.ptr, b.size, 0, 0, 0));
  CHECK(cuMemMap(b.ptr, b.size, 0, b.handle, 0));
  CUmemAccessDesc access;
  std::memset(&access, 0, sizeof(access));
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = dev;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK(cuMemSetAccess(b.ptr, b.size, &access, 1));
  return b;
}

struct Setup {
  CUdevice dev;
  CUcontext primary;
  CUcontext second;
  CUmodule module;
  CUfunction waiter;
  unsigned* host_words;  // [0] gate, [1] result, [2] the value 1 (copy source)
  CUdeviceptr host_words_dev;
  VmmBuffer flags;
  VmmBuffer data_src;
  VmmBuffer data_dst;
};

constexpr size_t kCopyBytes = 256ull << 20;
constexpr int kMaxSides = 8;

bool Trial(Setup& s, SideKind kind, SignalKind signal, int sides, int grid, bool batch, int pairs,
           unsigned sleep_ns, std::string* detail) {
  CHECK(cuCtxSetCurrent(s.primary));
  CHECK(cuMemsetD32(s.flags.ptr, 0, 64));
  CHECK(cuCtxSynchronize());
  volatile unsigned* hw = s.host_words;
  hw[0] = 0;
  hw[1] = 0;
  hw[2] = 1;

  CUstream launch;
  CHECK(cuStreamCreate(&launch, CU_STREAM_NON_BLOCKING));
  std::vector<CUstream> side(sides);
  int least = 0, greatest = 0;
  CHECK(cuCtxGetStreamPriorityRange(&least, &greatest));
  for (int i = 0; i < sides; ++i) {
    if (kind == SideKind::kSecondContext) CHECK(cuCtxSetCurrent(s.second));
    if (kind == SideKind::kHighPriority) {
      CHECK(cuStreamCreateWithPriority(&side[i], CU_STREAM_NON_BLOCKING, greatest));
    } else {
      CHECK(cuStreamCreate(&side[i], CU_STREAM_NON_BLOCKING));
    }
    CHECK(cuCtxSetCurrent(s.primary));
  }
  CUevent fork;
  CHECK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
  CHECK(cuEventRecord(fork, launch));

  CUdeviceptr gate = s.host_words_dev;
  CUdeviceptr result = s.host_words_dev + 4;
  CUdeviceptr one = s.host_words_dev + 8;
  unsigned long long timeout_ns = 1000ull * 1000 * 1000;
  int n = sides * pairs;
  void* params[] = {&gate, &s.flags.ptr, &n, &timeout_ns, &result, &sleep_ns};
  CHECK(cuLaunchKernel(s.waiter, grid, 1, 1, 32, 1, 1, 0, launch, params, nullptr));

  auto enqueue_side = [&](int i, bool with_waits) {
    if (kind == SideKind::kSecondContext) CHECK(cuCtxSetCurrent(s.second));
    if (with_waits) {
      CHECK(cuStreamWaitEvent(side[i], fork, 0));
      CHECK(cuStreamWaitValue32(side[i], gate, 1, CU_STREAM_WAIT_VALUE_GEQ));
    }
    const size_t part = kCopyBytes / kMaxSides / pairs;
    for (int k = 0; k < pairs; ++k) {
      CUdeviceptr dst = s.data_dst.ptr + (i * pairs + k) * part;
      CUdeviceptr src = s.data_src.ptr + (i * pairs + k) * part;
      if (batch) {
        CUmemcpyAttributes attr;
        std::memset(&attr, 0, sizeof(attr));
        attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
        attr.flags = CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE;
        size_t size = part, idx = 0;
        CHECK(cuMemcpyBatchAsync(&dst, &src, &size, 1, &attr, &idx, 1, side[i]));
      } else {
        CHECK(cuMemcpyAsync(dst, src, part, side[i]));
      }
      const CUdeviceptr flag = s.flags.ptr + 4 * (i * pairs + k);
      if (signal == SignalKind::kWriteValue) {
        CHECK(cuStreamWriteValue32(side[i], flag, 1, CU_STREAM_WRITE_VALUE_DEFAULT));
      } else {
        CHECK(cuMemcpyAsync(flag, one, 4, side[i]));
      }
    }
    CHECK(cuCtxSetCurrent(s.primary));
  };
  if (kind == SideKind::kHostIssued) {
    // No stream waits at all: the host sees the gate, then submits the copies.
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (hw[0] == 0 && std::chrono::steady_clock::now() < until) {}
    for (int i = 0; i < sides; ++i) enqueue_side(i, /*with_waits=*/false);
  } else {
    for (int i = 0; i < sides; ++i) enqueue_side(i, /*with_waits=*/true);
  }
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (hw[1] == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  const unsigned r = hw[1];
  CHECK(cuCtxSynchronize());
  if (kind == SideKind::kSecondContext) {
    CHECK(cuCtxSetCurrent(s.second));
    CHECK(cuCtxSynchronize());
    CHECK(cuCtxSetCurrent(s.primary));
  }
  for (CUstream st : side) CHECK(cuStreamDestroy(st));
  CHECK(cuStreamDestroy(launch));
  CHECK(cuEventDestroy(fork));
  if (r == 1) return true;
  *detail = r == 0 ? "no result within 5 s" : "kernel gave up waiting for side " + std::to_string(r >> 8);
  return false;
}

int main(int argc, char** argv) {
  const char* label = argc > 1 ? argv[1] : "";
  CHECK(cuInit(0));
  Setup s;
  CHECK(cuDeviceGet(&s.dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&s.primary, s.dev));
  CHECK(cuCtxSetCurrent(s.primary));
  CUctxCreateParams params;
  std::memset(&params, 0, sizeof(params));
  CHECK(cuCtxCreate(&s.second, &params, 0, s.dev));
  CHECK(cuCtxSetCurrent(s.primary));
  // The runtime loads the kernel into the primary context; take its driver handle.
  cudaFunction_t fn;
  if (cudaGetFuncBySymbol(&fn, reinterpret_cast<const void*>(&Waiter)) != cudaSuccess) return 1;
  s.waiter = reinterpret_cast<CUfunction>(fn);
  CHECK(cuCtxSetCurrent(s.primary));
  void* host = nullptr;
  CHECK(cuMemHostAlloc(&host, 4096, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
  s.host_words = static_cast<unsigned*>(host);
  CHECK(cuMemHostGetDevicePointer(&s.host_words_dev, host, 0));
  s.flags = MakeVmm(s.dev, 4096);
  s.data_src = MakeVmm(s.dev, kCopyBytes);
  s.data_dst = MakeVmm(s.dev, kCopyBytes);
  const char* conns = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const char* pct = std::getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
  int bad = 0;
  int per_sm = 0, sms = 0;
  CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, s.waiter, 32, 0));
  CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, s.dev));
  const int full = per_sm * sms;
  for (int grid : {1, full - per_sm, full - 1, full}) {
    for (unsigned sleep_ns : {0u, 2000u}) {
      for (bool batch : {false, true}) {
        std::string detail;
        const bool ok = Trial(s, SideKind::kSameContext, SignalKind::kWriteValue, 1, grid, batch, 1,
                              sleep_ns, &detail);
        bad += ok ? 0 : 1;
        std::printf("probe %s conns=%s mps_pct=%s grid=%d/%d sleep=%u %s | %s\n", label,
                    conns ? conns : "-", pct ? pct : "-", grid, full, sleep_ns,
                    batch ? "batch-overlap" : "memcpy", ok ? "ok" : ("STALL(" + detail + ")").c_str());
        std::fflush(stdout);
      }
    }
  }
  // Signals by copy instead of a stream write, full grid.
  for (bool batch : {false, true}) {
    std::string detail;
    const bool ok = Trial(s, SideKind::kSameContext, SignalKind::kCopy, 1, full, batch, 1, 0, &detail);
    std::printf("probe %s grid=full signal=copy %s | %s\n", label, batch ? "batch-overlap" : "memcpy",
                ok ? "ok" : ("STALL(" + detail + ")").c_str());
    std::fflush(stdout);
  }
  return bad == 0 ? 0 : 2;
}
