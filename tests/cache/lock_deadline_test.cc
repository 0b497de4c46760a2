// Waits in the kernel cache end at the caller's deadline (issue 17, item 2): the file lock, and a
// thread waiting on another thread's compile of the same key. Lock files carry the holder's pid
// and are created 0660 whatever the umask. The cross-process case, with a stopped daemon, is
// tests/server/compile_lock_test.cc.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jit/cache/file_lock.h"
#include "jit/cache/kernel_cache.h"
#include "tests/testing/cache_test_util.h"

namespace syncopate::cache {
namespace {

using ::syncopate::cache::testing::FakeKernel;
using ::syncopate::cache::testing::ScratchDir;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

TEST(FileLockDeadline, WaitEndsAtTheDeadlineNamingTheHolder) {
  ScratchDir dir;
  const std::string path = dir.Path("k.lock");
  const mode_t old_umask = ::umask(0);  // the mode must not depend on it
  absl::StatusOr<FileLock> held = FileLock::Acquire(path);
  ::umask(old_umask);
  ASSERT_TRUE(held.ok()) << held.status();
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(FileLock::HolderPid(path), ::getpid());

  // flock excludes other open file descriptions, in this process too.
  absl::StatusOr<FileLock> waited =
      FileLock::Acquire(path, Clock::now() + std::chrono::milliseconds(200));
  EXPECT_TRUE(absl::IsDeadlineExceeded(waited.status())) << waited.status();
  EXPECT_THAT(waited.status().message(), HasSubstr(path));
  EXPECT_THAT(waited.status().message(), HasSubstr("pid " + std::to_string(::getpid())));

  // Freed, it is taken well before a generous deadline.
  *held = FileLock::TryAcquire(dir.Path("other.lock")).value();
  absl::StatusOr<FileLock> again =
      FileLock::Acquire(path, Clock::now() + std::chrono::seconds(30));
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST(KernelCacheDeadline, WaiterOnAnotherThreadsCompileStopsAtItsDeadline) {
  ScratchDir dir;
  auto cache = KernelCache::Open({.dir = dir.path()}).value();
  const CacheKey key = CacheKey::FromParts({.source = "slow", .nvrtc_version = "13.0"});
  absl::Notification release, started;
  std::thread leader([&] {
    auto r = cache->GetOrCompile(key, [&]() -> absl::StatusOr<nvrtc::CompiledKernel> {
      started.Notify();
      release.WaitForNotification();
      return FakeKernel("slow");
    });
    EXPECT_TRUE(r.ok()) << r.status();
  });
  started.WaitForNotification();
  auto waited = cache->GetOrCompile(
      key, [] { return absl::StatusOr<nvrtc::CompiledKernel>(FakeKernel("never")); }, {},
      Clock::now() + std::chrono::milliseconds(200));
  EXPECT_TRUE(absl::IsDeadlineExceeded(waited.status())) << waited.status();
  EXPECT_THAT(waited.status().message(), HasSubstr(key.hex()));

  // A request that does not wait joins the flight and hears its result from the leader.
  absl::Notification joined;
  auto now = cache->GetOrCompileUnlessInFlight(
      key, [] { return absl::StatusOr<nvrtc::CompiledKernel>(FakeKernel("never")); }, {},
      std::nullopt, [&](const absl::StatusOr<KernelCache::Result>& r) {
        EXPECT_TRUE(r.ok()) << r.status();
        joined.Notify();
      });
  EXPECT_FALSE(now.has_value());
  release.Notify();
  leader.join();
  EXPECT_TRUE(joined.HasBeenNotified());
}

TEST(KernelCacheDeadline, WaiterRetriesWhenTheLeaderHitItsOwnDeadline) {
  ScratchDir dir;
  auto cache = KernelCache::Open({.dir = dir.path()}).value();
  const CacheKey key = CacheKey::FromParts({.source = "retry", .nvrtc_version = "13.0"});
  absl::Notification release, started;
  std::thread leader([&] {
    (void)cache->GetOrCompile(key, [&]() -> absl::StatusOr<nvrtc::CompiledKernel> {
      started.Notify();
      release.WaitForNotification();
      return absl::DeadlineExceededError("the leader's own deadline");
    });
  });
  started.WaitForNotification();
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    release.Notify();
  });
  auto waited = cache->GetOrCompile(
      key, [] { return absl::StatusOr<nvrtc::CompiledKernel>(FakeKernel("mine")); }, {},
      Clock::now() + std::chrono::seconds(60));
  EXPECT_TRUE(waited.ok()) << waited.status();
  releaser.join();
  leader.join();
}

}  // namespace
}  // namespace syncopate::cache
