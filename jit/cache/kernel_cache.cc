// Kernel cache with single flight; see kernel_cache.h.
#include "jit/cache/kernel_cache.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "jit/cache/file_lock.h"
#include "runtime/base/status_macros.h"
#include "spdlog/spdlog.h"

namespace syncopate::cache {
namespace {

// Errors that say something about this attempt rather than about the kernel: another request
// (with a longer deadline, or after memory frees up) may well succeed, so they are not remembered.
bool IsTransient(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
      return true;
    default:
      return false;
  }
}

}  // namespace

// One compile in progress. The leader writes `result` and `source`, then notifies; waiters read
// them only after the notification, which orders the accesses.
struct KernelCache::InFlight {
  absl::Notification done;
  absl::StatusOr<std::shared_ptr<const nvrtc::CompiledKernel>> result;
  Source source = Source::kCompiled;
};

const char* SourceName(KernelCache::Source source) {
  switch (source) {
    case KernelCache::Source::kMemory:
      return "memory";
    case KernelCache::Source::kDisk:
      return "disk";
    case KernelCache::Source::kCompiled:
      return "compiled";
    case KernelCache::Source::kFetched:
      return "fetched";
  }
  return "unknown";
}

KernelCache::KernelCache(Options options, std::unique_ptr<DiskStore> disk)
    : options_(std::move(options)), disk_(std::move(disk)), memory_(options_.memory_budget_bytes) {}

absl::StatusOr<std::unique_ptr<KernelCache>> KernelCache::Open(Options options) {
  std::unique_ptr<DiskStore> disk;
  if (!options.memory_only) {
    if (options.dir.empty()) {
      ASSIGN_OR_RETURN(options.dir, DefaultCacheDir());
    }
    ASSIGN_OR_RETURN(disk, DiskStore::Open(options.dir, options.disk_budget_bytes));
  }
  return std::unique_ptr<KernelCache>(new KernelCache(std::move(options), std::move(disk)));
}

absl::StatusOr<KernelCache::Result> KernelCache::GetOrCompile(const CacheKey& key,
                                                              const CompileFn& compile,
                                                              const CompileFn& fetch) {
  const auto start = std::chrono::steady_clock::now();
  const std::string& hex = key.hex();
  std::shared_ptr<InFlight> flight;
  bool leader = false;
  {
    absl::MutexLock lock(&mu_);
    if (MemoryLru::Value hit = memory_.Get(hex)) {
      ++stats_.memory_hits;
      return Result{std::move(hit), Source::kMemory, std::chrono::steady_clock::now() - start};
    }
    if (auto it = failures_.find(hex); it != failures_.end()) {
      if (start < it->second.expires) {
        ++stats_.failed_key_hits;
        return it->second.status;
      }
      failures_.erase(it);
    }
    auto [it, inserted] = in_flight_.try_emplace(hex);
    if (inserted) {
      it->second = std::make_shared<InFlight>();
      leader = true;
    } else {
      ++stats_.shared_waits;
    }
    flight = it->second;
  }

  if (!leader) {
    flight->done.WaitForNotification();
    if (!flight->result.ok()) return flight->result.status();
    return Result{*flight->result, flight->source, std::chrono::steady_clock::now() - start};
  }

  Source source = Source::kCompiled;
  absl::StatusOr<std::shared_ptr<const nvrtc::CompiledKernel>> result =
      Fetch(hex, compile, fetch, &source);
  {
    absl::MutexLock lock(&mu_);
    // Publishing to memory and leaving the flight table happen under one lock, so a new request
    // either finds the kernel in memory or joins this flight; it never starts a second compile.
    if (result.ok()) {
      stats_.memory_evictions += memory_.Put(hex, *result);
    } else if (!IsTransient(result.status())) {
      failures_[hex] =
          Failure{result.status(), std::chrono::steady_clock::now() + options_.failure_ttl};
    }
    in_flight_.erase(hex);
  }
  flight->result = result;
  flight->source = source;
  flight->done.Notify();
  if (!result.ok()) return result.status();
  return Result{*std::move(result), source, std::chrono::steady_clock::now() - start};
}

absl::StatusOr<std::shared_ptr<const nvrtc::CompiledKernel>> KernelCache::LoadFromDisk(
    const std::string& key) {
  absl::StatusOr<nvrtc::CompiledKernel> loaded = disk_->Get(key);
  if (loaded.ok()) return std::make_shared<const nvrtc::CompiledKernel>(*std::move(loaded));
  if (absl::IsDataLoss(loaded.status())) {
    // The store deleted it and counted it; we recompile. Worth a line in the log: it means a
    // disk or a writer misbehaved.
    spdlog::warn("kernel cache: {}", loaded.status().ToString());
  } else if (!absl::IsNotFound(loaded.status())) {
    spdlog::warn("kernel cache: cannot read entry {}: {}", key, loaded.status().ToString());
  }
  return loaded.status();
}

void KernelCache::StoreOnDisk(const std::string& key, const nvrtc::CompiledKernel& kernel) {
  if (disk_ == nullptr) return;
  if (absl::Status written = disk_->Put(key, kernel); !written.ok()) {
    spdlog::warn("kernel cache: cannot store entry {}: {}", key, written.ToString());
    absl::MutexLock lock(&mu_);
    ++stats_.disk_write_errors;
  }
}

absl::StatusOr<std::shared_ptr<const nvrtc::CompiledKernel>> KernelCache::Fetch(
    const std::string& key, const CompileFn& compile, const CompileFn& fetch, Source* source) {
  std::optional<FileLock> file_lock;
  if (disk_ != nullptr) {
    if (auto hit = LoadFromDisk(key); hit.ok()) {
      absl::MutexLock lock(&mu_);
      ++stats_.disk_hits;
      *source = Source::kDisk;
      return hit;
    }
  }
  if (fetch) {  // before the file lock: see GetOrCompile
    if (absl::StatusOr<nvrtc::CompiledKernel> fetched = fetch(); fetched.ok()) {
      {
        absl::MutexLock lock(&mu_);
        ++stats_.misses;
        ++stats_.fetched;
      }
      *source = Source::kFetched;
      StoreOnDisk(key, *fetched);
      return std::make_shared<const nvrtc::CompiledKernel>(*std::move(fetched));
    }
  }
  if (disk_ != nullptr) {
    // Another process may be compiling this key: wait for its lock, then look again.
    absl::StatusOr<FileLock> acquired = FileLock::Acquire(disk_->LockPath(key));
    if (acquired.ok()) {
      file_lock.emplace(*std::move(acquired));
      if (auto hit = LoadFromDisk(key); hit.ok()) {
        absl::MutexLock lock(&mu_);
        ++stats_.disk_hits;
        *source = Source::kDisk;
        return hit;
      }
    } else {
      // Compiling without cross-process exclusion at worst duplicates work; refusing to compile
      // would turn a cache problem into an outage.
      spdlog::warn("kernel cache: {}; compiling without the cross-process lock",
                   acquired.status().ToString());
    }
  }

  {
    absl::MutexLock lock(&mu_);
    ++stats_.misses;
    ++stats_.compiles;
  }
  *source = Source::kCompiled;
  absl::StatusOr<nvrtc::CompiledKernel> compiled = compile();
  if (!compiled.ok()) {
    absl::MutexLock lock(&mu_);
    ++stats_.compile_failures;
    return compiled.status();
  }
  StoreOnDisk(key, *compiled);
  return std::make_shared<const nvrtc::CompiledKernel>(*std::move(compiled));
}

CacheStats KernelCache::Stats() const {
  absl::MutexLock lock(&mu_);
  CacheStats stats = stats_;
  stats.memory_bytes = memory_.bytes();
  stats.memory_entries = memory_.size();
  if (disk_ != nullptr) {
    stats.corrupt_entries = disk_->corrupt_entries();
    stats.disk_evictions = disk_->evictions();
    stats.disk_bytes = disk_->approx_bytes();
    stats.disk_entries = disk_->approx_entries();
  }
  return stats;
}

absl::StatusOr<std::vector<DiskStore::EntryInfo>> KernelCache::List() const {
  if (disk_ == nullptr) return std::vector<DiskStore::EntryInfo>{};
  return disk_->List();
}

absl::StatusOr<DiskStore::GcResult> KernelCache::GarbageCollect(uint64_t budget_bytes) {
  if (disk_ == nullptr) return DiskStore::GcResult{};
  return disk_->GarbageCollect(budget_bytes);
}

void KernelCache::ClearFailures() {
  absl::MutexLock lock(&mu_);
  failures_.clear();
}

}  // namespace syncopate::cache
