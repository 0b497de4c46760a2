// Integration: a second daemon on a live daemon's --unix_socket exits 1 naming it (and the first
// keeps serving); a stale socket file with no listener is replaced.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>

#include "syncopate/client.h"
#include "tests/testing/subprocess.h"

namespace syncopate::testing {
namespace {

using ::testing::HasSubstr;

TEST(SocketOwnership, SecondDaemonOnALiveSocketExitsNamingIt) {
  TempDir dir;
  DaemonProcess first(SYNCOPATED_PATH, dir, "first");
  ASSERT_TRUE(first.ok()) << first.Log();
  Subprocess second(SYNCOPATED_PATH,
                    {"--unix_socket=" + first.socket(), "--listen=127.0.0.1:0",
                     std::string("--token=") + kTestToken, "--node_name=second"},
                    dir.Path("second.log"));
  EXPECT_EQ(second.Wait(std::chrono::seconds(60)), 1) << second.Output();
  EXPECT_THAT(second.Output(), HasSubstr("in use by a live daemon (pid " +
                                         std::to_string(first.process().pid())));
  // The first daemon's socket is still there and still its own.
  auto client = Client::Connect(first.socket());
  ASSERT_TRUE(client.ok());
  EXPECT_TRUE(client->CheckHealth().ok());
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_THAT(stats->daemon, HasSubstr("first"));
}

TEST(SocketOwnership, StaleSocketIsReplaced) {
  TempDir dir;
  const std::string path = dir.Path("stale.sock");
  {
    // A socket file nobody listens on, as a daemon killed with SIGKILL leaves behind.
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    close(fd);
  }
  DaemonProcess daemon(SYNCOPATED_PATH, dir, "stale");
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  auto client = Client::Connect(daemon.socket());
  ASSERT_TRUE(client.ok());
  EXPECT_TRUE(client->CheckHealth().ok());
}

}  // namespace
}  // namespace syncopate::testing
