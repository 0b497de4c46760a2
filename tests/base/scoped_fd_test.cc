#include "core/base/scoped_fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "gtest/gtest.h"

namespace syncopate {
namespace {

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

bool IsClosed(int fd) {
  errno = 0;
  return ::fcntl(fd, F_GETFD) == -1 && errno == EBADF;
}

// A fresh descriptor to own: the read end of a pipe whose write end is closed at once.
int OpenFd() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return -1;
  ::close(p[1]);
  return p[0];
}

TEST(ScopedFdTest, DefaultIsInvalid) {
  ScopedFd fd;
  EXPECT_FALSE(fd.valid());
  EXPECT_EQ(fd.get(), -1);
  fd.Reset();  // closing nothing is fine
  EXPECT_EQ(fd.Release(), -1);
}

TEST(ScopedFdTest, ClosesOnDestruction) {
  int raw = OpenFd();
  ASSERT_GE(raw, 0);
  {
    ScopedFd fd(raw);
    EXPECT_TRUE(fd.valid());
    EXPECT_EQ(fd.get(), raw);
    EXPECT_TRUE(IsOpen(raw));
  }
  EXPECT_TRUE(IsClosed(raw));
}

TEST(ScopedFdTest, MoveConstructionTransfersOwnership) {
  int raw = OpenFd();
  ASSERT_GE(raw, 0);
  ScopedFd outer;
  {
    ScopedFd inner(raw);
    outer = ScopedFd(std::move(inner));
    EXPECT_FALSE(inner.valid());  // NOLINT(bugprone-use-after-move): the moved-from state
  }
  EXPECT_TRUE(IsOpen(raw));  // the moved-from owner did not close it
  EXPECT_EQ(outer.get(), raw);
  outer.Reset();
  EXPECT_TRUE(IsClosed(raw));
}

TEST(ScopedFdTest, MoveAssignmentClosesTheOldDescriptor) {
  int a = OpenFd();
  int b = OpenFd();
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  ScopedFd fa(a);
  ScopedFd fb(b);
  fa = std::move(fb);
  EXPECT_TRUE(IsClosed(a));
  EXPECT_TRUE(IsOpen(b));
  EXPECT_EQ(fa.get(), b);
  EXPECT_FALSE(fb.valid());  // NOLINT(bugprone-use-after-move): the moved-from state

  ScopedFd& self = fa;
  fa = std::move(self);  // self-move keeps the descriptor
  EXPECT_TRUE(IsOpen(b));
  EXPECT_EQ(fa.get(), b);
}

TEST(ScopedFdTest, ReleaseDoesNotClose) {
  int raw = OpenFd();
  ASSERT_GE(raw, 0);
  {
    ScopedFd fd(raw);
    EXPECT_EQ(fd.Release(), raw);
    EXPECT_FALSE(fd.valid());
  }
  EXPECT_TRUE(IsOpen(raw));
  ::close(raw);
}

TEST(ScopedFdTest, ResetClosesAndAdopts) {
  int a = OpenFd();
  int b = OpenFd();
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  ScopedFd fd(a);
  fd.Reset(b);
  EXPECT_TRUE(IsClosed(a));
  EXPECT_EQ(fd.get(), b);
  fd.Reset();
  EXPECT_TRUE(IsClosed(b));
  EXPECT_FALSE(fd.valid());
}

}  // namespace
}  // namespace syncopate
