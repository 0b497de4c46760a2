// The kernel cache: memory LRU in front of the disk store, with single flight so that one key is
// compiled at most once at a time, across threads (an in-process table of compiles in flight) and
// across processes (a per-key flock in the cache directory; after taking it the disk is checked
// again, since another process may just have written the entry).
//
// Failures: a failed compile is never written to disk, but its status is remembered in memory
// for Options::failure_ttl, so a kernel that does not compile is not recompiled on every request;
// callers waiting on that compile get the same error. Transient errors (DeadlineExceeded,
// Cancelled, Unavailable, ResourceExhausted, Aborted) are not remembered; threads that were
// already waiting on that compile receive them, except DeadlineExceeded and Cancelled, after which
// a waiter with time left tries again (see Deadlines below). Corrupt disk
// entries are deleted, counted and recompiled. Disk problems (full, read-only) do not fail a
// request that compiled: the kernel is returned and the write error counted.
//
// Deadlines: every wait (for another thread's compile of the key, for another process's lock on
// it, for `compile` itself when it honours the deadline) ends at the caller's deadline with
// DeadlineExceeded naming the key, and the pid holding the key's lock when that is what it waited
// for. A waiter whose leader failed with DeadlineExceeded or Cancelled (the leader's deadline,
// not its own) tries again itself while its own deadline allows. Callers that must not spend a
// thread per waiter (the daemon) use GetOrCompileUnlessInFlight: then one thread per key waits,
// however many requests want the key.
//
// Thread-safety: every method is thread-safe. The compile function runs on the calling thread
// with no cache lock held, so compiles of different keys run in parallel.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "jit/cache/cache_key.h"
#include "jit/cache/disk_store.h"
#include "jit/cache/memory_lru.h"
#include "jit/nvrtc/nvrtc_compiler.h"

namespace syncopate::cache {

struct CacheStats {
  uint64_t memory_hits = 0;
  uint64_t disk_hits = 0;
  uint64_t misses = 0;    // requests that found nothing in memory or on disk
  uint64_t compiles = 0;  // compile functions run by this process
  uint64_t fetched = 0;   // misses served by a GetOrCompile `fetch` (e.g. the node's daemon)
  uint64_t compile_failures = 0;
  uint64_t shared_waits = 0;     // requests that joined another thread's compile
  uint64_t failed_key_hits = 0;  // requests answered from the remembered-failure table
  uint64_t corrupt_entries = 0;  // disk entries found corrupt (and deleted)
  uint64_t memory_evictions = 0;
  uint64_t disk_evictions = 0;
  uint64_t disk_write_errors = 0;
  uint64_t memory_bytes = 0;
  uint64_t memory_entries = 0;
  uint64_t disk_bytes = 0;  // this process's estimate (see disk_store.h)
  uint64_t disk_entries = 0;
  uint64_t remembered_failures = 0;  // failed keys remembered now (at most kMaxRememberedFailures)
};

class KernelCache {
 public:
  struct Options {
    std::string dir;  // "" : DefaultCacheDir(); use memory_only for no disk at all
    uint64_t memory_budget_bytes = 256ull << 20;
    uint64_t disk_budget_bytes = 4ull << 30;  // 0: unlimited
    std::chrono::steady_clock::duration failure_ttl = std::chrono::seconds(30);
    bool memory_only = false;
    // A kernel served from memory also marks its disk entry used, at most this often: the disk
    // evicts least recently used first, and a kernel a daemon serves all day from memory would
    // otherwise look unused there and go first.
    std::chrono::steady_clock::duration disk_touch_interval = std::chrono::hours(1);
  };

  enum class Source { kMemory, kDisk, kCompiled, kFetched };

  struct Result {
    std::shared_ptr<const nvrtc::CompiledKernel> kernel;
    // Where this request's kernel came from. A request that waited for another thread's
    // compile reports that thread's source.
    Source source = Source::kCompiled;
    std::chrono::steady_clock::duration elapsed{};
  };

  using CompileFn = std::function<absl::StatusOr<nvrtc::CompiledKernel>()>;
  using Deadline = std::optional<std::chrono::steady_clock::time_point>;  // nullopt: none
  using JoinedFn = std::function<void(const absl::StatusOr<Result>&)>;

  // Opens (creating if needed) the cache directory. Fails if the directory cannot be created or
  // written; a caller that wants to go on without disk can retry with memory_only.
  static absl::StatusOr<std::unique_ptr<KernelCache>> Open(Options options);

  // The kernel for `key`: from memory, else from disk, else from `fetch` (when given), else from
  // `compile` (run at most once per key at a time across threads and processes). Errors are the
  // compile's own status, or a cache-directory error if the per-key lock cannot be taken.
  //
  // `fetch` is another place the kernel may already exist, e.g. the node's daemon. It is asked
  // once per flight (threads of this process wait for it), after the disk miss and *before*
  // the per-key file lock: a daemon that shares this directory compiles the same key under that
  // lock, so asking it while holding the lock would make the request wait on itself. A fetched
  // kernel is stored like a compiled one; a fetch error falls through to `compile`.
  absl::StatusOr<Result> GetOrCompile(const CacheKey& key, const CompileFn& compile,
                                      const CompileFn& fetch = {}, Deadline deadline = std::nullopt);

  // GetOrCompile, except that when a thread of this process already leads `key`'s flight this
  // does not wait: it keeps `joined` and returns nullopt, and `joined` runs once, on the leading
  // thread, with that flight's result. The leader may wait as long as its own deadline lets it,
  // so the caller enforces its own deadline on a joined request (LockHolderOf helps it say why).
  std::optional<absl::StatusOr<Result>> GetOrCompileUnlessInFlight(const CacheKey& key,
                                                                  const CompileFn& compile,
                                                                  const CompileFn& fetch,
                                                                  Deadline deadline,
                                                                  JoinedFn joined);
  // The pid holding the cross-process lock that this process's flight of `key` waits for; 0 when
  // there is no such flight, it does not wait for a lock, or the holder left no pid.
  pid_t LockHolderOf(const CacheKey& key) const;

  CacheStats Stats() const;
  absl::StatusOr<std::vector<DiskStore::EntryInfo>> List() const;
  // Disk GC down to `budget_bytes` (see DiskStore::GarbageCollect).
  absl::StatusOr<DiskStore::GcResult> GarbageCollect(uint64_t budget_bytes);
  // Forgets remembered failures (e.g. after the user fixed a header on disk).
  void ClearFailures();

  // nullptr when memory_only.
  DiskStore* disk() const { return disk_.get(); }

 private:
  struct InFlight;
  struct Failure {
    absl::Status status;
    std::chrono::steady_clock::time_point expires;
  };

  KernelCache(Options options, std::unique_ptr<DiskStore> disk);
  // The slow path of the thread that leads a key's flight: disk, cross-process lock, compile.
  absl::StatusOr<std::shared_ptr<const nvrtc::CompiledKernel>> Fetch(const std::string& key,
                                                                     const CompileFn& compile,
                                                                     const CompileFn& fetch,
                                                                     Deadline deadline,
                                                                     InFlight& flight,
                                                                     Source* source);
  // Runs the flight this thread leads and publishes its result (memory, failures, waiters).
  absl::StatusOr<Result> Lead(const std::string& hex, std::shared_ptr<InFlight> flight,
                              const CompileFn& compile, const CompileFn& fetch, Deadline deadline,
                              std::chrono::steady_clock::time_point start);
  // What a request gets from the table: a hit or remembered failure (done), the flight it
  // leads, or the flight it may join. Adds `joined` to a flight it finds when given.
  struct Lookup {
    std::optional<absl::StatusOr<Result>> done;
    bool touch_disk = false;  // a memory hit whose disk entry is due to be marked used
    std::shared_ptr<InFlight> flight;
    bool leader = false;
  };
  Lookup Find(const std::string& hex, std::chrono::steady_clock::time_point start,
              JoinedFn* joined);
  // Stores a kernel this process made (compiled or fetched) on disk; failures are counted.
  void StoreOnDisk(const std::string& key, const nvrtc::CompiledKernel& kernel);
  absl::StatusOr<std::shared_ptr<const nvrtc::CompiledKernel>> LoadFromDisk(const std::string& key);

  const Options options_;
  const std::unique_ptr<DiskStore> disk_;

  mutable absl::Mutex mu_;
  MemoryLru memory_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<InFlight>> in_flight_ ABSL_GUARDED_BY(mu_);
  // Expired entries are dropped when a failure is added, and the table holds at most
  // kMaxRememberedFailures (the soonest to expire goes first): a key that fails once and is never
  // asked for again (every edit of a broken kernel is a new key) must not stay for the process's
  // life.
  static constexpr size_t kMaxRememberedFailures = 1024;
  void RememberFailure(const std::string& hex, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::flat_hash_map<std::string, Failure> failures_ ABSL_GUARDED_BY(mu_);
  // When each memory hit last marked its disk entry used (cleared when it grows past the memory
  // LRU's entry count several times over: a forgotten key is only touched once more).
  absl::flat_hash_map<std::string, std::chrono::steady_clock::time_point> disk_touched_
      ABSL_GUARDED_BY(mu_);
  CacheStats stats_ ABSL_GUARDED_BY(mu_);
};

const char* SourceName(KernelCache::Source source);

}  // namespace syncopate::cache
