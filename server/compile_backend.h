// Compile requests through the node's kernel cache: checks the kernel spec and plan, generates the
// fused kernel's source with the overlap compiler (jit/compiler: spec x plan -> schedule tables +
// entry; without a plan, the identity-schedule local kernel), builds the cache key, and runs NVRTC
// only on a miss (the cache's single flight makes the eight ranks of a node, and every later job,
// share one compile; the generated tables cover every rank, so one binary serves them all).
//
// Thread-safety: Compile() is thread-safe; at most `compile_threads` NVRTC compiles run at once.
#pragma once

#include <sys/types.h>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "jit/build/compile_slots.h"
#include "jit/build/kernel_build.h"
#include "jit/cache/kernel_cache.h"
#include "server/plan_store.h"
#include "syncopate/v1/service.pb.h"

namespace syncopate::server {

struct CompileOutcome {
  std::shared_ptr<const nvrtc::CompiledKernel> kernel;
  bool cache_hit = false;
  std::string cache_key;
  std::string plan_hash;
  v1::LaunchMetadata launch;
};

class CompileBackend {
 public:
  struct Options {
    std::string cache_dir;  // "" : memory only
    uint64_t cache_max_bytes = 4ull << 30;
    int compile_threads = 4;
    // CUDA headers for NVRTC (cuda_bf16.h, ...); also <dir>/cccl. Default: the build's toolkit.
    std::string cuda_include_dir;
    // Where requests by plan_hash find their plan, and where full plans are kept for later
    // requests by hash. nullptr: every request by hash is NOT_FOUND.
    PlanStore* plans = nullptr;
    // Bounds of the memo of distinct requests (their checks' results, generated sources and
    // binaries, which it keeps alive even after the kernel cache drops them): the oldest entries
    // go once either is passed.
    size_t memo_max_entries = 256;
    size_t memo_max_bytes = size_t{256} << 20;
  };
  struct MemoStats {
    size_t entries = 0;
    size_t bytes = 0;  // request keys, generated sources, binaries
  };

  static absl::StatusOr<std::unique_ptr<CompileBackend>> Create(const Options& options);

  // Errors: InvalidArgument naming the field (kernel.spec, plan, kernel.source with the compile
  // log), DeadlineExceeded when the compile (or the wait for a compile slot) passes `deadline`,
  // NotFound when request.plan_hash names a plan the plan store does not hold.
  // Every wait (a compile slot, another request's compile of the same kernel, another process's
  // lock on it) ends at `deadline` with DeadlineExceeded naming the cache key (and the lock
  // holder's pid when known).
  absl::StatusOr<CompileOutcome> Compile(const v1::CompileRequest& request, absl::Time deadline);
  // Compile, except when another request of this process is already getting the same kernel:
  // then this returns nullopt at once, sets *joined_key to the kernel's cache key, and `joined`
  // runs later, once, on the thread getting it, with this request's outcome. The caller ends
  // the request at its own deadline if `joined` has not run by then (the other request may have
  // a longer one). Why: a stuck cross-process lock holder must cost one thread per kernel, not
  // one per waiting request, so that other kernels still compile.
  using Joined = std::function<void(absl::StatusOr<CompileOutcome>)>;
  std::optional<absl::StatusOr<CompileOutcome>> CompileUnlessInFlight(
      const v1::CompileRequest& request, absl::Time deadline, Joined joined,
      std::string* joined_key);
  // The pid holding the file lock that this daemon's compile of `cache_key` waits for, or 0.
  pid_t LockHolderOf(const std::string& cache_key) const;
  // The answer when this exact request was served before and its kernel is at hand: never
  // blocks on a compile or the disk, so callback-API handlers may call it inline. nullopt: call
  // Compile (on a thread that may block).
  std::optional<CompileOutcome> CompileIfServedBefore(const v1::CompileRequest& request);

  cache::CacheStats CacheStats() const { return cache_->Stats(); }
  MemoStats Memo() const;

 private:
  // What the checks of one distinct request produced: repeated requests (every rank, every
  // step) skip spec parsing and plan validation.
  struct Prepared {
    jit::PreparedKernel kernel;
    v1::LaunchMetadata launch;
  };
  struct MemoEntry {
    std::shared_ptr<const Prepared> prepared;
    std::shared_ptr<const nvrtc::CompiledKernel> kernel;  // set once compiled or found
    size_t bytes = 0;                                     // what it counts against the bound
  };

  CompileBackend(const Options& options, std::unique_ptr<cache::KernelCache> cache)
      : options_(options), cache_(std::move(cache)), slots_(options.compile_threads) {}
  // The first time a request is seen: finds a plan named by hash (NotFound when not held), then
  // Prepare.
  absl::StatusOr<std::shared_ptr<const Prepared>> PrepareFirst(const v1::CompileRequest& request,
                                                               const std::string& request_key);
  // Checks and generates for `request`, which carries its plan in full (if any), and memoizes the
  // result under `request_key`; `expected_plan_hash`, when set, is the hash the caller named the
  // plan by, checked against the plan's own.
  absl::StatusOr<std::shared_ptr<const Prepared>> Prepare(const v1::CompileRequest& request,
                                                          const std::string& request_key,
                                                          const std::string& expected_plan_hash);
  // Compile (joined == nullptr) or CompileUnlessInFlight.
  std::optional<absl::StatusOr<CompileOutcome>> Run(const v1::CompileRequest& request,
                                                    absl::Time deadline, Joined* joined,
                                                    std::string* joined_key);
  // Drops the oldest memo entries while either bound is passed.
  void TrimMemoLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The outcome of a cache lookup for `prepared`; remembers the kernel for the fast path.
  absl::StatusOr<CompileOutcome> Conclude(const std::string& request_key,
                                          const std::shared_ptr<const Prepared>& prepared,
                                          const absl::StatusOr<cache::KernelCache::Result>& result,
                                          bool compiled_here);

  const Options options_;
  std::unique_ptr<cache::KernelCache> cache_;
  jit::CompileSlots slots_;  // at most compile_threads NVRTC compiles at once
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, MemoEntry> prepared_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> prepared_order_ ABSL_GUARDED_BY(mu_);  // oldest first
  size_t prepared_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace syncopate::server
