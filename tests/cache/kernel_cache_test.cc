// Tests for jit/cache/kernel_cache: memory and disk hits, corruption recovery, eviction, failure
// memory, and single flight across threads and across processes. Compiles are fakes that count
// their calls (in memory, or in a file for other processes).
#include "jit/cache/kernel_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <latch>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/cache_test_util.h"

namespace syncopate::cache {
namespace {

using ::syncopate::cache::testing::ExpectSameKernel;
using ::syncopate::cache::testing::FakeKernel;
using ::syncopate::cache::testing::ReadFile;
using ::syncopate::cache::testing::ScratchDir;
using ::syncopate::cache::testing::WriteFile;
using ::testing::HasSubstr;
using Source = KernelCache::Source;

CacheKey Key(const std::string& source) {
  return CacheKey::FromParts(
      {.source = source, .nvrtc_version = "13.0", .arch = "sm_90", .plan_hash = "p"});
}

std::unique_ptr<KernelCache> OpenCache(const std::string& dir, uint64_t memory = 64 << 20,
                                       uint64_t disk = 0) {
  auto cache =
      KernelCache::Open({.dir = dir, .memory_budget_bytes = memory, .disk_budget_bytes = disk});
  EXPECT_TRUE(cache.ok()) << cache.status();
  return *std::move(cache);
}

// A compile function that counts its calls and returns FakeKernel(seed).
struct CountingCompile {
  std::string seed;
  std::atomic<int>* calls;
  absl::StatusOr<nvrtc::CompiledKernel> operator()() const {
    ++*calls;
    return FakeKernel(seed);
  }
};

TEST(KernelCacheTest, CompileThenMemoryHit) {
  ScratchDir dir;
  auto cache = OpenCache(dir.path());
  std::atomic<int> calls = 0;
  auto first = cache->GetOrCompile(Key("a"), CountingCompile{"a", &calls});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->source, Source::kCompiled);
  auto second = cache->GetOrCompile(Key("a"), CountingCompile{"a", &calls});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->source, Source::kMemory);
  EXPECT_EQ(second->kernel.get(), first->kernel.get());
  EXPECT_EQ(calls, 1);
  CacheStats stats = cache->Stats();
  EXPECT_EQ(stats.memory_hits, 1u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.compiles, 1u);
  EXPECT_EQ(stats.memory_entries, 1u);
  EXPECT_EQ(stats.disk_entries, 1u);
  EXPECT_GT(stats.disk_bytes, 4096u);
}

TEST(KernelCacheTest, DiskHitAfterReopen) {
  ScratchDir dir;
  std::atomic<int> calls = 0;
  ASSERT_TRUE(OpenCache(dir.path())->GetOrCompile(Key("a"), CountingCompile{"a", &calls}).ok());
  auto cache = OpenCache(dir.path());
  auto result = cache->GetOrCompile(Key("a"), CountingCompile{"a", &calls});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->source, Source::kDisk);
  ExpectSameKernel(*result->kernel, FakeKernel("a"));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(cache->Stats().disk_hits, 1u);
  // Promoted to memory.
  EXPECT_EQ(cache->GetOrCompile(Key("a"), CountingCompile{"a", &calls})->source, Source::kMemory);
}

TEST(KernelCacheTest, DifferentKeysDoNotCollide) {
  ScratchDir dir;
  auto cache = OpenCache(dir.path());
  std::atomic<int> calls = 0;
  auto a = cache->GetOrCompile(Key("a"), CountingCompile{"a", &calls});
  auto b = cache->GetOrCompile(Key("b"), CountingCompile{"b", &calls});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->kernel->binary, b->kernel->binary);
  EXPECT_EQ(calls, 2);
}

enum class Damage { kFlipPayloadByte, kFlipHeaderByte, kTruncate, kEmpty };

class KernelCacheCorruptionTest : public ::testing::TestWithParam<Damage> {};

TEST_P(KernelCacheCorruptionTest, RecompiledReplacedAndCounted) {
  ScratchDir dir;
  std::atomic<int> calls = 0;
  std::string path;
  {
    auto cache = OpenCache(dir.path());
    ASSERT_TRUE(cache->GetOrCompile(Key("a"), CountingCompile{"a", &calls}).ok());
    path = cache->disk()->EntryPath(Key("a").hex());
  }
  std::string data = ReadFile(path);
  ASSERT_FALSE(data.empty());
  switch (GetParam()) {
    case Damage::kFlipPayloadByte:
      data[data.size() - 100] ^= 0x01;
      break;
    case Damage::kFlipHeaderByte:
      data[3] ^= 0x01;
      break;
    case Damage::kTruncate:
      data.resize(data.size() / 2);
      break;
    case Damage::kEmpty:
      data.clear();
      break;
  }
  WriteFile(path, data);

  auto cache = OpenCache(dir.path());
  auto result = cache->GetOrCompile(Key("a"), CountingCompile{"a", &calls});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->source, Source::kCompiled) << "a corrupt entry must never be loaded";
  ExpectSameKernel(*result->kernel, FakeKernel("a"));
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(cache->Stats().corrupt_entries, 1u);
  // The entry was replaced by a good one.
  auto again = OpenCache(dir.path())->GetOrCompile(Key("a"), CountingCompile{"a", &calls});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->source, Source::kDisk);
  EXPECT_EQ(calls, 2);
}

INSTANTIATE_TEST_SUITE_P(Damages, KernelCacheCorruptionTest,
                         ::testing::Values(Damage::kFlipPayloadByte, Damage::kFlipHeaderByte,
                                           Damage::kTruncate, Damage::kEmpty));

TEST(KernelCacheTest, MemoryEvictionUnderCap) {
  ScratchDir dir;
  // Room for about three 4 KiB kernels.
  auto cache = OpenCache(dir.path(), /*memory=*/3 * MemoryLru::Charge(FakeKernel("x")) + 300);
  std::atomic<int> calls = 0;
  for (const char* s : {"a", "b", "c", "d", "e"}) {
    ASSERT_TRUE(cache->GetOrCompile(Key(s), CountingCompile{s, &calls}).ok());
  }
  CacheStats stats = cache->Stats();
  EXPECT_EQ(stats.memory_entries, 3u);
  EXPECT_EQ(stats.memory_evictions, 2u);
  EXPECT_LE(stats.memory_bytes, 3 * MemoryLru::Charge(FakeKernel("x")) + 300);
  // Evicted from memory, still on disk.
  EXPECT_EQ(cache->GetOrCompile(Key("a"), CountingCompile{"a", &calls})->source, Source::kDisk);
  EXPECT_EQ(cache->GetOrCompile(Key("e"), CountingCompile{"e", &calls})->source, Source::kMemory);
  EXPECT_EQ(calls, 5);
}

TEST(KernelCacheTest, DiskEvictionUnderCapKeepsRecentlyUsed) {
  ScratchDir dir;
  uint64_t entry = EncodeEntry(Key("a").hex(), FakeKernel("a")).size();
  // Memory off, so every hit goes to disk and bumps the entry's mtime.
  auto cache = OpenCache(dir.path(), /*memory=*/0, /*disk=*/3 * entry + entry / 2);
  std::atomic<int> calls = 0;
  auto get = [&](const std::string& s) {
    auto r = cache->GetOrCompile(Key(s), CountingCompile{s, &calls});
    EXPECT_TRUE(r.ok()) << r.status();
    // File timestamps are coarse (a few ms); space the operations out so LRU order is clear.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return r.ok() ? r->source : Source::kCompiled;
  };
  get("a");
  get("b");
  get("c");
  EXPECT_EQ(get("a"), Source::kDisk);  // a is now the most recently used
  get("d");                            // over budget: evicts b (oldest)
  CacheStats stats = cache->Stats();
  EXPECT_EQ(stats.disk_evictions, 1u);
  EXPECT_EQ(stats.disk_entries, 3u);
  EXPECT_LE(stats.disk_bytes, 3 * entry + entry / 2);
  EXPECT_EQ(get("a"), Source::kDisk);
  EXPECT_EQ(get("c"), Source::kDisk);
  EXPECT_EQ(get("d"), Source::kDisk);
  int before = calls;
  EXPECT_EQ(get("b"), Source::kCompiled);
  EXPECT_EQ(calls, before + 1);
}

TEST(KernelCacheTest, FailedCompileRememberedNotStored) {
  ScratchDir dir;
  std::atomic<int> calls = 0;
  auto failing = [&calls]() -> absl::StatusOr<nvrtc::CompiledKernel> {
    ++calls;
    return absl::InvalidArgumentError("bad.cu:3: error: expected a \";\"");
  };
  auto cache = OpenCache(dir.path());
  for (int i = 0; i < 3; ++i) {
    auto r = cache->GetOrCompile(Key("bad"), failing);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("bad.cu:3"));
  }
  EXPECT_EQ(calls, 1);
  CacheStats stats = cache->Stats();
  EXPECT_EQ(stats.compile_failures, 1u);
  EXPECT_EQ(stats.failed_key_hits, 2u);
  EXPECT_EQ(stats.disk_entries, 0u);
  EXPECT_TRUE((*cache->List()).empty());
  // Another process (fresh instance) does not inherit the failure: nothing was written to disk.
  EXPECT_FALSE(OpenCache(dir.path())->GetOrCompile(Key("bad"), failing).ok());
  EXPECT_EQ(calls, 2);
  // After ClearFailures the kernel is compiled again.
  cache->ClearFailures();
  EXPECT_FALSE(cache->GetOrCompile(Key("bad"), failing).ok());
  EXPECT_EQ(calls, 3);
}

TEST(KernelCacheTest, FailureTtlExpires) {
  ScratchDir dir;
  auto cache = *KernelCache::Open({.dir = dir.path(), .failure_ttl = std::chrono::milliseconds(0)});
  std::atomic<int> calls = 0;
  auto failing = [&calls]() -> absl::StatusOr<nvrtc::CompiledKernel> {
    ++calls;
    return absl::InvalidArgumentError("nope");
  };
  EXPECT_FALSE(cache->GetOrCompile(Key("bad"), failing).ok());
  EXPECT_FALSE(cache->GetOrCompile(Key("bad"), failing).ok());
  EXPECT_EQ(calls, 2);
}

// Keys that failed once and are never asked for again do not stay: expired ones go when a
// failure is added, and the table is capped.
TEST(KernelCacheTest, RememberedFailuresAreBounded) {
  auto failing = []() -> absl::StatusOr<nvrtc::CompiledKernel> {
    return absl::InvalidArgumentError("nope");
  };
  auto expiring = *KernelCache::Open({.failure_ttl = std::chrono::seconds(0), .memory_only = true});
  for (int i = 0; i < 50; ++i) {
    EXPECT_FALSE(expiring->GetOrCompile(Key("bad" + std::to_string(i)), failing).ok());
  }
  EXPECT_LE(expiring->Stats().remembered_failures, 1u);

  auto lasting = *KernelCache::Open({.failure_ttl = std::chrono::hours(1), .memory_only = true});
  for (int i = 0; i < 1100; ++i) {
    EXPECT_FALSE(lasting->GetOrCompile(Key("bad" + std::to_string(i)), failing).ok());
  }
  EXPECT_EQ(lasting->Stats().remembered_failures, 1024u);
  // The newest is still remembered: asked again, it is not compiled again.
  int calls = 0;
  auto counted = [&calls]() -> absl::StatusOr<nvrtc::CompiledKernel> {
    ++calls;
    return absl::InvalidArgumentError("nope");
  };
  EXPECT_FALSE(lasting->GetOrCompile(Key("bad1099"), counted).ok());
  EXPECT_EQ(calls, 0);
}

// A kernel served from memory marks its disk entry used (at most once per interval), so the
// disk, which evicts the least recently used first, does not take it for unused.
TEST(KernelCacheTest, MemoryHitsMarkTheDiskEntryUsed) {
  ScratchDir dir;
  auto mtime_of = [](const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mtime;
  };
  auto age = [](const std::string& path) {
    const struct timespec old[2] = {{1000, 0}, {1000, 0}};  // 1970
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), old, 0), 0) << path;
  };
  auto compile = []() -> absl::StatusOr<nvrtc::CompiledKernel> { return FakeKernel("k"); };
  auto cache = *KernelCache::Open({.dir = dir.path()});  // touches at most hourly
  ASSERT_TRUE(cache->GetOrCompile(Key("k"), compile).ok());
  const std::string path = cache->disk()->EntryPath(Key("k").hex());
  age(path);
  ASSERT_EQ(cache->GetOrCompile(Key("k"), compile)->source, KernelCache::Source::kMemory);
  EXPECT_GT(mtime_of(path), 1000);  // the first memory hit marks it
  age(path);
  ASSERT_TRUE(cache->GetOrCompile(Key("k"), compile).ok());
  EXPECT_EQ(mtime_of(path), 1000);  // not again within the hour

  auto eager = *KernelCache::Open(
      {.dir = dir.path(), .disk_touch_interval = std::chrono::steady_clock::duration::zero()});
  ASSERT_TRUE(eager->GetOrCompile(Key("k"), compile).ok());  // from disk: a disk hit marks it
  age(path);
  ASSERT_EQ(eager->GetOrCompile(Key("k"), compile)->source, KernelCache::Source::kMemory);
  EXPECT_GT(mtime_of(path), 1000);
}

TEST(KernelCacheTest, TransientFailureIsNotRemembered) {
  ScratchDir dir;
  auto cache = OpenCache(dir.path());
  std::atomic<int> calls = 0;
  auto flaky = [&calls]() -> absl::StatusOr<nvrtc::CompiledKernel> {
    if (++calls == 1) return absl::DeadlineExceededError("compile cancelled at its deadline");
    return FakeKernel("a");
  };
  EXPECT_EQ(cache->GetOrCompile(Key("a"), flaky).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  auto r = cache->GetOrCompile(Key("a"), flaky);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(calls, 2);
}

TEST(KernelCacheTest, EightThreadsOneCompile) {
  ScratchDir dir;
  auto cache = OpenCache(dir.path());
  std::atomic<int> calls = 0;
  auto slow = [&calls]() -> absl::StatusOr<nvrtc::CompiledKernel> {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return FakeKernel("a");
  };
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::vector<absl::StatusOr<KernelCache::Result>> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      results[i] = cache->GetOrCompile(Key("a"), slow);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls, 1);
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->kernel.get(), results[0]->kernel.get()) << "all share one kernel object";
  }
  CacheStats stats = cache->Stats();
  EXPECT_EQ(stats.compiles, 1u);
  // Threads that arrived during the compile waited on it; any later ones hit memory.
  EXPECT_EQ(stats.shared_waits + stats.memory_hits, kThreads - 1u);
}

TEST(KernelCacheTest, EightThreadsShareOneFailure) {
  ScratchDir dir;
  auto cache = OpenCache(dir.path());
  std::atomic<int> calls = 0;
  auto failing = [&calls]() -> absl::StatusOr<nvrtc::CompiledKernel> {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return absl::InvalidArgumentError("does not compile");
  };
  std::latch start(8);
  std::atomic<int> errors = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      auto r = cache->GetOrCompile(Key("bad"), failing);
      if (r.status().code() == absl::StatusCode::kInvalidArgument &&
          r.status().message() == "does not compile") {
        ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(errors, 8);
}

TEST(KernelCacheTest, MemoryOnly) {
  auto cache = *KernelCache::Open({.memory_only = true});
  EXPECT_EQ(cache->disk(), nullptr);
  std::atomic<int> calls = 0;
  EXPECT_EQ(cache->GetOrCompile(Key("a"), CountingCompile{"a", &calls})->source, Source::kCompiled);
  EXPECT_EQ(cache->GetOrCompile(Key("a"), CountingCompile{"a", &calls})->source, Source::kMemory);
  EXPECT_EQ(calls, 1);
}

// Two processes ask for one key at the same moment; the compile function appends a line to a
// shared file, so the file's line count is the number of compiles across both processes.
TEST(KernelCacheTest, TwoProcessesOneCompile) {
  ScratchDir dir;
  const std::string count_file = dir.path() + "/compiles.txt";
  const std::string go_file = dir.path() + "/go";
  constexpr int kCompiled = 10, kFromDisk = 11, kError = 1;
  std::vector<pid_t> children;
  for (int i = 0; i < 2; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Child: no gtest assertions here, only an exit code.
      for (int spin = 0; spin < 10000 && ::access(go_file.c_str(), F_OK) != 0; ++spin) {
        ::usleep(1000);
      }
      auto cache = KernelCache::Open({.dir = dir.path() + "/cache"});
      if (!cache.ok()) ::_exit(kError);
      auto result =
          (*cache)->GetOrCompile(Key("a"), [&]() -> absl::StatusOr<nvrtc::CompiledKernel> {
            int fd = ::open(count_file.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
            if (fd >= 0) {
              (void)!::write(fd, "compile\n", 8);
              ::close(fd);
            }
            ::usleep(500 * 1000);  // long enough that the other process is surely waiting
            return FakeKernel("a");
          });
      if (!result.ok() || result->kernel->binary != FakeKernel("a").binary) ::_exit(kError);
      ::_exit(result->source == Source::kCompiled ? kCompiled : kFromDisk);
    }
    children.push_back(pid);
  }
  WriteFile(go_file, "go");
  std::vector<int> codes;
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    codes.push_back(WEXITSTATUS(status));
  }
  EXPECT_THAT(codes, ::testing::UnorderedElementsAre(kCompiled, kFromDisk));
  EXPECT_EQ(ReadFile(count_file), "compile\n");
}

}  // namespace
}  // namespace syncopate::cache
