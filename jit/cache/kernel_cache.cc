// Kernel cache with single flight; see kernel_cache.h.
#include "jit/cache/kernel_cache.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/status_macros.h"
#include "jit/cache/file_lock.h"
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
// them only after the notification, which orders the accesses. `joined` (guarded by the cache's
// mutex) holds the callbacks of GetOrCompileUnlessInFlight callers; the leader takes them when it
// leaves the flight table, so each runs exactly once.
struct KernelCache::InFlight {
  absl::Notification done;
  absl::StatusOr<std::shared_ptr<const nvrtc::CompiledKernel>> result;
  Source source = Source::kCompiled;
  std::atomic<pid_t> lock_holder{0};  // who the leader waits for, while it waits for the file lock
  std::vector<JoinedFn> joined;
};

namespace {

// A leader's failure that was about its own deadline, not about the kernel: a waiter with time
// left tries again rather than inherit it.
bool EndedByLeadersDeadline(const absl::Status& status) {
  return absl::IsDeadlineExceeded(status) || absl::IsCancelled(status);
}

bool Passed(const KernelCache::Deadline& deadline) {
  return deadline.has_value() && std::chrono::steady_clock::now() >= *deadline;
}

}  // namespace

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

KernelCache::Lookup KernelCache::Find(const std::string& hex,
                                      std::chrono::steady_clock::time_point start,
                                      JoinedFn* joined) {
  Lookup lookup;
  absl::MutexLock lock(&mu_);
  if (MemoryLru::Value hit = memory_.Get(hex)) {
    ++stats_.memory_hits;
    const auto now = std::chrono::steady_clock::now();
    lookup.done = Result{std::move(hit), Source::kMemory, now - start};
    if (disk_ != nullptr) {
      if (disk_touched_.size() > 4 * memory_.size() + 64) disk_touched_.clear();
      auto [touched, first] = disk_touched_.try_emplace(hex, now);
      if (first || now - touched->second >= options_.disk_touch_interval) {
        touched->second = now;
        lookup.touch_disk = true;
      }
    }
    return lookup;
  }
  if (auto it = failures_.find(hex); it != failures_.end()) {
    if (start < it->second.expires) {
      ++stats_.failed_key_hits;
      lookup.done = it->second.status;
      return lookup;
    }
    failures_.erase(it);
  }
  auto [it, inserted] = in_flight_.try_emplace(hex);
  if (inserted) {
    it->second = std::make_shared<InFlight>();
    lookup.leader = true;
  } else {
    ++stats_.shared_waits;
    if (joined != nullptr) it->second->joined.push_back(std::move(*joined));
  }
  lookup.flight = it->second;
  return lookup;
}

absl::StatusOr<KernelCache::Result> KernelCache::GetOrCompile(const CacheKey& key,
                                                              const CompileFn& compile,
                                                              const CompileFn& fetch,
                                                              Deadline deadline) {
  const auto start = std::chrono::steady_clock::now();
  const std::string& hex = key.hex();
  for (;;) {
    Lookup lookup = Find(hex, start, nullptr);
    if (lookup.touch_disk) (void)disk_->Touch(hex);  // best effort: recency only
    if (lookup.done.has_value()) return *std::move(lookup.done);
    if (lookup.leader) return Lead(hex, std::move(lookup.flight), compile, fetch, deadline, start);
    InFlight& flight = *lookup.flight;
    if (!deadline.has_value()) {
      flight.done.WaitForNotification();
    } else if (!flight.done.WaitForNotificationWithDeadline(
                   absl::Now() + absl::FromChrono(*deadline - std::chrono::steady_clock::now()))) {
      const pid_t holder = flight.lock_holder.load();
      return absl::DeadlineExceededError(absl::StrCat(
          "deadline passed waiting for kernel ", hex, ", which another request of this process "
          "is getting", holder > 0 ? absl::StrCat(" (it waits for the compile lock held by pid ",
                                                  holder, ")")
                                   : std::string()));
    }
    if (flight.result.ok()) {
      return Result{*flight.result, flight.source, std::chrono::steady_clock::now() - start};
    }
    if (!EndedByLeadersDeadline(flight.result.status()) || Passed(deadline)) {
      return flight.result.status();
    }
  }
}

std::optional<absl::StatusOr<KernelCache::Result>> KernelCache::GetOrCompileUnlessInFlight(
    const CacheKey& key, const CompileFn& compile, const CompileFn& fetch, Deadline deadline,
    JoinedFn joined) {
  const auto start = std::chrono::steady_clock::now();
  Lookup lookup = Find(key.hex(), start, &joined);
  if (lookup.touch_disk) (void)disk_->Touch(key.hex());  // best effort: recency only
  if (lookup.done.has_value()) return std::move(lookup.done);
  if (!lookup.leader) return std::nullopt;
  return Lead(key.hex(), std::move(lookup.flight), compile, fetch, deadline, start);
}

pid_t KernelCache::LockHolderOf(const CacheKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = in_flight_.find(key.hex());
  return it == in_flight_.end() ? 0 : it->second->lock_holder.load();
}

absl::StatusOr<KernelCache::Result> KernelCache::Lead(const std::string& hex,
                                                      std::shared_ptr<InFlight> flight,
                                                      const CompileFn& compile,
                                                      const CompileFn& fetch, Deadline deadline,
                                                      std::chrono::steady_clock::time_point start) {
  Source source = Source::kCompiled;
  absl::StatusOr<std::shared_ptr<const nvrtc::CompiledKernel>> result =
      Fetch(hex, compile, fetch, deadline, *flight, &source);
  std::vector<JoinedFn> joined;
  {
    absl::MutexLock lock(&mu_);
    // Publishing to memory and leaving the flight table happen under one lock, so a new request
    // either finds the kernel in memory or joins this flight; it never starts a second compile.
    if (result.ok()) {
      stats_.memory_evictions += memory_.Put(hex, *result);
    } else if (!IsTransient(result.status())) {
      RememberFailure(hex, result.status());
    }
    in_flight_.erase(hex);
    joined.swap(flight->joined);
  }
  flight->result = result;
  flight->source = source;
  flight->done.Notify();
  absl::StatusOr<Result> outcome =
      result.ok() ? absl::StatusOr<Result>(
                        Result{*std::move(result), source, std::chrono::steady_clock::now() - start})
                  : absl::StatusOr<Result>(result.status());
  for (JoinedFn& fn : joined) fn(outcome);
  return outcome;
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
    const std::string& key, const CompileFn& compile, const CompileFn& fetch, Deadline deadline,
    InFlight& flight, Source* source) {
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
    // Another process may be compiling this key: wait for its lock (until the deadline: a
    // stopped holder must not keep us forever), then look again.
    const std::string lock_path = disk_->LockPath(key);
    absl::StatusOr<FileLock> acquired = FileLock::TryAcquire(lock_path);
    if (acquired.ok() && !acquired->held()) {
      flight.lock_holder = FileLock::HolderPid(lock_path);  // for waiters that give up
      acquired = FileLock::Acquire(lock_path, deadline);
      flight.lock_holder = 0;
    }
    if (absl::IsDeadlineExceeded(acquired.status())) {
      return absl::DeadlineExceededError(
          absl::StrCat("kernel ", key, ": ", acquired.status().message()));
    }
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

void KernelCache::RememberFailure(const std::string& hex, const absl::Status& status) {
  const auto now = std::chrono::steady_clock::now();
  absl::erase_if(failures_, [now](const auto& entry) { return entry.second.expires <= now; });
  if (failures_.size() >= kMaxRememberedFailures && !failures_.contains(hex)) {
    auto soonest = std::min_element(
        failures_.begin(), failures_.end(),
        [](const auto& a, const auto& b) { return a.second.expires < b.second.expires; });
    failures_.erase(soonest);
  }
  failures_[hex] = Failure{status, now + options_.failure_ttl};
}

CacheStats KernelCache::Stats() const {
  absl::MutexLock lock(&mu_);
  CacheStats stats = stats_;
  stats.remembered_failures = failures_.size();
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
