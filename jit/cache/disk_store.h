// On-disk half of the kernel cache: one file per key, written atomically, verified on read,
// capped in size with least-recently-used eviction.
//
// Layout under the cache directory:
//   entries/<k0k1>/<key>.kc      an entry (k0k1: first two hex digits of the key)
//   entries/<k0k1>/.tmp.*        a write in progress (or left by a crash; GC removes old ones)
//   locks/<key>.lock             per-key flock for cross-process single flight (KernelCache)
// Entry file: a fixed header (magic "SYNKCACH", format version, key, SHA-256 of everything after
// the header, metadata size, payload size), then metadata (target, is_ptx, NVRTC version, log,
// lowered names), then the payload (cubin or PTX). Written to a temp file in the same directory,
// fsync'ed, renamed over the entry, and the directory fsync'ed, so a reader sees either nothing
// or a whole entry. A read checks magic, version, key, sizes and the content hash; an entry that
// fails is deleted and reported as DataLoss, never returned.
// Recency is the file's mtime, bumped on every hit; eviction removes the oldest first.
// Modes: directories the store creates are 0770, entries 0640, lock files 0660 (file_lock.h),
// whatever the umask: shared with the owner's group (the daemon's, like its socket's 0660),
// closed to other users, who could otherwise read kernels or hold a key's lock forever.
//
// Thread-safety: all methods are thread-safe and safe against other processes using the same
// directory (renames are atomic, deletions of missing files are ignored). The byte count used to
// decide when to evict is this process's estimate (a full scan at Open and at each eviction);
// other processes' writes are noticed at the next scan.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "jit/nvrtc/nvrtc_compiler.h"

namespace syncopate::cache {

// $SYNCOPATE_CACHE_DIR, else $XDG_CACHE_HOME/syncopate, else $HOME/.cache/syncopate.
absl::StatusOr<std::string> DefaultCacheDir();

// Serialised entry, exposed for tests and tools. Encode never fails; Decode returns DataLoss
// naming what is wrong.
std::string EncodeEntry(const std::string& key, const nvrtc::CompiledKernel& kernel);
absl::StatusOr<nvrtc::CompiledKernel> DecodeEntry(const std::string& key, absl::string_view file);

class DiskStore {
 public:
  // Where a Put that went over the budget evicts down to, in percent of the budget.
  static constexpr uint64_t kGcLowWatermarkPercent = 90;

  struct EntryInfo {
    std::string key;
    std::string path;
    uint64_t size_bytes = 0;                          // file size
    std::chrono::system_clock::time_point last_used;  // mtime
    // From the header and metadata (not hash-checked; List() is for people, not for loading).
    std::string target;
    bool is_ptx = false;
    std::string nvrtc_version;
    std::string problem;  // non-empty when the header or metadata cannot be read
  };

  struct GcResult {
    int removed_entries = 0;  // evicted to get under the budget
    int removed_invalid = 0;  // unreadable headers (corrupt) removed along the way
    int removed_temp = 0;     // stale temp files (older than kStaleTempAge)
    int removed_locks = 0;    // stale lock files nobody held
    uint64_t freed_bytes = 0;
    int remaining_entries = 0;
    uint64_t remaining_bytes = 0;
  };

  // Temp and lock files older than this are left over from crashed writers and may go.
  static constexpr std::chrono::minutes kStaleTempAge{60};

  // Creates `dir` (and entries/, locks/) if needed. budget_bytes == 0 means unlimited.
  static absl::StatusOr<std::unique_ptr<DiskStore>> Open(const std::string& dir,
                                                         uint64_t budget_bytes);

  // NotFound when absent; DataLoss when present but corrupt (the file is deleted first).
  // A hit bumps the entry's mtime.
  absl::StatusOr<nvrtc::CompiledKernel> Get(const std::string& key);

  // Writes the entry atomically (replacing any existing one), then, if the store is over budget,
  // evicts old entries down to kGcLowWatermarkPercent of it (never the entry just written): a
  // full cache then takes a tenth of its budget in new entries before the next scan of every
  // entry, instead of scanning on every write.
  absl::Status Put(const std::string& key, const nvrtc::CompiledKernel& kernel);

  absl::Status Remove(const std::string& key);
  // Marks the entry used now (its mtime), as a hit does; NotFound when there is none.
  absl::Status Touch(const std::string& key);

  // Every entry file, oldest first.
  absl::StatusOr<std::vector<EntryInfo>> List() const;

  // Evicts least recently used entries until at most `budget_bytes` remain (0: only clean up
  // temp files, stale locks and unreadable entries), and removes stale temp files. `keep` is
  // never evicted.
  absl::StatusOr<GcResult> GarbageCollect(uint64_t budget_bytes, const std::string& keep = "");

  std::string EntryPath(const std::string& key) const;
  std::string LockPath(const std::string& key) const;
  const std::string& dir() const { return dir_; }
  uint64_t budget_bytes() const { return budget_bytes_; }

  // Counters since Open (this process).
  uint64_t corrupt_entries() const { return corrupt_entries_.load(); }
  uint64_t evictions() const { return evictions_.load(); }
  uint64_t approx_bytes() const { return approx_bytes_.load(); }
  uint64_t approx_entries() const { return approx_entries_.load(); }

 private:
  DiskStore(std::string dir, uint64_t budget_bytes)
      : dir_(std::move(dir)), budget_bytes_(budget_bytes) {}
  void RemoveCorrupt(const std::string& path, uint64_t ino);

  const std::string dir_;
  const uint64_t budget_bytes_;
  std::atomic<uint64_t> corrupt_entries_{0};
  std::atomic<uint64_t> evictions_{0};
  std::atomic<uint64_t> approx_bytes_{0};
  std::atomic<uint64_t> approx_entries_{0};
  std::atomic<uint64_t> temp_counter_{0};
};

}  // namespace syncopate::cache
