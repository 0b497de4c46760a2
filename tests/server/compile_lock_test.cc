// Integration (issue 17, item 2): two daemons share one cache_dir; A is frozen (SIGSTOP) while it
// holds the cross-process compile lock of a kernel. B's Compiles of that kernel end at their own
// deadline with DEADLINE_EXCEEDED naming the key and A's pid; twenty of them waiting at once do
// not keep B from compiling another kernel; lock and cache files are closed to other users.
// Deadline bounds here are deadline + slack, never speed measurements.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <filesystem>
#include <future>
#include <string>

#include "syncopate/v1/service.grpc.pb.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/test_kernels.h"

namespace syncopate::testing {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// The test kernel plus compile-time work, so NVRTC takes seconds: a window to freeze A in.
std::string SlowKernelSource() {
  std::string source =
      "__host__ __device__ constexpr unsigned long long Spin(unsigned long long n) {\n"
      "  unsigned long long s = 0;\n"
      "  for (unsigned long long i = 0; i < n; ++i) s = s * 6364136223846793005ull + i;\n"
      "  return s;\n"
      "}\n";
  for (int i = 0; i < 80; ++i) {
    source += "static_assert(Spin(100000 + " + std::to_string(i) + ") != 1, \"\");\n";
  }
  return source + kTestKernelSource;
}

v1::CompileRequest Request(const std::string& source, uint32_t timeout_ms) {
  v1::CompileRequest request;
  request.mutable_kernel()->set_source(source);
  request.mutable_kernel()->set_spec(kTestKernelSpec);
  request.set_arch("sm_90");
  request.set_timeout_ms(timeout_ms);
  return request;
}

grpc::Status Compile(v1::Compiler::Stub& stub, const v1::CompileRequest& request,
                     std::chrono::seconds client_deadline) {
  v1::CompileResponse response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + client_deadline);
  return stub.Compile(&ctx, request, &response);
}

// The key (file stem) of a lock file in `locks` that someone holds, or "".
std::string HeldLock(const std::string& locks) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(locks, ec)) {
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    ::close(fd);  // releases it again when it was free
    if (held) return entry.path().stem().string();
  }
  return "";
}

// Mode bits for others (and, for files, group write/execute) are what must stay clear.
void ExpectClosedToOthers(const std::string& dir) {
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    struct stat st;
    ASSERT_EQ(::stat(entry.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0007, 0u) << entry.path() << " mode " << std::oct << st.st_mode;
  }
  struct stat st;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0007, 0u) << dir;
}

class CompileLock : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string cache = "--cache_dir=" + dir_.Path("cache");
    a_ = std::make_unique<DaemonProcess>(SYNCOPATED_PATH, dir_, "a", std::vector<std::string>{cache});
    ASSERT_TRUE(a_->ok()) << a_->Log();
    // Two compile threads: four workers, fewer than the waiters below.
    b_ = std::make_unique<DaemonProcess>(SYNCOPATED_PATH, dir_, "b",
                                         std::vector<std::string>{cache, "--compile_threads=2"});
    ASSERT_TRUE(b_->ok()) << b_->Log();
    stub_a_ = v1::Compiler::NewStub(
        grpc::CreateChannel("unix:" + a_->socket(), grpc::InsecureChannelCredentials()));
    stub_b_ = v1::Compiler::NewStub(
        grpc::CreateChannel("unix:" + b_->socket(), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (a_ != nullptr) a_->process().Signal(SIGCONT);  // never leave a stopped process behind
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> a_, b_;
  std::unique_ptr<v1::Compiler::Stub> stub_a_, stub_b_;
};

TEST_F(CompileLock, FrozenHolderCostsWaitersOnlyTheirDeadline) {
  const std::string slow = SlowKernelSource();
  auto on_a = std::async(std::launch::async, [&] {
    return Compile(*stub_a_, Request(slow, 600000), std::chrono::seconds(600));
  });
  // A holds the key's lock once it compiles; freeze it there.
  std::string key;
  const auto give_up = Clock::now() + std::chrono::seconds(60);
  while (key.empty() && Clock::now() < give_up &&
         on_a.wait_for(std::chrono::milliseconds(5)) != std::future_status::ready) {
    key = HeldLock(dir_.Path("cache/locks"));
  }
  ASSERT_FALSE(key.empty()) << "A never held a compile lock: " << a_->Log();
  a_->process().Signal(SIGSTOP);
  const std::string a_pid = "pid " + std::to_string(a_->process().pid());

  // One waiter: its deadline, the key and the holder.
  {
    const auto start = Clock::now();
    const grpc::Status status = Compile(*stub_b_, Request(slow, 3000), std::chrono::seconds(8));
    EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(3000 + 2000));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(key));
    EXPECT_THAT(status.error_message(), HasSubstr(a_pid));
  }

  // Twenty waiters at once, more than B has workers: another kernel still compiles meanwhile.
  std::vector<std::future<grpc::Status>> waiters;
  const auto start = Clock::now();
  for (int i = 0; i < 20; ++i) {
    waiters.push_back(std::async(std::launch::async, [&] {
      return Compile(*stub_b_, Request(slow, 20000), std::chrono::seconds(40));
    }));
  }
  const grpc::Status other =
      Compile(*stub_b_, Request(kTestKernelSource, 15000), std::chrono::seconds(15));
  EXPECT_TRUE(other.ok()) << other.error_message();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(19)) << "the other kernel waited for them";
  for (auto& waiter : waiters) {
    const grpc::Status status = waiter.get();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(key));
  }
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(20000 + 5000));

  ExpectClosedToOthers(dir_.Path("cache"));

  // Thawed, A finishes; B then finds the kernel on disk.
  a_->process().Signal(SIGCONT);
  const grpc::Status done = on_a.get();
  EXPECT_TRUE(done.ok()) << done.error_message();
  const grpc::Status after = Compile(*stub_b_, Request(slow, 60000), std::chrono::seconds(60));
  EXPECT_TRUE(after.ok()) << after.error_message();
  ExpectClosedToOthers(dir_.Path("cache"));
}

}  // namespace
}  // namespace syncopate::testing
