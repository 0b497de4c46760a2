// Tests for jit/cache/disk_store and file_lock: entry format round trip and every way an entry
// can be damaged, listing, GC (budget, stale temp files, stale locks), default directory, locks.
#include "jit/cache/disk_store.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdlib>
#include <thread>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jit/cache/cache_key.h"
#include "jit/cache/file_lock.h"
#include "tests/testing/cache_test_util.h"

namespace syncopate::cache {
namespace {

using ::syncopate::cache::testing::ExpectSameKernel;
using ::syncopate::cache::testing::FakeKernel;
using ::syncopate::cache::testing::ReadFile;
using ::syncopate::cache::testing::ScratchDir;
using ::syncopate::cache::testing::WriteFile;
using ::testing::HasSubstr;

std::string Key(int i) { return CacheKey::FromParts({.source = std::to_string(i)}).hex(); }

void SetMtime(const std::string& path, time_t seconds_ago) {
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = ::time(nullptr) - seconds_ago;
  times[0].tv_nsec = times[1].tv_nsec = 0;
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

TEST(EntryFormatTest, RoundTrip) {
  nvrtc::CompiledKernel k = FakeKernel("abc");
  k.is_ptx = true;
  absl::StatusOr<nvrtc::CompiledKernel> back = DecodeEntry(Key(1), EncodeEntry(Key(1), k));
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameKernel(*back, k);
}

TEST(EntryFormatTest, EveryDamageIsDataLoss) {
  std::string good = EncodeEntry(Key(1), FakeKernel("abc"));
  std::vector<std::pair<std::string, std::string>> damaged;
  for (size_t offset :
       {size_t{0}, size_t{9}, size_t{20}, size_t{80}, size_t{110}, size_t{130}, good.size() - 1}) {
    std::string bad = good;
    bad[offset] ^= 0x5a;
    damaged.emplace_back("flip@" + std::to_string(offset), bad);
  }
  damaged.emplace_back("truncated", good.substr(0, good.size() - 7));
  damaged.emplace_back("header only", good.substr(0, 50));
  damaged.emplace_back("empty", "");
  damaged.emplace_back("trailing junk", good + "x");
  for (const auto& [what, bad] : damaged) {
    EXPECT_EQ(DecodeEntry(Key(1), bad).status().code(), absl::StatusCode::kDataLoss) << what;
  }
  EXPECT_THAT(DecodeEntry(Key(2), good).status().message(), HasSubstr("holds key"));
}

TEST(DiskStoreTest, PutGetRemove) {
  ScratchDir dir;
  auto store = DiskStore::Open(dir.path() + "/nested/cache", 0);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE(absl::IsNotFound((*store)->Get(Key(1)).status()));
  ASSERT_TRUE((*store)->Put(Key(1), FakeKernel("a")).ok());
  auto got = (*store)->Get(Key(1));
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameKernel(*got, FakeKernel("a"));
  EXPECT_EQ((*store)->approx_entries(), 1u);
  ASSERT_TRUE((*store)->Remove(Key(1)).ok());
  EXPECT_TRUE(absl::IsNotFound((*store)->Get(Key(1)).status()));
  EXPECT_EQ((*store)->Get("../../etc/passwd").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DiskStoreTest, CorruptEntryIsDeletedAndCounted) {
  ScratchDir dir;
  auto store = *DiskStore::Open(dir.path(), 0);
  ASSERT_TRUE(store->Put(Key(1), FakeKernel("a")).ok());
  std::string path = store->EntryPath(Key(1));
  std::string data = ReadFile(path);
  data[data.size() / 2] ^= 1;
  WriteFile(path, data);
  absl::Status status = store->Get(Key(1)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("SHA-256"));
  EXPECT_EQ(store->corrupt_entries(), 1u);
  struct stat st;
  EXPECT_NE(::stat(path.c_str(), &st), 0) << "corrupt entry must be deleted";
}

TEST(DiskStoreTest, ListOldestFirst) {
  ScratchDir dir;
  auto store = *DiskStore::Open(dir.path(), 0);
  for (int i = 0; i < 3; ++i) {
    nvrtc::CompiledKernel k = FakeKernel(std::to_string(i));
    k.is_ptx = i == 1;
    ASSERT_TRUE(store->Put(Key(i), k).ok());
    SetMtime(store->EntryPath(Key(i)), 100 - i);
  }
  WriteFile(store->EntryPath(Key(0)).substr(0, store->EntryPath(Key(0)).rfind('/')) + "/" + Key(7) +
                ".kc",
            "garbage");
  auto list = store->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 4u);
  int valid = 0;
  for (const auto& e : *list) {
    if (!e.problem.empty()) {
      EXPECT_EQ(e.key, Key(7));
      continue;
    }
    EXPECT_EQ(e.key, Key(valid));
    EXPECT_EQ(e.target, "sm_90");
    EXPECT_EQ(e.is_ptx, valid == 1);
    EXPECT_EQ(e.nvrtc_version, "13.0");
    ++valid;
  }
  EXPECT_EQ(valid, 3);
}

TEST(DiskStoreTest, GcEvictsOldestAndCleansUp) {
  ScratchDir dir;
  auto store = *DiskStore::Open(dir.path(), 0);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(store->Put(Key(i), FakeKernel(std::to_string(i), 10000)).ok());
    SetMtime(store->EntryPath(Key(i)), 1000 - i);  // Key(0) oldest
  }
  std::string shard = store->EntryPath(Key(0)).substr(0, store->EntryPath(Key(0)).rfind('/'));
  WriteFile(shard + "/.tmp.stale", "x");
  SetMtime(shard + "/.tmp.stale", 7200);
  WriteFile(shard + "/.tmp.fresh", "x");  // a write in progress: must survive
  WriteFile(dir.path() + "/locks/stale.lock", "");
  SetMtime(dir.path() + "/locks/stale.lock", 7200);
  uint64_t entry_size = ReadFile(store->EntryPath(Key(0))).size();

  auto gc = store->GarbageCollect(3 * entry_size, /*keep=*/Key(0));
  ASSERT_TRUE(gc.ok()) << gc.status();
  EXPECT_EQ(gc->removed_entries, 2);
  EXPECT_EQ(gc->removed_temp, 1);
  EXPECT_EQ(gc->removed_locks, 1);
  EXPECT_EQ(gc->remaining_entries, 3);
  EXPECT_LE(gc->remaining_bytes, 3 * entry_size);
  EXPECT_TRUE(store->Get(Key(0)).ok()) << "kept despite being oldest";
  EXPECT_FALSE(store->Get(Key(1)).ok());
  EXPECT_FALSE(store->Get(Key(2)).ok());
  EXPECT_TRUE(store->Get(Key(4)).ok());
  EXPECT_EQ(ReadFile(shard + "/.tmp.fresh"), "x");
  EXPECT_EQ(store->evictions(), 2u);
}

TEST(DiskStoreTest, PutEnforcesBudget) {
  ScratchDir dir;
  uint64_t entry_size = EncodeEntry(Key(0), FakeKernel("0", 10000)).size();
  auto store = *DiskStore::Open(dir.path(), 3 * entry_size);
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(store->Put(Key(i), FakeKernel(std::to_string(i), 10000)).ok());
    SetMtime(store->EntryPath(Key(i)), 1000 - i);
  }
  auto list = *store->List();
  EXPECT_LE(list.size(), 3u);
  EXPECT_LE(store->approx_bytes(), 3 * entry_size);
  EXPECT_TRUE(store->Get(Key(7)).ok());
  EXPECT_GE(store->evictions(), 5u);
}

// Going over budget evicts down to the low watermark, so the writes right after it do not scan
// the whole cache again (each scan reads every entry's header).
TEST(DiskStoreTest, AFullStoreEvictsToItsLowWatermark) {
  ScratchDir dir;
  const uint64_t entry_size = EncodeEntry(Key(0), FakeKernel("0", 10000)).size();
  auto store = *DiskStore::Open(dir.path(), 10 * entry_size);
  for (int i = 0; i < 11; ++i) {  // the 11th goes over the budget of 10
    ASSERT_TRUE(store->Put(Key(i), FakeKernel(std::to_string(i), 10000)).ok());
    SetMtime(store->EntryPath(Key(i)), 1000 - i);
  }
  EXPECT_LE(store->approx_bytes(), 10 * entry_size / 100 * DiskStore::kGcLowWatermarkPercent);
  const uint64_t evicted = store->evictions();
  EXPECT_GE(evicted, 2u);  // 11 entries down to under 9 entries' bytes
  ASSERT_TRUE(store->Put(Key(11), FakeKernel("11", 10000)).ok());  // within the budget again
  EXPECT_EQ(store->evictions(), evicted);
  EXPECT_TRUE(store->Get(Key(10)).ok());
  EXPECT_TRUE(store->Get(Key(11)).ok());
}

TEST(DiskStoreTest, ReopenCountsExistingBytes) {
  ScratchDir dir;
  {
    auto store = *DiskStore::Open(dir.path(), 0);
    ASSERT_TRUE(store->Put(Key(1), FakeKernel("a")).ok());
  }
  auto store = *DiskStore::Open(dir.path(), 0);
  EXPECT_EQ(store->approx_entries(), 1u);
  EXPECT_EQ(store->approx_bytes(), ReadFile(store->EntryPath(Key(1))).size());
}

TEST(DiskStoreTest, OpenFailsOnAFile) {
  ScratchDir dir;
  WriteFile(dir.path() + "/file", "x");
  auto store = DiskStore::Open(dir.path() + "/file", 0);
  EXPECT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr(dir.path() + "/file"));
}

TEST(DefaultCacheDirTest, EnvironmentOrder) {
  ::setenv("SYNCOPATE_CACHE_DIR", "/a/b", 1);
  EXPECT_EQ(*DefaultCacheDir(), "/a/b");
  ::unsetenv("SYNCOPATE_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/x", 1);
  EXPECT_EQ(*DefaultCacheDir(), "/x/syncopate");
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(*DefaultCacheDir(), "/home/u/.cache/syncopate");
}

TEST(FileLockTest, ExcludesAndReleases) {
  ScratchDir dir;
  std::string path = dir.path() + "/k.lock";
  {
    auto held = FileLock::Acquire(path);
    ASSERT_TRUE(held.ok() && held->held());
    auto other = FileLock::TryAcquire(path);
    ASSERT_TRUE(other.ok());
    EXPECT_FALSE(other->held());
  }
  auto again = FileLock::TryAcquire(path);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->held());
}

TEST(FileLockTest, WaiterSurvivesUnlinkedLockFile) {
  ScratchDir dir;
  std::string path = dir.path() + "/k.lock";
  auto first = FileLock::Acquire(path);
  ASSERT_TRUE(first.ok());
  std::thread waiter([&] {
    auto second = FileLock::Acquire(path);  // blocks until `first` goes
    ASSERT_TRUE(second.ok());
    struct stat a, b;
    ASSERT_EQ(::stat(path.c_str(), &a), 0);
    // It must hold the file the path names now, not the unlinked one.
    ASSERT_EQ(::stat(second->path().c_str(), &b), 0);
    EXPECT_EQ(a.st_ino, b.st_ino);
    EXPECT_FALSE(FileLock::TryAcquire(path)->held());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::unlink(path.c_str());  // what GC does to a stale lock it holds
  { FileLock gone = std::move(*first); }
  waiter.join();
}

}  // namespace
}  // namespace syncopate::cache
